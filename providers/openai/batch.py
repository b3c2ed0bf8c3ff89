"""OpenAI's Batch API as Grove's `BatchWire` (SPEC 20): the requests uploaded as one JSONL file
(Files API, purpose `batch`), a batch made of it, and its output and error files read by id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from urllib.parse import quote

import httpx

from grove.providers import cache_features
from grove.providers.base import AssistantTurn, JSONObject, ProviderName
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
    OutcomeKind,
)
from grove.providers.errors import ProviderError, ProviderProtocolError
from grove.providers.http import Endpoint, join_url
from grove.providers.openai import PROVIDER
from grove.providers.openai.cache import FEATURE, prefix_key
from grove.providers.openai.chat import OpenAIChatWire
from grove.providers.openai.errors import map_error
from grove.providers.openai.reply import chat_turn, responses_turn
from grove.providers.openai.responses import OpenAIResponsesWire
from grove.providers.secrets import mask
from grove.providers.wirejson import json_object, json_str

FILES_PATH = "/v1/files"
BATCHES_PATH = "/v1/batches"
COMPLETION_WINDOW = "24h"
# The API's limits on one batch's input file: 50,000 requests, 200 MB.
LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
# A batch's statuses once it has ended, whole.
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# Error codes of requests a batch never ran (the error file's `error.code`).
NOT_RUN: dict[str, OutcomeKind] = {"batch_expired": "expired", "batch_cancelled": "canceled"}
_OBJECT_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_STREAM_FIELDS = ("stream", "stream_options")


class OpenAIBatchWire:
    """`/v1/files` and `/v1/batches` for the Responses API (`/v1/responses`) or, for the
    chat wire, Chat Completions (`/v1/chat/completions`)."""

    provider: ProviderName = PROVIDER
    limits: BatchLimits = LIMITS

    def __init__(self, api: str = "responses") -> None:
        if api not in ("responses", "chat"):
            raise ValueError(f"openai: the batch wire speaks responses or chat, not {api!r}")
        wire = OpenAIResponsesWire() if api == "responses" else OpenAIChatWire()
        self._build = wire.build
        self._read_reply: Callable[[JSONObject], AssistantTurn] = (
            responses_turn if api == "responses" else chat_turn
        )
        self.url = f"/v1/{wire.route}"
        self._http = BatchHTTP(PROVIDER, map_error)

    def request_line(self, item: BatchItem, endpoint: Endpoint) -> bytes:
        """One line of the input file: the request as the streaming wire builds it, without
        streaming, with its fork point's `prompt_cache_key` (unless the server refused one)."""
        body = self._build(item.request)
        for field in _STREAM_FIELDS:
            body.pop(field, None)
        key = prefix_key(item.request)
        if key is not None and not cache_features.dropped(PROVIDER, endpoint.base_url, FEATURE):
            body["prompt_cache_key"] = key
        line = {"custom_id": item.custom_id, "method": "POST", "url": self.url, "body": body}
        return compact_json(line) + b"\n"

    def split(self, items: Sequence[BatchItem]) -> list[list[BatchItem]]:
        measuring = Endpoint(base_url="", api_key="")  # no feature dropped: the largest line
        sizes = [len(self.request_line(item, measuring)) for item in items]
        return split_within(PROVIDER, items, sizes, self.limits, overhead=0)

    async def submit(self, items: Sequence[BatchItem], endpoint: Endpoint) -> str:
        if not items:
            raise ValueError("openai: a batch holds at least one request")
        data = b"".join(self.request_line(item, endpoint) for item in items)
        uploaded = await self._http.send_json(
            "POST",
            join_url(endpoint.base_url, FILES_PATH),
            endpoint,
            _headers(endpoint),
            files={"file": ("grove-batch.jsonl", data, "application/jsonl")},
            data={"purpose": "batch"},
        )
        body = {
            "input_file_id": checked_id(json_str(uploaded, "id")),
            "endpoint": self.url,
            "completion_window": COMPLETION_WINDOW,
        }
        url = join_url(endpoint.base_url, BATCHES_PATH)
        batch = await self._http.send_json("POST", url, endpoint, _headers(endpoint), body=body)
        return checked_id(json_str(batch, "id"))

    async def status(self, batch_id: str, endpoint: Endpoint) -> BatchStatus:
        batch = await self._batch(batch_id, endpoint)
        return "ended" if batch.get("status") in ENDED else "in_progress"

    async def results(
        self, batch_id: str, custom_ids: Sequence[str], endpoint: Endpoint
    ) -> BatchResults:
        batch = await self._batch(batch_id, endpoint)
        status = batch.get("status")
        if status not in ENDED:
            raise ProviderProtocolError(
                f"openai: batch {batch_id} has not ended ({status!r}); its results are not ready",
                provider=PROVIDER,
            )
        tally = ResultTally(custom_ids)
        if status == "failed":  # refused whole in validation: no request ran
            tally.fill("errored", validation_errors(batch))
            return tally.results()
        for name in ("output_file_id", "error_file_id"):
            file_id = json_str(batch, name)
            if file_id is not None:
                path = f"{FILES_PATH}/{quote(checked_id(file_id), safe='')}/content"
                url = join_url(endpoint.base_url, path)
                data = await self._http.send("GET", url, endpoint, _headers(endpoint))
                read_lines(data, tally, self._read_reply)
        return tally.results()

    async def cancel(self, batch_id: str, endpoint: Endpoint) -> None:
        path = f"{BATCHES_PATH}/{quote(checked_id(batch_id), safe='')}/cancel"
        url = join_url(endpoint.base_url, path)
        await self._http.send_json("POST", url, endpoint, _headers(endpoint))

    async def discard(self, batch_id: str, endpoint: Endpoint) -> None:
        """The batch's input, output and error files deleted (the batch itself cannot be)."""
        batch = await self._batch(batch_id, endpoint)
        for name in ("input_file_id", "output_file_id", "error_file_id"):
            file_id = json_str(batch, name)
            if file_id is not None:
                path = f"{FILES_PATH}/{quote(checked_id(file_id), safe='')}"
                url = join_url(endpoint.base_url, path)
                await self._http.send_json("DELETE", url, endpoint, _headers(endpoint))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _batch(self, batch_id: str, endpoint: Endpoint) -> JSONObject:
        path = f"{BATCHES_PATH}/{quote(checked_id(batch_id), safe='')}"
        url = join_url(endpoint.base_url, path)
        return await self._http.send_json("GET", url, endpoint, _headers(endpoint))


