"""Mail routed in batches: many (sender, recipient, text) stored in ONE transaction, one
steering call per host, one event. Single mails go through `SupervisorCore.deliver_mail`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from grove.actors.agent import NewEntry
from grove.supervisor.errors import CommandError
from grove.supervisor.service import HOST_CALL_TIMEOUT_S, SupervisorCore
from grove.supervisor.store.records import AgentRecord, NewMessage
from grove.supervisor.turns import HostClient, stored_entry

MAX_BATCH = 100_000


async def route_mail(core: SupervisorCore, batch: Sequence[tuple[str, str, str]]) -> list[int]:
    """Deliver every `(sender, recipient, text)` as `deliver_mail` would (stored, then queued
    for the recipient, and steered into it at its next step boundary when a host holds it),
    with one store transaction and one `MailRouted` event for the batch. Refused whole,
    nothing stored, when a recipient is unknown or not running. The stored ids, in order."""
    if len(batch) > MAX_BATCH:
        raise CommandError(f"A mail batch holds at most {MAX_BATCH:,} messages, not {len(batch):,}")
    if not batch:
        return []
    recipients: dict[str, AgentRecord] = {}
    for _, recipient, _ in batch:
        if recipient not in recipients:
            record = recipients[recipient] = core.agent(recipient)
            if record.status != "running":
                raise CommandError(f"Agent {record.uuid} is {record.status}")
    stored = core.store.append_messages(
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
    steering: dict[str, tuple[HostClient, list[tuple[str, NewEntry]]]] = {}
    for message in stored:
        state = core.live(message.agent_uuid)
        if state.active:
            entry = stored_entry(message)
            host = state.host
            steering.setdefault(host.host_id, (host, []))[1].append((message.agent_uuid, entry))
        state.mail.put_nowait(message)
    await asyncio.gather(
        *(
            asyncio.wait_for(host.steer_many(entries), HOST_CALL_TIMEOUT_S)
            for host, entries in steering.values()
        )
    )
    ids = [message.id for message in stored]
    core.event("MailRouted", count=len(ids), message_ids=ids)
    return ids
