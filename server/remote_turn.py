"""`RemoteTurn`: a turn on a running Grove service (a `TurnAPI`), its deltas read from the
service's Server-Sent Events and its result from its wait.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from grove.supervisor.errors import TurnTimeout
from grove.supervisor.results import result_from_json

if TYPE_CHECKING:
    from grove.actors.turn_result import TurnResult
    from grove.server.service_link import ServiceLink


class TurnSource(Protocol):
    """What a RemoteTurn asks of the RemoteGrove that made it."""

    @property
    def link(self) -> ServiceLink: ...
    @property
    def attended(self) -> bool:
        """Whether a session has an approver here (its turns' streams are read for it)."""

    def approve(self, notice: str) -> None: ...
    def begin_turn(self, agent: str, text: str, typed: dict[str, Any] | None = None) -> None: ...
    def wait_turn(self, agent: str, timeout_s: float = 3600.0) -> TurnResult | None: ...


class RemoteTurn:
    """A turn on the service: iterate for `(kind, text)` deltas; `result()` waits for its
    end. `prompt` set: the turn is started by sending it (with `typed`, the output type's
    fields of the prompt) when first read or waited for."""

    def __init__(
        self,
        grove: TurnSource,
        agent: str,
        prompt: str | None = None,
        typed: dict[str, Any] | None = None,
    ) -> None:
        self.agent = agent
        self._grove = grove
        self._prompt = prompt
        self._typed = typed or {}
        self._result: TurnResult | None = None
        self._read = False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        self._read = True
        link = self._grove.link
        if self._prompt is not None:
            body = {"text": self._prompt, "stream": True, **self._typed}
            events = link.stream_events("POST", f"/api/agents/{self.agent}/prompts", body)
        else:
            events = link.stream_events("GET", f"/api/agents/{self.agent}/stream")
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
        if self._result is None and not self._read and self._grove.attended:
            for _ in self:  # the prompt is sent, and approvals come, by reading the stream
                pass
        if self._result is None and not self._read and self._prompt is not None:
            self._grove.begin_turn(self.agent, self._prompt, self._typed)
            self._prompt = None  # begun: a reader now follows it as it goes
        if self._result is None:
            waited = self._grove.wait_turn(self.agent, timeout_s)
            if waited is None:  # the service's wait ended before the turn did
                raise TurnTimeout(self.agent, timeout_s)
            self._result = waited
        return self._result
