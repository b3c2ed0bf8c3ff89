"""`RemoteGrove`: the Grove interface (`GroveAPI`, supervisor/contract.py) answered by a running
Grove service over HTTP, no Ray in this process. Light imports only: a command starts fast.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self, Unpack

from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.server.files import ServiceState, read_state
from grove.server.remote_records import (
    RemoteMessage,
    RemoteRecord,
    message_of,
    record_of,
    typed_fields,
)
from grove.server.remote_turn import RemoteTurn
from grove.server.service_link import RemoteError, ServiceGone, ServiceLink, healthy
from grove.server.wire import HeldStream
from grove.supervisor import bridge
from grove.supervisor.agent_tiers import say_children_tier, say_replaced
from grove.supervisor.batch.defaults import DEFAULT_CONCURRENCY
from grove.supervisor.command_defaults import CommandDefaults
from grove.supervisor.results import result_from_json

if TYPE_CHECKING:
    import threading

    from grove.actors.turn_result import TurnResult
    from grove.supervisor.batch.runner import Step
    from grove.supervisor.batch.tasks import Task
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.commands.registry import CommandOutcome
    from grove.supervisor.contract import Approver, OutputSchema
    from grove.supervisor.fork_options import ForkOptions

RETURN_WAIT_S = 180.0  # how long a batch's follower waits for a service that stopped
EARLY_ENDS_ALLOWED = 5  # a batch's stream ended early this often in a row by one service: an error


class BatchStopped(GroveError):
    """A batch in the service ended early; the text is why (its error's type and text)."""


class RemoteGrove:
    """The Grove of the service `state` describes, over HTTP: `GroveAPI` (turns, roots,
    batches, commands), answered as `supervisor.Grove` answers."""

    @classmethod
    def running(cls) -> RemoteGrove:
        """The running service's (`grove up`); `AsyncGrove(RemoteGrove.running())` for asyncio
        programs. RemoteError when none is up."""
        state = read_state()
        if state is None:
            raise RemoteError("no Grove service is running: start one with `grove up`")
        return cls(state)

    def __init__(self, state: ServiceState, *, observer: bool = False) -> None:
        """`observer`: its requests only look (`grove status`): see `ServiceLink`."""
        self.link = ServiceLink(state, observer=observer)
        self.approvers: dict[str, Approver] = {}
        self._presence: HeldStream | None = None

    @property
    def url(self) -> str:
        return self.link.url

    @property
    def attended(self) -> bool:
        """Whether a session has an approver here (its turns' streams are read for it)."""
        return bool(self.approvers)

    @property
    def started(self) -> float:
        """Which start of the service this follows."""
        return self.link.started

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Nothing to start (the service runs Grove): while this is open, idle or not (a chat
        between prompts), the service counts it a client, and does not stop for idleness."""
        if self._presence is None:
            self._presence = self.link.held("/api/presence/stream")

    def close(self) -> None:
        if self._presence is not None:
            self._presence.close()
            self._presence = None
        self.link.close()

    # --- what a command takes from the configuration ---------------------------------------

    def defaults(self) -> CommandDefaults:
        """The service's configuration as a command line uses it."""
        return CommandDefaults.from_dict(self.link.json("GET", "/api/settings"))

    def activity(self) -> dict[str, Any]:
        """The service's clients and work, for its idle stop: server/idle.py's `activity`."""
        found: dict[str, Any] = self.link.json("GET", "/api/service")
        return found

    def models(self, include_retired: bool = False, provider: str | None = None) -> list[Any]:
        """The service's catalog, as `Grove.models`."""
        params: dict[str, Any] = {"include_retired": include_retired}
        if provider is not None:
            params["provider"] = provider
        rows: list[Any] = self.link.json("GET", "/api/models", params=params)["models"]
        return rows

    # --- roots, turns, commands -------------------------------------------------------------

    def create_root(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        isolation: str | None = None,
        tools: Sequence[str] | None = None,
        allow: Sequence[str] = (),
        approver: Approver | None = None,
        budget: Budget | None = None,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        tier: str | None = None,
    ) -> RemoteRecord:
        """As `Grove.create_root` (`output_type` a JSON schema dict); the modules of
        `package.module:attr` tools that the service cannot import itself (local files) go
        with the request."""
        from grove.supervisor.tool_files import module_files

        given = list(tools or [])
        body = {
            "model": model,
            "system": system,
            "isolation": isolation,
            "tools": given,
            "tool_files": module_files(name for name in given if ":" in name),
            "allow": list(allow),
            "budget": budget.as_dict() if budget is not None else None,
            "output_type": output_type,
            "output_retries": output_retries,
            "tier": tier,
        }
        record = record_of(self.link.json("POST", "/api/roots", body))
        say_replaced(record.provider, record.model, tier)
        if approver is not None:
            self.set_approver(record.uuid, approver)
        return record

    def agent(self, prefix: str) -> RemoteRecord:
        return record_of(self.link.json("GET", f"/api/agents/{prefix}"))

    def seed(self, agent: str, entries: list[tuple[str, str]]) -> list[RemoteMessage]:
        """As `Grove.seed`: the messages appended to `agent`'s history, running no turn."""
        stored = self.link.json("POST", f"/api/agents/{agent}/seed", {"messages": entries})
        return [message_of(message) for message in stored["messages"]]

    def fork_many(
        self,
        parent: str,
        prompts: list[str],
        model: str | None = None,
        *,
        system: str | None = None,
        advisor: str | None = None,
        keys: list[str] | None = None,
        budget: Budget | None = None,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> list[str]:
        """As `Grove.fork_many`: one child of `parent` per prompt, all started; their uuids."""
        body = {
            "prompts": prompts,
            "model": model,
            "system": system,
            "advisor": advisor,
            "keys": keys,
            "budget": budget.as_dict() if budget is not None else None,
            **typed_fields(output_type, output_retries),
            **options,
        }
        found = self.link.json("POST", f"/api/agents/{parent}/fork", body)
        children: list[str] = found["children"]
        say_children_tier(self, children, options.get("tier"))
        return children

    def send(
        self,
        agent: str,
        text: str,
        *,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> RemoteTurn:
        """As `Grove.send`: the turn, started when first read or waited for."""
        return RemoteTurn(self, agent, text, typed_fields(output_type, output_retries))

    def begin_turn(self, agent: str, text: str, typed: dict[str, Any] | None = None) -> None:
        """Send `text` (with `typed`, the output type's fields) to start a turn, its result
        left to `wait_turn`."""
        body = {"text": text, "wait": False, **(typed or {})}
        self.link.json("POST", f"/api/agents/{agent}/prompts", body)

    def ask(
        self,
        agent: str,
        text: str,
        timeout_s: float = 3600.0,
        *,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> TurnResult:
        """As `Grove.ask`: send `text` and wait for the turn's result."""
        turn = self.send(agent, text, output_type=output_type, output_retries=output_retries)
        return turn.result(timeout_s)

    def dispatch(self, session: str, line: str, origin: str = "api") -> CommandOutcome:
        from grove.supervisor.commands.registry import CommandOutcome

        found = self.link.json(
            "POST", f"/api/agents/{session}/commands", {"line": line, "origin": origin}
        )
        return CommandOutcome(text=found["text"], ok=found["ok"], data=found.get("data") or {})

    def command_turn(self, outcome: CommandOutcome) -> RemoteTurn | None:
        """The turn a command started (`/fork PROMPT` starts the child's), to stream it."""
        if "ticket" not in outcome.data:
            return None
        return RemoteTurn(self, str(outcome.data["child"]))

    def focus(self, session: str) -> str:
        focus: str = self.link.json("GET", f"/api/sessions/{session}/focus")["agent"]
        return focus

    def cancel(self, agent: str) -> bool:
        return bool(self.link.json("POST", f"/api/agents/{agent}/cancel")["cancelled"])

    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None:
        found = self.link.json("GET", f"/api/agents/{agent}/wait", params={"timeout": timeout_s})
        return None if found["result"] is None else result_from_json(found["result"])

    def set_todo(self, session: str, markdown: str) -> str:
        answer = self.link.json("POST", f"/api/sessions/{session}/todo", {"markdown": markdown})
        text: str = answer["text"]
        return text

    def advice(self, agent: str) -> list[RemoteMessage]:
        """As `Grove.advice`: the advisor cards delivered to `agent`, oldest first."""
        found = self.link.json("GET", f"/api/agents/{agent}/advice")
        return [message_of(message) for message in found["advice"]]

    def watch(self, agent: str) -> Iterator[tuple[str, str]]:
        """As `Grove.watch`: the deltas of the agent's turn in progress, to its end."""
        for event, data in self.link.stream_events("GET", f"/api/agents/{agent}/stream"):
            if event == "delta":
                delta = json.loads(data)
                yield delta["kind"], delta["text"]

    def attend_approvals(self, session: str, on: bool) -> None:
        """As `Grove.attend_approvals`: the session's approval requests come in its streams."""
        self.link.json("POST", f"/api/sessions/{session}/approvals", {"attend": on})

    def answer_approval(self, request_id: str, decision: str) -> str:
        """As `Grove.answer_approval`: "y", "n" or "a" (always, for this session)."""
        found = self.link.json("POST", f"/api/approvals/{request_id}", {"decision": decision})
        text: str = found["text"]
        return text

    def set_approver(self, session: str, approver: Approver | None) -> None:
        """Who answers "may this tool run?" for the session (see `Grove.set_approver`): the
        service sends the requests in the turn's stream, this process asks, the service is
        told."""
        if approver is None:
            self.approvers.pop(session, None)
        else:
            self.approvers[session] = approver
        self.attend_approvals(session, approver is not None)

    def approve(self, notice: str) -> None:
        from grove.supervisor.approvals import ApprovalRequest

        request = ApprovalRequest(**json.loads(notice))
        approver = self.approvers.get(request.session)
        decision = approver(request) if approver is not None else "n"
        self.answer_approval(request.request, decision)

    # --- batches ------------------------------------------------------------------------------

    def run_batch(
        self,
        root: str,
        tasks: list[Task],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        advisor: str | None = None,
        key: str = "",
        stop: threading.Event | None = None,
        output_type: OutputSchema | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        **options: Unpack[ForkOptions],
    ) -> Iterator[Step]:
        """As `Grove.run_batch`, run by the service: its records as they come (`output_type`,
        a JSON schema dict, goes as the `schema` of each task without one). Leaving early
        (Ctrl+C) stops the batch there; BatchStopped when the service's run failed. When the
        service stops mid-batch, its next start takes the batch up again, and this follows it
        there from the records it had."""
        from grove.supervisor.batch.tasks import task_json

        default = {} if output_type is None else {"schema": output_type}
        lines = "".join(json.dumps({**default, **task_json(task)}) + "\n" for task in tasks)
        params: dict[str, Any] = {
            "root": root,
            "concurrency": concurrency,
            "key": key,
            "output_retries": output_retries,
            "advisor": advisor,
            **options,
        }
        params = {name: value for name, value in params.items() if value is not None}
        run = self.link.json("POST", "/api/batches", params=params, content=lines.encode())
        records, ended, early_ends = 0, False, 0
        try:
            while True:
                following_from = records
                try:
                    path, after = f"/api/batches/{run['id']}/records", {"after": records}
                    for event, data in self.link.stream_events("GET", path, params=after):
                        if event == "record":
                            records += 1
                            yield json.loads(data)
                        elif event == "tick":
                            yield None
                        elif event == "end":
                            ended = True
                            error = json.loads(data)["error"]
                            if error:
                                raise BatchStopped(error)
                            return
                    # The stream ended without the batch's end: again, if nothing came since.
                    early_ends = early_ends + 1 if records == following_from else 1
                except ServiceGone:
                    early_ends = 0
                yield from self._come_back(run["id"], early_ends)  # its next start goes on
        finally:
            if not ended:  # the caller went away (Ctrl+C) or the service did: stop it there
                with contextlib.suppress(RemoteError):
                    self.link.json("POST", f"/api/batches/{run['id']}/stop")

    def _come_back(self, batch: str, early_ends: int) -> Generator[None, None, None]:
        """After a batch's stream was cut off (`early_ends` 0) or ended early (that many times
        in a row, nothing new between): wait (a None each second) until the service answers
        again, perhaps at another address; ServiceGone after RETURN_WAIT_S without it. A
        stopping service ends its streams while it still answers, so the same service is
        followed again after a second; one that keeps ending them early is a RemoteError."""
        deadline = time.monotonic() + RETURN_WAIT_S
        while time.monotonic() < deadline:
            state = read_state()
            if state is not None and healthy(state):
                if state.started == self.link.started and early_ends:
                    if early_ends >= EARLY_ENDS_ALLOWED:
                        raise RemoteError(f"The Grove service at {self.url} ended a stream early")
                    yield None
                    bridge.sleep(1.0)
                    return
                self.link.moved_to(state)
                return
            yield None
            bridge.sleep(1.0)  # an AsyncGrove's loop goes on meanwhile
        raise ServiceGone(
            f"The Grove service at {self.url} stopped and did not come back within "
            f"{RETURN_WAIT_S:.0f} s; started again (grove up), it goes on with batch {batch}"
        )
