"""`ServiceLink`: a client's connection to a running Grove service, its answers read as JSON or
as Server-Sent Events, and the errors a client of the service meets. No Ray, light imports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from grove.providers.errors import GroveError
from grove.server.answers import Answer
from grove.server.files import ServiceState, service_token
from grove.server.wire import NO_ANSWER, OBSERVER_HEADER, HeldStream, Wire, answers, sse_events

HEALTH_TIMEOUT_S = 2.0


class RemoteError(GroveError):
    """The service refused a request, or did not answer; the text says which and why."""


class ServiceGone(RemoteError):
    """The service did not answer (not running, or stopped mid-answer)."""


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


class ServiceLink:
    """Requests to the service `state` describes, with its token. `observer`: they only look
    (`grove status`): the service does not count them as a client's, for its idle stop
    (server/idle.py)."""

    def __init__(self, state: ServiceState, *, observer: bool = False) -> None:
        self.url = state.url
        self.started = state.started  # which start of the service this is
        self._observer = observer
        self._wire = self._wire_to(state.url)

    def _wire_to(self, url: str) -> Wire:
        headers = {"authorization": f"Bearer {service_token()}"}
        return Wire(url, headers | ({OBSERVER_HEADER: "1"} if self._observer else {}))

    def moved_to(self, state: ServiceState) -> None:
        """The service started again, as `state` says (perhaps at another address)."""
        self.started = state.started
        if state.url != self.url:
            self._wire.close()
            self.url = state.url
            self._wire = self._wire_to(state.url)

    def held(self, path: str) -> HeldStream:
        """A stream held open at `path` while this client is there (its presence)."""
        return HeldStream(self._wire, path)

    def close(self) -> None:
        self._wire.close()

    def json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
    ) -> Any:
        """The service's JSON answer; RemoteError with its words when it refused."""
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
