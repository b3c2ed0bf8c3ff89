"""Typed results at the API: a pydantic model or a JSON schema dict made the `OutputType` a
turn carries (checked, and refused for a provider that cannot take it, before anything is
sent), and answers read back into the caller's model.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, ValidationError

from grove.actors.output import OutputType
from grove.actors.turn_result import TurnResult
from grove.providers.base import DEFAULT_OUTPUT_RETRIES, MAX_OUTPUT_RETRIES, ProviderName
from grove.providers.errors import OutputSchemaError
from grove.providers.output_dialects import provider_refusal
from grove.providers.output_schema import checked_schema, one_line, output_name

OutputTypeLike = type[BaseModel] | dict[str, Any]


def output_type(
    given: OutputTypeLike,
    retries: int = DEFAULT_OUTPUT_RETRIES,
    provider: ProviderName | None = None,
    *,
    ship_model: bool = True,
) -> OutputType:
    """`given` as an OutputType; OutputSchemaError (one line) for a schema Grove cannot use
    or, when `provider` is known, one its strict mode would refuse. A model's code travels
    with it (`ship_model`), so hosts run its validators too."""
    if not 0 <= retries <= MAX_OUTPUT_RETRIES:
        raise OutputSchemaError(
            f"output retries must be from 0 to {MAX_OUTPUT_RETRIES}, not {retries}"
        )
    model: bytes | None = None
    if inspect.isclass(given) and issubclass(given, BaseModel):
        schema = checked_schema(given.model_json_schema())
        name = output_name(given.__name__)
        if ship_model:
            from grove.supervisor.toolbox import pack

            _, model = pack(given, name)
    elif isinstance(given, dict):
        schema = checked_schema(given)
        title = given.get("title")
        name = output_name(title if isinstance(title, str) else None)
    else:
        raise OutputSchemaError(
            "output_type is a pydantic model class or a JSON schema dict, "
            f"not {type(given).__name__}"
        )
    if provider is not None:
        refusal = provider_refusal(schema, provider)
        if refusal is not None:
            raise OutputSchemaError(refusal)
    return OutputType.of(name, schema, retries, model)


def typed(result: TurnResult, model: type[BaseModel] | None) -> TurnResult:
    """`result` with its output read into `model` (a dict stays a dict without one)."""
    if model is None or result.output is None or isinstance(result.output, model):
        return result
    try:
        result.output = model.model_validate(result.output)
    except ValidationError as exc:  # a host that validated another version of the model
        result.output_error = one_line(f"the answer does not fit {model.__name__}: {exc}")
        result.output = None
    return result


def model_of(given: OutputTypeLike | None) -> type[BaseModel] | None:
    if inspect.isclass(given) and issubclass(given, BaseModel):
        return given
    return None
