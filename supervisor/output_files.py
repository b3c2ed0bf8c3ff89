"""`--output-schema FILE`: the JSON schema a command's answers must match, read (bounded) and
checked for the providers it will run on, before anything starts. No pydantic: served, quick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from grove.providers.base import JSONObject, ProviderName
from grove.providers.errors import OutputSchemaError
from grove.providers.output_dialects import provider_refusal
from grove.providers.output_schema import MAX_SCHEMA_CHARS, checked_schema, one_line
from grove.supervisor.text_files import read_text_file

MAX_SCHEMA_FILE_BYTES = 4 * MAX_SCHEMA_CHARS  # room for indentation and escapes


def schema_file(path: Path, providers: Iterable[ProviderName] = ()) -> JSONObject:
    """The JSON schema in `path`, checked, and checked for each of `providers`' strict mode;
    OutputSchemaError in one line naming the file and the problem."""
    text = read_text_file(
        path, what=f"the output schema {path}", limit=MAX_SCHEMA_FILE_BYTES, error=OutputSchemaError
    )
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
