"""Turning values into stored JSON and untrusted stored bytes back into validated records.

Every read of a store goes through here, so a corrupted or hostile record becomes one clear
StoreError; no pickle, no eval, nothing but JSON and pydantic validation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from grove.supervisor.errors import StoreError

RecordT = TypeVar("RecordT", bound=BaseModel)

_MAX_REASONS = 3


# What json.dumps would build anew for each value with these arguments: built once.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_json(value: object, what: str) -> str:
    """Compact JSON text of `value`; anything that is not plain JSON (sets, NaN...) or not
    UTF-8 (an unpaired surrogate) is refused."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"{what} is not plain JSON ({exc}); nothing was written") from exc
    if not text.isascii():
        utf8_size(text, what)
    return text


def utf8_size(text: str, what: str) -> int:
    """The UTF-8 length of `text`; an unpaired surrogate, which no store can hold, is refused."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise StoreError(
            f"{what} contains an unpaired surrogate (\\u{ord(text[exc.start]):04x}), "
            "not valid UTF-8; nothing was written"
        ) from exc


def decode_json(text: str | bytes, what: str) -> Any:
    """The value of stored JSON text, or StoreError naming the corrupted record."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"Corrupted {what} in the store: not valid JSON") from exc


def validate_record(
    model: type[RecordT], raw: Mapping[str, Any] | str | bytes, what: str
) -> RecordT:
    """`raw` (a mapping or JSON text) checked against `model`, or StoreError naming the record."""
    try:
        if isinstance(raw, str | bytes):
            return model.model_validate_json(raw)
        return model.model_validate(raw)
    except ValidationError as exc:
        raise StoreError(f"Corrupted {what} in the store: {describe(exc)}") from exc
    except RecursionError as exc:
        raise StoreError(f"Corrupted {what} in the store: nested too deeply") from exc


def describe(exc: ValidationError) -> str:
    """A short reason list for a validation error, without echoing the (maybe huge) input."""
    reasons = []
    for error in exc.errors(include_input=False, include_url=False)[:_MAX_REASONS]:
        location = ".".join(str(part) for part in error["loc"]) or "record"
        reasons.append(f"{location}: {error['msg']}")
    more = exc.error_count() - len(reasons)
    return "; ".join(reasons) + (f" (and {more} more)" if more > 0 else "")
