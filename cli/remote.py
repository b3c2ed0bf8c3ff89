"""`RemoteGrove`: the part of the `Grove` API that `grove chat` uses, answered by a running
Grove service over HTTP (no Ray in this process); `RemoteTurn` streams a turn the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from actors.agent import TurnResult
from cli.thin import error_text, sse_events
from providers.base import Usage
from providers.errors import GroveError
from server.files import ServiceState, service_token
from supervisor.approvals import ApprovalRequest
from supervisor.commands.registry import CommandOutcome

STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)


class RemoteError(GroveError):
    """The service refused a request; the text is its error."""


@dataclass(frozen=True, slots=True)
class RemoteRecord:
    uuid: str
    parent_uuid: str | None


def result_of(data: dict[str, Any]) -> TurnResult:
    return TurnResult(
        text=data.get("text") or "",
        usage=Usage(**data.get("usage", {})),
        cost_usd=float(data.get("cost_usd") or 0.0),
        stop_reason=data.get("stop_reason"),
        error=data.get("error"),
        cancelled=bool(data.get("cancelled")),
    )


class RemoteTurn:
    """A turn on the service: iterate for `(kind, text)` deltas; `result()` waits for its
    end. `prompt` set: the turn is started by sending it when first read."""

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
            events = self._grove.events("POST", f"/api/agents/{self.agent}/prompts", body)
        else:
            events = self._grove.events("GET", f"/api/agents/{self.agent}/stream", None)
        for event, data in events:
            if event == "delta":
                delta = json.loads(data)
                if delta["kind"] == "approval":  # a tool asks first: the session's approver
                    self._grove.approve(delta["text"])
                    continue
                yield delta["kind"], delta["text"]
            elif event == "result":
                self._result = result_of(json.loads(data))

    def result(self, timeout_s: float = 3600.0) -> TurnResult:
        if self._result is None and not self._read and (self._prompt or self._grove.approvers):
            for _ in self:  # the prompt is sent, and approvals come, by reading the stream
                pass
        if self._result is None:
            waited = self._grove.wait_turn(self.agent, timeout_s)
            self._result = waited if waited is not None else TurnResult(error="interrupted")
        return self._result


class RemoteGrove:
    """What the chat needs of `Grove`, over HTTP to the service `state` describes."""

    def __init__(self, state: ServiceState) -> None:
        self.url = state.url
        self.approvers: dict[str, Callable[[ApprovalRequest], str]] = {}
        self._client = httpx.Client(
            base_url=state.url,
            headers={"authorization": f"Bearer {service_token()}"},
            timeout=httpx.Timeout(60.0, read=3700.0),
        )

    def close(self) -> None:
        self._client.close()

    def _json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            answer = self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise RemoteError(f"The Grove service at {self.url} did not answer: {exc}") from exc
        if answer.status_code >= 400:
            raise RemoteError(error_text(answer))
        return answer.json()

    def events(
        self, method: str, path: str, body: dict[str, Any] | None
    ) -> Iterator[tuple[str, str]]:
        """`(event, data)` of a Server-Sent Events answer, as they arrive."""
        with self._client.stream(method, path, json=body, timeout=STREAM_TIMEOUT) as answer:
            if answer.status_code >= 400:
                answer.read()
                raise RemoteError(error_text(answer))
            yield from sse_events(answer)

    def create_root(
        self, model: str | None, *, tools: Any = (), allow: Any = (), budget: Any = None
    ) -> RemoteRecord:
        body = {
            "model": model,
            "tools": list(tools),
            "allow": list(allow),
            "budget": budget.as_dict() if budget is not None else None,
        }
        return RemoteRecord(self._json("POST", "/api/roots", body)["uuid"], None)

    def agent(self, prefix: str) -> RemoteRecord:
        found = self._json("GET", f"/api/agents/{prefix}")
        return RemoteRecord(found["uuid"], found["parent_uuid"])

    def start(self) -> None:
        """Nothing to start: the service runs Grove."""

    def dispatch(self, session: str, line: str, origin: str = "api") -> CommandOutcome:
        found = self._json(
            "POST", f"/api/agents/{session}/commands", {"line": line, "origin": origin}
        )
        return CommandOutcome(text=found["text"], ok=found["ok"], data=found.get("data") or {})

    def command_turn(self, outcome: CommandOutcome) -> RemoteTurn | None:
        """The turn a command started (`/fork PROMPT` starts the child's), to stream it."""
        if "ticket" not in outcome.data:
            return None
        return RemoteTurn(self, str(outcome.data["child"]))

    def send(self, agent: str, text: str) -> RemoteTurn:
        return RemoteTurn(self, agent, text)

    def focus(self, session: str) -> str:
        focus: str = self._json("GET", f"/api/sessions/{session}/focus")["agent"]
        return focus

    def cancel(self, agent: str) -> bool:
        return bool(self._json("POST", f"/api/agents/{agent}/cancel")["cancelled"])

    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None:
        found = self._json("GET", f"/api/agents/{agent}/wait?timeout={timeout_s}")
        return None if found["result"] is None else result_of(found["result"])

    def set_todo(self, session: str, markdown: str) -> str:
        text: str = self._json("POST", f"/api/sessions/{session}/todo", {"markdown": markdown})[
            "text"
        ]
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
        request = ApprovalRequest(**json.loads(notice))
        approver = self.approvers.get(request.session)
        decision = approver(request) if approver is not None else "n"
        self._json("POST", f"/api/approvals/{request.request}", {"decision": decision})
