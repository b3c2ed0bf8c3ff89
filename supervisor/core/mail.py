"""`Mail`: messages handed to agents between turns: mail from agents and people (one or a
batch in one transaction), advice injected by reviewers; each reaches its model at the agent's
next step boundary."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from grove.actors.contract import HOST_CALL_TIMEOUT_S, HostAPI
from grove.actors.turn_result import NewEntry
from grove.supervisor.core.forks import Forks
from grove.supervisor.errors import CommandError
from grove.supervisor.store.records import AgentRecord, MessageRecord, NewMessage
from grove.supervisor.turns import stored_entry

MAX_BATCH = 100_000


class Mail(Forks):
    """Mail stored and steered into running agents, one by one or routed in batches;
    advice injected."""

    async def deliver_mail(self, sender: str, recipient: str, text: str) -> MessageRecord:
        """Store mail for a running agent; it reaches the model at its next step boundary."""
        record = self.agent(recipient)
        if record.status != "running":
            raise CommandError(f"Agent {record.uuid} is {record.status}")
        data = {"sender": sender}
        message = self.store.append_message(record.uuid, "mail", text, data)
        state = self.live(record.uuid)
        if state.active:
            entry = stored_entry(message)
            await asyncio.wait_for(state.host.steer(record.uuid, entry), HOST_CALL_TIMEOUT_S)
        state.mail.put_nowait(message)
        self.event("MailDelivered", sender=sender, recipient=record.uuid, message_id=message.id)
        return message

    async def inject(self, uuid: str, message: MessageRecord, *, interrupting: bool) -> None:
        """Hand a stored message (advice) to an agent: an aside waits for its next step
        boundary; interrupting advice steers a streaming turn, or starts one when idle."""
        state = self.live(uuid)
        kind = "steering" if interrupting else message.kind
        if state.ticket_id is not None or (state.active and not interrupting):
            await asyncio.wait_for(
                state.host.steer(uuid, stored_entry(message, kind)), HOST_CALL_TIMEOUT_S
            )
        elif interrupting:
            await self.begin_turn(uuid, None, entry=stored_entry(message, kind))

    async def route_mail(self, batch: Sequence[tuple[str, str, str]]) -> list[int]:
        """Deliver every `(sender, recipient, text)` as `deliver_mail` would (stored, then queued
        for the recipient, and steered into it at its next step boundary when a host holds it),
        with one store transaction and one `MailRouted` event for the batch. Refused whole,
        nothing stored, when a recipient is unknown or not running. The stored ids, in order."""
        if len(batch) > MAX_BATCH:
            raise CommandError(
                f"A mail batch holds at most {MAX_BATCH:,} messages, not {len(batch):,}"
            )
        if not batch:
            return []
        recipients: dict[str, AgentRecord] = {}
        for _, recipient, _ in batch:
            if recipient not in recipients:
                record = recipients[recipient] = self.agent(recipient)
                if record.status != "running":
                    raise CommandError(f"Agent {record.uuid} is {record.status}")
        stored = self.store.append_messages(
            [
                NewMessage(
                    agent_uuid=recipients[recipient].uuid,
                    kind="mail",
                    content=text,
                    data={"sender": sender},
                )
                for sender, recipient, text in batch
            ]
        )
        steering: dict[str, tuple[HostAPI, list[tuple[str, NewEntry]]]] = {}
        for message in stored:
            state = self.live(message.agent_uuid)
            if state.active:
                entry = stored_entry(message)
                steered = steering.setdefault(state.host_id, (state.host, []))[1]
                steered.append((message.agent_uuid, entry))
            state.mail.put_nowait(message)
        await asyncio.gather(
            *(
                asyncio.wait_for(host.steer_many(entries), HOST_CALL_TIMEOUT_S)
                for host, entries in steering.values()
            )
        )
        ids = [message.id for message in stored]
        self.event("MailRouted", count=len(ids), message_ids=ids)
        return ids