def _headers(endpoint: Endpoint) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint.api_key}"}


def checked_id(object_id: str | None) -> str:
    """A batch or file id fit to go in a path (the vendor's answer is not trusted to be)."""
    return checked_path_id(object_id, _OBJECT_ID, "a batch or file id", PROVIDER)


def validation_errors(batch: JSONObject) -> str:
    """Why a batch failed validation, in the vendor's words (its first few lines' errors)."""
    listed = json_object(batch, "errors").get("data")
    reasons = [
        f"line {error.get('line')}: {json_str(error, 'code')}: {json_str(error, 'message')}"
        for error in (listed if isinstance(listed, list) else [])[:3]
        if isinstance(error, dict)
    ]
    return mask("openai: the batch failed validation: " + ("; ".join(reasons) or "no reason"))


def read_lines(
    data: bytes, tally: ResultTally, read_reply: Callable[[JSONObject], AssistantTurn]
) -> None:
    """An output or error file's lines into `tally`, each under its custom id."""
    for line in jsonl_objects(data):
        if line is None:
            tally.malformed_lines += 1
            continue
        custom_id = line.get("custom_id")
        if not tally.knows(custom_id):
            continue
        assert isinstance(custom_id, str)
        outcome = read_outcome(custom_id, line, read_reply)
        if outcome is None:
            tally.malformed_lines += 1
        else:
            tally.add(outcome)


def read_outcome(
    custom_id: str, line: JSONObject, read_reply: Callable[[JSONObject], AssistantTurn]
) -> BatchOutcome | None:
    """One line as an outcome: a 200 reply succeeded, another status errored with the API's
    mapped error, a request never run expired or canceled; None when it cannot be read."""
    response, error = line.get("response"), line.get("error")
    if isinstance(response, dict):
        status, body = response.get("status_code"), response.get("body")
        if not isinstance(status, int) or not isinstance(body, dict):
            return None
        if status != 200:
            mapped = map_error(status, httpx.Headers(), compact_json(body))
            return BatchOutcome(custom_id=custom_id, kind="errored", error=str(mapped))
        try:
            turn = read_reply(body)
        except ProviderProtocolError:
            return None
        except ProviderError as exc:  # a failed response: errored, in its own words
            return BatchOutcome(custom_id=custom_id, kind="errored", error=str(exc))
        return BatchOutcome(custom_id=custom_id, kind="succeeded", turn=turn)
    if isinstance(error, dict):
        code = json_str(error, "code") or "error"
        text = mask(f"openai: {code}: {json_str(error, 'message') or 'no message'}")
        kind: OutcomeKind = NOT_RUN.get(code, "errored")
        return BatchOutcome(custom_id=custom_id, kind=kind, error=text)
    return None
