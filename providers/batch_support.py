"""What every vendor's batch wire shares (SPEC 20): cutting items within a vendor's limits,
the HTTP exchanges (the key never in an error), and result lines tallied into `BatchResults`.

Vendor JSON belongs to providers/<vendor>/batch.py and reply.py; nothing here names a field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx

from grove.providers import wirejson
from grove.providers.accumulate import TurnAccumulator
from grove.providers.base import AssistantTurn, JSONObject, ProviderName
from grove.providers.batch_wire import (
    BatchItem,
    BatchItemTooLarge,
    BatchLimits,
    BatchOutcome,
    BatchResults,
    OutcomeKind,
)
from grove.providers.errors import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderProtocolError,
)
from grove.providers.http import DEFAULT_TIMEOUT, Endpoint, new_client
from grove.providers.pricing import cost_usd
from grove.providers.secrets import mask, remember_secret, remember_url_secrets, without_userinfo
from grove.providers.stream_events import StreamEvent

ErrorMapper = Callable[[int, httpx.Headers, bytes], ProviderHTTPError]


def checked_path_id(
    value: str | None, pattern: re.Pattern[str], what: str, provider: ProviderName
) -> str:
    """An id a vendor answered, fit to go in a URL path (the answer is not trusted to be):
    `pattern` must match it whole, else a protocol error saying it is not `what`."""
    if value is None or pattern.fullmatch(value) is None:
        raise ProviderProtocolError(f"{provider}: not {what}: {value!r}"[:120], provider=provider)
    return value


def compact_json(value: Any) -> bytes:
    """`value` as the bytes sent: compact UTF-8 JSON, so that sizes counted are sizes sent."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def split_within(
    provider: ProviderName,
    items: Sequence[BatchItem],
    sizes: Sequence[int],
    limits: BatchLimits,
    overhead: int,
) -> list[list[BatchItem]]:
    """`items` cut, in order, into runs of at most `limits.max_requests` whose `sizes` (each
    item's bytes with its separator) and the batch's `overhead` stay within `limits.max_bytes`.
    An item too large for a batch of its own is refused (BatchItemTooLarge): nothing is cut."""
    room = limits.max_bytes - overhead
    for item, size in zip(items, sizes, strict=True):
        if size > room:
            raise BatchItemTooLarge(
                f"{provider}: the request {item.custom_id!r} takes {size} bytes, more than the "
                f"{room} a batch has room for ({limits.max_bytes} bytes in all)",
                provider=provider,
                custom_id=item.custom_id,
            )
    batches: list[list[BatchItem]] = []
    current: list[BatchItem] = []
    used = 0
    for item, size in zip(items, sizes, strict=True):
        if current and (len(current) >= limits.max_requests or used + size > room):
            batches.append(current)
            current, used = [], 0
        current.append(item)
        used += size
    if current:
        batches.append(current)
    return batches


def batch_turn(provider: ProviderName, events: Iterable[StreamEvent]) -> AssistantTurn:
    """A whole reply's events (each vendor's reply.py makes them from its response body)
    assembled as the streaming path assembles them, priced at the batch tier."""
    accumulator = TurnAccumulator(provider, "")
    for event in events:
        accumulator.add(event)
    if not accumulator.completed:
        raise ProviderProtocolError(f"{provider}: a batch reply without its end", provider=provider)
    usage = accumulator.usage
    return replace(accumulator.turn(cost_usd(accumulator.model, usage, tier="batch")), tier="batch")


class ResultTally:
    """One batch's outcomes as its lines are read. A line naming an id the batch never held,
    or an id a line already answered, is never taken; ids left without an outcome are missing."""

    def __init__(self, custom_ids: Sequence[str]) -> None:
        self._expected = list(dict.fromkeys(custom_ids))
        self._known = set(self._expected)
        self.outcomes: dict[str, BatchOutcome] = {}
        self.unknown_ids = 0
        self.malformed_lines = 0

    def knows(self, custom_id: object) -> bool:
        """Whether `custom_id` is one of the batch's ids not answered yet; counts it if not (an
        unknown id, or a second line for one id: malformed)."""
        if not isinstance(custom_id, str):
            self.malformed_lines += 1
            return False
        if custom_id not in self._known:
            self.unknown_ids += 1
            return False
        if custom_id in self.outcomes:
            self.malformed_lines += 1
            return False
        return True

    def add(self, outcome: BatchOutcome) -> None:
        if self.knows(outcome.custom_id):
            self.outcomes[outcome.custom_id] = outcome

    def fill(self, kind: OutcomeKind, error: str | None = None) -> None:
        """Every id still without an outcome ends `kind` (a batch that ended whole so)."""
        for custom_id in self._expected:
            if custom_id not in self.outcomes:
                self.outcomes[custom_id] = BatchOutcome(custom_id=custom_id, kind=kind, error=error)

    def results(self) -> BatchResults:
        missing = tuple(c for c in self._expected if c not in self.outcomes)
        return BatchResults(
            outcomes=dict(self.outcomes),
            unknown_ids=self.unknown_ids,
            malformed_lines=self.malformed_lines,
            missing_ids=missing,
        )


def jsonl_objects(data: bytes) -> Iterable[JSONObject | None]:
    """Each non-blank line of a JSONL body as its object, or None for one that is not."""
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            value = wirejson.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            yield None
            continue
        yield value if isinstance(value, dict) else None


class BatchHTTP:
    """One wire's HTTP exchanges over a private client: a non-2xx answer is the vendor's
    mapped error, no answer a connection error naming the base URL, never the key."""

    def __init__(self, provider: ProviderName, map_error: ErrorMapper) -> None:
        self._provider = provider
        self._map_error = map_error
        self._client: httpx.AsyncClient | None = None

    async def send(
        self,
        method: str,
        url: str,
        endpoint: Endpoint,
        headers: Mapping[str, str],
        *,
        content: bytes | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        data: Mapping[str, str] | None = None,
    ) -> bytes:
        """The body of a 2xx answer to one exchange."""
        remember_secret(endpoint.api_key)  # masked wherever an answer might echo it
        remember_url_secrets(endpoint.base_url)
        if self._client is None:
            self._client = new_client(DEFAULT_TIMEOUT)
        try:
            response = await self._client.request(
                method, url, headers=dict(headers), content=content, files=files, data=data
            )
        except httpx.TransportError as exc:
            raise ProviderConnectionError(
                f"cannot reach {self._provider} at {without_userinfo(endpoint.base_url)}: "
                f"{type(exc).__name__}",
                provider=self._provider,
            ) from None
        if response.status_code >= 400:
            raise self._map_error(response.status_code, response.headers, response.content)
        return response.content

    async def send_json(
        self,
        method: str,
        url: str,
        endpoint: Endpoint,
        headers: Mapping[str, str],
        *,
        body: JSONObject | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        data: Mapping[str, str] | None = None,
    ) -> JSONObject:
        """The JSON object a 2xx answer carries (ProviderProtocolError for anything else), to
        a JSON `body` or a multipart form of `files` and `data`."""
        content = None if body is None else compact_json(body)
        if content is not None:
            headers = {**headers, "content-type": "application/json"}
        raw = await self.send(
            method, url, endpoint, headers, content=content, files=files, data=data
        )
        try:
            value = wirejson.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            text = mask(raw[:80].decode("utf-8", "replace"))
            raise ProviderProtocolError(
                f"{self._provider}: {method} {httpx.URL(url).path} answered no JSON object: "
                f"{text!r}",
                provider=self._provider,
            )
        return value

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
