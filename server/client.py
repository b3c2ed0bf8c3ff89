"""`RemoteGrove`: the `Grove` interface the command line uses, answered by a running Grove
service over HTTP (no Ray in this process), with `RemoteTurn` for a turn's stream. Its reads
answer as `supervisor.reads.StoreReads` does. Light imports only: a command starts fast.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grove.providers.base import DEFAULT_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.server.answers import Answer
from grove.server.files import ServiceState, read_state, service_token
from grove.server.wire import NO_ANSWER, OBSERVER_HEADER, HeldStream, Wire, answers, sse_events
from grove.supervisor import bridge
from grove.supervisor.command_defaults import CommandDefaults
from grove.supervisor.errors import TurnTimeout
from grove.supervisor.results import result_from_json

if TYPE_CHECKING:
    import threading

    from grove.actors.turn_result import TurnResult
    from grove.supervisor.approvals import ApprovalRequest
    from grove.supervisor.batch.runner import Step
    from grove.supervisor.batch.tasks import Task
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.commands.registry import CommandOutcome

HEALTH_TIMEOUT_S = 2.0
RETURN_WAIT_S = 180.0  # how long a batch's follower waits for a service that stopped
EARLY_ENDS_ALLOWED = 5  # a batch's stream ended early this often in a row by one service: an error


class RemoteError(GroveError):
    """The service refused a request, or did not answer; the text says which and why."""


class ServiceGone(RemoteError):
    """The service did not answer (not running, or stopped mid-answer)."""


class BatchStopped(GroveError):
    """A batch in the service ended early; the text is why (its error's type and text)."""


@dataclass(frozen=True, slots=True)
class RemoteRecord:
    """What a command needs of an agent's record."""

    uuid: str
    parent_uuid: str | None = None
    provider: str | None = None
    model: str | None = None
    thinking_level: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # its `tool_policy` alone


def record_of(data: dict[str, Any]) -> RemoteRecord:
    fields = ("parent_uuid", "provider", "model", "thinking_level")
    given = {name: data.get(name) for name in fields}
    return RemoteRecord(data["uuid"], **given, metadata=data.get("metadata") or {})


def error_text(answer: Answer) -> str:
    """What the service said went wrong: its `error` (Grove's refusals) or `detail` (the
    API's own checks), else the body as it is."""
    try:
        error = answer.json()
    except ValueError:
        return answer.text
    text = (error.get("error") or error.get("detail")) if isinstance(error, dict) else None
    if text is None:
        return answer.text
    return text if isinstance(text, str) else json.dumps(text)


def healthy(state: ServiceState) -> bool:
    return answers(state.url, HEALTH_TIMEOUT_S)


def dashboard_url(state: ServiceState) -> str:
    return f"{state.url}/?token={service_token()}"


class RemoteTurn:
    """A turn on the service: iterate for `(kind, text)` deltas; `result()` waits for its
    end. `prompt` set: the turn is started by sending it when first read or waited for."""

    def __init__(self, grove: RemoteGrove, agent: str, prompt: str | None = None) -> None:
        self.agent = agent
        self._grove = grove
        self._prompt = prompt
        self._result: TurnResult | None = None
        self._read = False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        self._read = True
        if self._prompt is not None:
            body = {"text": self._prompt, "stream": True}
            events = self._grove.stream_events("POST", f"/api/agents/{self.agent}/prompts", body)
        else:
            events = self._grove.stream_events("GET", f"/api/agents/{self.agent}/stream")
        for event, data in events:
            if event == "delta":
                delta = json.loads(data)
                if delta["kind"] == "approval":  # a tool asks first: the session's approver
                    self._grove.approve(delta["text"])
                    continue
                yield delta["kind"], delta["text"]
            elif event == "result":
                self._result = result_from_json(json.loads(data))

    def result(self, timeout_s: float = 3600.0) -> TurnResult:
        """The turn's result; TurnTimeout when it has not ended within `timeout_s` (it goes
        on). With an approver, as for a local `Turn`, the stream is read first, to its end."""
        if self._result is None and not self._read and self._grove.approvers:
            for _ in self:  # the prompt is sent, and approvals come, by reading the stream
                pass
        if self._result is None and not self._read and self._prompt is not None:
            self._grove.begin_turn(self.agent, self._prompt)
            self._prompt = None  # begun: a reader now follows it as it goes
        if self._result is None:
            waited = self._grove.wait_turn(self.agent, timeout_s)
            if waited is None:  # the service's wait ended before the turn did
                raise TurnTimeout(self.agent, timeout_s)
            self._result = waited
        return self._result


class RemoteGrove:
    """The `Grove` of the service `state` describes, over HTTP: what the command line needs of
    `supervisor.Grove` (turns, roots, batches, commands) and of `StoreReads` (the reads)."""

    @classmethod
    def running(cls) -> RemoteGrove:
        """The running service's (`grove up`); `AsyncGrove(RemoteGrove.running())` for asyncio
        programs, with the methods its API has. RemoteError when none is up."""
        state = read_state()
        if state is None:
            raise RemoteError("no Grove service is running: start one with `grove up`")
        return cls(state)

    def __init__(self, state: ServiceState, *, observer: bool = False) -> None:
        """`observer`: its requests only look (`grove status`): the service does not count
        them as a client's, for its idle stop (server/idle.py)."""
        self.url = state.url
        self.started = state.started  # which start of the service this is
        self.approvers: dict[str, Callable[[ApprovalRequest], str]] = {}
        headers = {"authorization": f"Bearer {service_token()}"}
        self._wire = Wire(state.url, headers | ({OBSERVER_HEADER: "1"} if observer else {}))
        self._presence: HeldStream | None = None

    def __enter__(self) -> RemoteGrove:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Nothing to start (the service runs Grove): while this is open, idle or not (a chat
        between prompts), the service counts it a client, and does not stop for idleness."""
        if self._presence is None:
            self._presence = HeldStream(self._wire, "/api/presence/stream")

    def close(self) -> None:
        if self._presence is not None:
            self._presence.close()
            self._presence = None
        self._wire.close()

    def _json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
    ) -> Any:
        try:
            answer = self._wire.request(method, path, body, params=params, content=content)
        except NO_ANSWER as exc:
            raise ServiceGone(f"The Grove service at {self.url} did not answer: {exc}") from exc
        if answer.status >= 400:
            raise RemoteError(error_text(answer))
        return answer.json()

    def stream_events(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Iterator[tuple[str, str]]:
        """`(event, data)` of a Server-Sent Events answer, as they arrive."""
        try:
            with self._wire.stream(method, path, body, params=params) as response:
                if response.status >= 400:
                    raise RemoteError(error_text(Answer(response.status, response.read())))
                yield from sse_events(response)
        except NO_ANSWER as exc:
            raise ServiceGone(f"The Grove service at {self.url} did not answer: {exc}") from exc

    # --- what a command takes from the configuration ---------------------------------------

    def defaults(self) -> CommandDefaults:
        """The service's configuration as a command line uses it."""
        return CommandDefaults.from_dict(self._json("GET", "/api/settings"))

    def activity(self) -> dict[str, Any]:
        """The service's clients and work, for its idle stop: server/idle.py's `activity`."""
        found: dict[str, Any] = self._json("GET", "/api/service")
        return found

    def models(self, include_retired: bool = False, provider: str | None = None) -> list[Any]:
        """The service's catalog, as `Grove.models`."""
        params: dict[str, Any] = {"include_retired": include_retired}
        if provider is not None:
            params["provider"] = provider
        rows: list[Any] = self._json("GET", "/api/models", params=params)["models"]
        return rows

    # --- roots, turns, commands -------------------------------------------------------------

    def create_root(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        tools: list[str] | None = None,
        allow: list[str] | tuple[str, ...] = (),
        budget: Budget | None = None,
        output_type: dict[str, Any] | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> RemoteRecord:
        """As `Grove.create_root` (`output_type` a JSON schema dict); the modules of
        `package.module:attr` tools that the service cannot import itself (local files) go
        with the request."""
        from grove.supervisor.tool_files import module_files

        given = list(tools or [])
        body = {
            "model": model,
            "system": system,
            "tools": given,
            "tool_files": module_files(name for name in given if ":" in name),
            "allow": list(allow),
            "budget": budget.as_dict() if budget is not None else None,
            "output_type": output_type,
            "output_retries": output_retries,
        }
        return record_of(self._json("POST", "/api/roots", body))

    def agent(self, prefix: str) -> RemoteRecord:
        return record_of(self._json("GET", f"/api/agents/{prefix}"))

    def seed(self, agent: str, entries: list[tuple[str, str]]) -> None:
        self._json("POST", f"/api/agents/{agent}/seed", {"messages": entries})

    def fork_many(self, parent: str, prompts: list[str], model: str | None = None) -> list[str]:
        """As `Grove.fork_many`: one child of `parent` per prompt, all started; their uuids."""
        body = {"prompts": prompts, "model": model}
        children: list[str] = self._json("POST", f"/api/agents/{parent}/fork", body)["children"]
        return children

    def send(self, agent: str, text: str) -> RemoteTurn:
        return RemoteTurn(self, agent, text)

    def begin_turn(self, agent: str, text: str) -> None:
        """Send `text` to start a turn, its result left to `wait_turn`."""
        self._json("POST", f"/api/agents/{agent}/prompts", {"text": text, "wait": False})

    def ask(self, agent: str, text: str, timeout_s: float = 3600.0) -> TurnResult:
        """As `Grove.ask`: send `text` and wait for the turn's result."""
        return self.send(agent, text).result(timeout_s)

    def dispatch(self, session: str, line: str, origin: str = "api") -> CommandOutcome:
        from grove.supervisor.commands.registry import CommandOutcome

        found = self._json(
            "POST", f"/api/agents/{session}/commands", {"line": line, "origin": origin}
        )
        return CommandOutcome(text=found["text"], ok=found["ok"], data=found.get("data") or {})

    def command_turn(self, outcome: CommandOutcome) -> RemoteTurn | None:
        """The turn a command started (`/fork PROMPT` starts the child's), to stream it."""
        if "ticket" not in outcome.data:
            return None
        return RemoteTurn(self, str(outcome.data["child"]))

    def focus(self, session: str) -> str:
        focus: str = self._json("GET", f"/api/sessions/{session}/focus")["agent"]
        return focus

    def cancel(self, agent: str) -> bool:
        return bool(self._json("POST", f"/api/agents/{agent}/cancel")["cancelled"])

    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None:
        found = self._json("GET", f"/api/agents/{agent}/wait", params={"timeout": timeout_s})
        return None if found["result"] is None else result_from_json(found["result"])

    def set_todo(self, session: str, markdown: str) -> str:
        answer = self._json("POST", f"/api/sessions/{session}/todo", {"markdown": markdown})
        text: str = answer["text"]
        return text

    def set_approver(self, session: str, approver: Callable[[ApprovalRequest], str] | None) -> None:
        """Who answers "may this tool run?" for the session (see `Grove.set_approver`): the
        service sends the requests in the turn's stream, this process asks, the service is
        told."""
        if approver is None:
            self.approvers.pop(session, None)
        else:
            self.approvers[session] = approver
        self._json("POST", f"/api/sessions/{session}/approvals", {"attend": approver is not None})

    def approve(self, notice: str) -> None:
        from grove.supervisor.approvals import ApprovalRequest

        request = ApprovalRequest(**json.loads(notice))
        approver = self.approvers.get(request.session)
        decision = approver(request) if approver is not None else "n"
        self._json("POST", f"/api/approvals/{request.request}", {"decision": decision})

    # --- batches ------------------------------------------------------------------------------

    def run_batch(
        self,
        root: str,
        tasks: list[Task],
        *,
        concurrency: int,
        advisor: str | None = None,
        key: str = "",
        workspace: str | None = None,
        stop: threading.Event | None = None,
        output_type: dict[str, Any] | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> Iterator[Step]:
        """As `Grove.run_batch`, run by the service: its records as they come (`output_type`,
        a JSON schema dict, goes as the `schema` of each task without one). Leaving early
        (Ctrl+C) stops the batch there; BatchStopped when the service's run failed. When the
        service stops mid-batch, its next start takes the batch up again, and this follows it
        there from the records it had."""
        from grove.supervisor.batch.tasks import task_json

        default = {} if output_type is None else {"schema": output_type}
        lines = "".join(json.dumps({**default, **task_json(task)}) + "\n" for task in tasks)
        params = {
            "root": root,
            "concurrency": concurrency,
            "key": key,
            "output_retries": output_retries,
        }
        if advisor is not None:
            params["advisor"] = advisor
        if workspace is not None:
            params["workspace"] = workspace
        run = self._json("POST", "/api/batches", params=params, content=lines.encode())
        records, ended, early_ends = 0, False, 0
        try:
            while True:
                following_from = records
                try:
                    path = f"/api/batches/{run['id']}/records"
                    for event, data in self.stream_events("GET", path, params={"after": records}):
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
                    self._json("POST", f"/api/batches/{run['id']}/stop")

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
                if state.started == self.started and early_ends:
                    if early_ends >= EARLY_ENDS_ALLOWED:
                        raise RemoteError(f"The Grove service at {self.url} ended a stream early")
                    yield None
                    bridge.sleep(1.0)
                    return
                self.started = state.started
                if state.url != self.url:
                    self._wire.close()
                    self.url = state.url
                    self._wire = Wire(state.url, {"authorization": f"Bearer {service_token()}"})
                return
            yield None
            bridge.sleep(1.0)  # an AsyncGrove's loop goes on meanwhile
        raise ServiceGone(
            f"The Grove service at {self.url} stopped and did not come back within "
            f"{RETURN_WAIT_S:.0f} s; started again (grove up), it goes on with batch {batch}"
        )

    # --- reads, as supervisor.reads.StoreReads ----------------------------------------------

    def agents(self, include_ended: bool) -> dict[str, Any]:
        found: dict[str, Any] = self._json(
            "GET", "/api/agents", params={"include_ended": include_ended}
        )
        return found

    def history(self, agent: str) -> dict[str, Any]:
        found: dict[str, Any] = self._json("GET", f"/api/agents/{agent}/history")
        return found

    def events(self, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._json(
            "GET", "/api/events", params={"after": after, "limit": limit}
        )["events"]
        return found

    def follow_events(self, after: int, wait_s: float) -> Iterator[list[dict[str, Any]]]:
        """The events after `after` as they come (the service's event stream); an empty list
        at its keep-alives, as StoreReads gives one after `wait_s` without events."""
        stream = self.stream_events("GET", "/api/events/stream", params={"after": after})
        for event, data in stream:
            yield [] if event == "comment" else [json.loads(data)]

    def usage(self, agent: str | None, by: str) -> dict[str, Any]:
        params = {"by": by, **({"agent": agent} if agent else {})}
        found: dict[str, Any] = self._json("GET", "/api/usage", params=params)
        return found

    def trim_events(self) -> dict[str, Any]:
        found: dict[str, Any] = self._json("POST", "/api/events/trim")
        return found

    def worktrees(self, repository: str, prune: bool = False) -> list[dict[str, Any]]:
        body = {"repository": repository, "prune": prune}
        found: dict[str, Any] = self._json("POST", "/api/worktrees", body)
        rows: list[dict[str, Any]] = found["worktrees"]
        return rows
