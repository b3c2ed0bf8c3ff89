"""Reading Google's error objects (`{"error": {"code", "message", "status", "details"}}`).

Decides retryability and the RetryInfo delay for the Gemini wire; builds no requests and
raises nothing itself: `map_error` returns the HTTP error, stream.py raises the in-stream one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from grove.providers.base import JSONObject
from grove.providers.errors import ProviderHTTPError
from grove.providers.google import PROVIDER
from grove.providers.retry import (
    MAX_HONOURED_RETRY_AFTER_S,
    parse_duration,
    retry_after_from_headers,
)
from grove.providers.secrets import mask

# gRPC statuses worth another attempt: overload, server faults, rate limits, timeouts.
RETRYABLE_STATUSES = frozenset(
    {"UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"}
)
# ErrorInfo reasons that mean money, not a rate: waiting does not help.
HARD_LIMIT_REASONS = frozenset({"BILLING_DISABLED", "INSUFFICIENT_G1_CREDITS_BALANCE"})
# Message wording of spend caps, depleted prepay credit and zero free-tier quotas. The usual
# per-minute text ("please check your plan and billing details") must not match.
HARD_LIMIT_WORDING = re.compile(
    r"spend(ing)?[ -](cap|limit)|prepa(y|id|yment)|credits? (balance|are depleted|depleted)"
    r"|billing (is )?(disabled|not enabled)|billing account|\blimit: 0\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class GoogleError:
    """One `error` object, read leniently: absent or ill-typed fields are left empty."""

    code: int | None
    status: str | None
    message: str
    details: tuple[JSONObject, ...]

    @classmethod
    def read(cls, error: Any) -> GoogleError:
        if not isinstance(error, dict):
            return cls(code=None, status=None, message="", details=())
        code, status, message = error.get("code"), error.get("status"), error.get("message")
        details = error.get("details")
        return cls(
            code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            status=status if isinstance(status, str) else None,
            message=mask(message) if isinstance(message, str) else "",
            details=tuple(d for d in details if isinstance(d, dict))
            if isinstance(details, list)
            else (),
        )

    def _details_of(self, type_suffix: str) -> list[JSONObject]:
        return [d for d in self.details if str(d.get("@type", "")).endswith(type_suffix)]

    @property
    def retry_delay(self) -> float | None:
        """`google.rpc.RetryInfo.retryDelay` in seconds, if the server named one."""
        for info in self._details_of("google.rpc.RetryInfo"):
            delay = info.get("retryDelay")
            if isinstance(delay, str) and (seconds := parse_duration(delay)) is not None:
                return seconds
        return None

    @property
    def reasons(self) -> set[str]:
        return {
            str(info["reason"])
            for info in self._details_of("google.rpc.ErrorInfo")
            if isinstance(info.get("reason"), str)
        }

    @property
    def is_hard_limit(self) -> bool:
        """A quota that waiting a little will not lift: spend caps, billing, daily quotas."""
        if self.reasons & HARD_LIMIT_REASONS or HARD_LIMIT_WORDING.search(self.message):
            return True
        for failure in self._details_of("google.rpc.QuotaFailure"):
            violations = failure.get("violations")
            for violation in violations if isinstance(violations, list) else ():
                quota = str(violation.get("quotaId", "")) if isinstance(violation, dict) else ""
                if "PerDay" in quota or "Daily" in quota:
                    return True
        delay = self.retry_delay
        return delay is not None and delay > MAX_HONOURED_RETRY_AFTER_S

    def retryable(self, http_status: int | None = None) -> bool:
        """Overload, server faults and rate limits are; auth, bad requests and hard limits not."""
        if self.is_hard_limit:
            return False
        if http_status is not None:
            return http_status in ProviderHTTPError.RETRYABLE_STATUSES
        if self.status is not None:
            return self.status in RETRYABLE_STATUSES
        return self.code in ProviderHTTPError.RETRYABLE_STATUSES

    def describe(self, fallback: str) -> str:
        """`Gemini API error 429 RESOURCE_EXHAUSTED: <message>`, with what is known."""
        head = " ".join(str(v) for v in (self.code, self.status) if v is not None) or fallback
        return (
            f"Gemini API error {head}: {self.message}"
            if self.message
            else f"Gemini API error {head}"
        )


def map_error(status: int, headers: httpx.Headers, body: bytes) -> ProviderHTTPError:
    """Google's error object: RetryInfo before retry-after headers; hard quotas never retry."""
    text = mask(body.decode("utf-8", "replace"))
    error = GoogleError.read(_error_object(text))
    retry_after = error.retry_delay
    if retry_after is None:
        retry_after = retry_after_from_headers(headers)
    return ProviderHTTPError(
        error.describe(f"HTTP {status}"),
        provider=PROVIDER,
        status=status,
        body=text,
        kind=error.status,
        retry_after=retry_after,
        retryable=error.retryable(status),
    )


def _error_object(text: str) -> Any:
    """The `error` member of the body; a streaming call may wrap it in a one-item list."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    return data.get("error") if isinstance(data, dict) else None
