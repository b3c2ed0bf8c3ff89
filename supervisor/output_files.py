"""`--output-schema FILE`: the JSON schema a command's answers must match, read (bounded) and
checked for the providers it will run on, before anything starts. No pydantic: served, quick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from providers.base import JSONObject, ProviderName
from providers.output_schema import (
    MAX_SCHEMA_CHARS,
    OutputSchemaError,
    checked_schema,
    one_line,
    provider_refusal,
)

MAX_SCHEMA_FILE_BYTES = 4 * MAX_SCHEMA_CHARS  # room for indentation and escapes


def schema_file(path: Path, providers: Iterable[ProviderName] = ()) -> JSONObject:
    """The JSON schema in `path`, checked, and checked for each of `providers`' strict mode;
    OutputSchemaError in one line naming the file and the problem."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SCHEMA_FILE_BYTES + 1)
    except OSError as exc:
        raise OutputSchemaError(
            f"cannot read the output schema {path}: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_SCHEMA_FILE_BYTES:
        raise OutputSchemaError(
            f"the output schema {path} is larger than {MAX_SCHEMA_FILE_BYTES:,} bytes"
        )
    try:
        text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OutputSchemaError(
            f"the output schema {path} is not UTF-8 text (byte {exc.start + 1})"
        ) from None
    try:
        schema = json.loads(text)
    except RecursionError:
        raise OutputSchemaError(f"the output schema {path} is nested too deeply") from None
    except ValueError as exc:
        raise OutputSchemaError(
            f"the output schema {path} is not JSON: {one_line(str(exc), 120)}"
        ) from None
    try:
        checked = checked_schema(schema)
    except OutputSchemaError as exc:
        raise OutputSchemaError(f"{path}: {exc}") from None
    for provider in sorted(set(providers)):
        refusal = provider_refusal(checked, provider)
        if refusal is not None:
            raise OutputSchemaError(f"{path}: {refusal}")
    return checked
