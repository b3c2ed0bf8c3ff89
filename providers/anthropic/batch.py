"""Anthropic's Message Batches as Grove's `BatchWire` (SPEC 20): each step's request built as the
streaming wire builds it, without `stream`; results read from the batch's JSONL by custom id.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

import httpx

from grove.providers import preserved_thinking
from grove.providers.anthropic import PROVIDER
from grove.providers.anthropic.errors import map_error, stream_error
from grove.providers.anthropic.reply import reply_turn
from grove.providers.anthropic.request import request_headers
from grove.providers.anthropic.wire import AnthropicWire
from grove.providers.base import JSONObject, ProviderName
from grove.providers.batch_support import (
    BatchHTTP,
    ResultTally,
    checked_path_id,
    compact_json,
    jsonl_objects,
    split_within,
)
from grove.providers.batch_wire import (
    BatchItem,
    BatchLimits,
    BatchOutcome,
    BatchResults,
    BatchStatus,
)
from grove.providers.errors import ProviderError, ProviderProtocolError
from grove.providers.http import Endpoint, join_url
from grove.providers.wirejson import json_object, json_str

BATCHES_PATH = "/v1/messages/batches"
# The API's limits on one batch (its docs, "Batch limitations"): 100,000 requests or 256 MB.
LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024)
_BODY_OVERHEAD = len(b'{"requests":[]}')
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
# A body built to be measured: on no base URL, so every cache mark is kept (the largest).
_MEASURING = Endpoint(base_url="", api_key="")


class AnthropicBatchWire:
    """`POST /v1/messages/batches`, `GET .../{id}`, its results and `POST .../{id}/cancel`."""

    provider: ProviderName = PROVIDER
    limits: BatchLimits = LIMITS

    def __init__(self) -> None:
        self._wire = AnthropicWire()
        self._http = BatchHTTP(PROVIDER, map_error)

    def request_entry(self, item: BatchItem, endpoint: Endpoint) -> JSONObject:
        """One item of the batch's `requests`: its custom id and the Messages body."""
        if _CUSTOM_ID.fullmatch(item.custom_id) is None:
            raise ValueError(
                f"anthropic: a batch custom id is 1 to 64 letters, digits, _ or -, "
                f"got {item.custom_id!r}"
            )
        request, _ = preserved_thinking.bound(PROVIDER, item.request)
        params = dict(self._wire.prepare(request, endpoint).body)
        params.pop("stream", None)
        return {"custom_id": item.custom_id, "params": params}

    def split(self, items: Sequence[BatchItem]) -> list[list[BatchItem]]:
        sizes = [len(compact_json(self.request_entry(item, _MEASURING))) + 1 for item in items]
        return split_within(PROVIDER, items, sizes, self.limits, _BODY_OVERHEAD)

    async def submit(self, items: Sequence[BatchItem], endpoint: Endpoint) -> str:
        if not items:
            raise ValueError("anthropic: a batch holds at least one request")
        requests = [self.request_entry(item, endpoint) for item in items]
        batch = await self._http.send_json(
            "POST",
            join_url(endpoint.base_url, BATCHES_PATH),
            endpoint,
            request_headers(endpoint.api_key),
            body={"requests": requests},
        )
        return checked_batch_id(json_str(batch, "id"))

    async def status(self, batch_id: str, endpoint: Endpoint) -> BatchStatus:
        batch = await self._batch(batch_id, endpoint)
        return "ended" if batch.get("processing_status") == "ended" else "in_progress"

    async def results(
        self, batch_id: str, custom_ids: Sequence[str], endpoint: Endpoint
    ) -> BatchResults:
        batch = await self._batch(batch_id, endpoint)
        if batch.get("processing_status") != "ended":
            raise ProviderProtocolError(
                f"anthropic: batch {batch_id} has not ended; its results are not ready",
                provider=PROVIDER,
            )
        url = results_url(json_str(batch, "results_url"), batch_id, endpoint)
        data = await self._http.send("GET", url, endpoint, request_headers(endpoint.api_key))
        return read_results(data, custom_ids)

    async def cancel(self, batch_id: str, endpoint: Endpoint) -> None:
        path = f"{BATCHES_PATH}/{quote(checked_batch_id(batch_id), safe='')}/cancel"
        url = join_url(endpoint.base_url, path)
        await self._http.send_json("POST", url, endpoint, request_headers(endpoint.api_key))

    async def discard(self, batch_id: str, endpoint: Endpoint) -> None:
        path = f"{BATCHES_PATH}/{quote(checked_batch_id(batch_id), safe='')}"
        url = join_url(endpoint.base_url, path)
        await self._http.send_json("DELETE", url, endpoint, request_headers(endpoint.api_key))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _batch(self, batch_id: str, endpoint: Endpoint) -> JSONObject:
        path = f"{BATCHES_PATH}/{quote(checked_batch_id(batch_id), safe='')}"
        url = join_url(endpoint.base_url, path)
        return await self._http.send_json("GET", url, endpoint, request_headers(endpoint.api_key))


def checked_batch_id(batch_id: str | None) -> str:
    """A batch id fit to go in a path (the vendor's answer is not trusted to be)."""
    return checked_path_id(batch_id, _BATCH_ID, "a message batch id", PROVIDER)


def results_url(given: str | None, batch_id: str, endpoint: Endpoint) -> str:
    """The batch's `results_url` when it is on the endpoint's own origin, else the documented
    results route there: the key goes nowhere else."""
    documented = join_url(endpoint.base_url, f"{BATCHES_PATH}/{quote(batch_id, safe='')}/results")
    if given is None:
        return documented
    try:
        url, base = httpx.URL(given), httpx.URL(endpoint.base_url)
    except httpx.InvalidURL:
        return documented
    same_origin = (url.scheme, url.host, url.port) == (base.scheme, base.host, base.port)
    return given if same_origin else documented


def read_results(data: bytes, custom_ids: Sequence[str]) -> BatchResults:
    """The JSONL results of a batch sent with `custom_ids`: each line's outcome under its id;
    lines naming other ids, lines that cannot be read and ids without a line counted."""
    tally = ResultTally(custom_ids)
    for line in jsonl_objects(data):
        if line is None:
            tally.malformed_lines += 1
            continue
        custom_id = line.get("custom_id")
        if not tally.knows(custom_id):
            continue
        assert isinstance(custom_id, str)
        outcome = read_outcome(custom_id, json_object(line, "result"))
        if outcome is None:
            tally.malformed_lines += 1
        else:
            tally.add(outcome)
    return tally.results()


def read_outcome(custom_id: str, result: JSONObject) -> BatchOutcome | None:
    """One line's `result` as an outcome, or None when it cannot be read."""
    kind = result.get("type")
    if kind == "succeeded":
        try:
            turn = reply_turn(json_object(result, "message"))
        except ProviderProtocolError:
            return None
        except ProviderError as exc:  # the reply says it failed: errored, with its words
            return BatchOutcome(custom_id=custom_id, kind="errored", error=str(exc))
        return BatchOutcome(custom_id=custom_id, kind="succeeded", turn=turn)
    if kind == "errored":
        error = json_object(json_object(result, "error"), "error")
        return BatchOutcome(custom_id=custom_id, kind="errored", error=str(stream_error(error)))
    if kind == "expired":
        return BatchOutcome(custom_id=custom_id, kind="expired", error="anthropic: expired")
    if kind == "canceled":
        return BatchOutcome(custom_id=custom_id, kind="canceled", error="anthropic: canceled")
    return None
