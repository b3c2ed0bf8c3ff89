"""What OpenAI's Responses and Chat Completions APIs share in the simulator (`OpenAIAPI`): Bearer
auth, the model check, error bodies, the `x-request-id` header. Stream shapes live apart.
"""

from __future__ import annotations

from typing import Any

from grove.providers.ratelimit import Admission
from grove.simulator.caching import (
    PromptPrefixes,
    route_of,
    step_points,
    strings,
    whole_digest,
)
from grove.simulator.schema_rules import strict_problem
from grove.simulator.script import Structured
from grove.simulator.wire import (
    InvalidRequest,
    Problem,
    Reply,
    bearer_token,
    key_problem,
    random_id,
    retry_after_headers,
)

_ERRORS: dict[Problem, tuple[int, str, str | None, str]] = {
    "missing_key": (
        401,
        "invalid_request_error",
        None,
        "You didn't provide an API key. You need to provide your API key in an Authorization "
        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an API "
        "key from https://platform.openai.com/account/api-keys.",
    ),
    "bad_key": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    "bad_json": (
        400,
        "invalid_request_error",
        None,
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
        "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
        "sent was not valid JSON.)",
    ),
    "invalid_request": (400, "invalid_request_error", None, "Invalid request."),
    "not_found": (404, "invalid_request_error", None, "Invalid URL"),
    "model_not_found": (
        404,
        "invalid_request_error",
        "model_not_found",
        "The model does not exist or you do not have access to it.",
    ),
    "unsupported_value": (400, "invalid_request_error", "unsupported_value", "Unsupported value."),
    "unsupported_parameter": (
        400,
        "invalid_request_error",
        "unsupported_parameter",
        "Unsupported parameter.",
    ),
    "method_not_allowed": (405, "invalid_request_error", None, "Invalid method for URL"),
    "rate_limited": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. "
        "Please try again later. Visit https://platform.openai.com/account/rate-limits to learn "
        "more.",
    ),
    "server_error": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "unavailable": (503, "server_error", None, "The server is overloaded or not ready yet."),
    "overloaded": (503, "server_error", None, "The server is overloaded or not ready yet."),
    "context_length": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again.",
    ),
}


class OpenAIAPI:
    """Routing, authentication, error replies and response headers, alike on both OpenAI APIs;
    each names the one path it serves (`endpoint`)."""

    endpoint: str

    def __init__(self, refuse_cache_key: bool = False) -> None:
        # As an OpenAI-compatible server that knows no `prompt_cache_key` answers it.
        self.refuse_cache_key = refuse_cache_key

    def handles(self, path: str) -> bool:
        return path == self.endpoint

    def prefixes(self, body: dict[str, Any], prompt: list[Any]) -> PromptPrefixes:
        """The prompt (its parts in order) as OpenAI's cache sees it: 128-token steps, routed
        by its start and `prompt_cache_key`."""
        key = body.get("prompt_cache_key")
        if key is not None and self.refuse_cache_key:
            raise InvalidRequest(
                "Unrecognized request argument supplied: prompt_cache_key",
                param="prompt_cache_key",
            )
        if key is not None and not isinstance(key, str):
            raise InvalidRequest(
                "Invalid type for 'prompt_cache_key': expected a string.", param="prompt_cache_key"
            )
        points = step_points(strings(prompt))
        return PromptPrefixes(points=points, route=route_of(key, points, whole_digest(prompt)))

    def authenticate(
        self, headers: dict[str, str], query: dict[str, str], key: str
    ) -> Problem | None:
        return key_problem(bearer_token(headers), key)

    def error(
        self,
        problem: Problem,
        message: str | None = None,
        *,
        param: str | None = None,
        retry_after: float | None = None,
    ) -> Reply:
        return Reply(
            status=_ERRORS[problem][0],
            body={"error": error_object(problem, message, param=param)},
            headers=retry_after_headers(retry_after),
        )

    def response_headers(self) -> tuple[tuple[str, str], ...]:
        return (("x-request-id", random_id("req_", 32, "0123456789abcdef")),)

    def rate_limit_headers(self, admission: Admission) -> tuple[tuple[str, str], ...]:
        """`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as durations."""
        headers: list[tuple[str, str]] = []
        for name, quota in (("requests", admission.requests), ("tokens", admission.tokens)):
            if quota is not None:
                headers += [
                    (f"x-ratelimit-limit-{name}", str(quota.limit)),
                    (f"x-ratelimit-remaining-{name}", str(quota.remaining)),
                    (f"x-ratelimit-reset-{name}", openai_duration(quota.reset_s)),
                ]
        return tuple(headers)


def required_model(body: dict[str, Any]) -> str:
    """The body's `model`, or the error both OpenAI APIs give without one."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model")
    return model


def error_object(
    problem: Problem, message: str | None = None, *, param: str | None = None
) -> dict[str, Any]:
    _, kind, code, default = _ERRORS[problem]
    return {"message": message or default, "type": kind, "param": param, "code": code}


def reasoning_effort_on(effort: object) -> bool:
    """Whether an effort value asks for visible reasoning (not "minimal" or "none")."""
    return effort not in ("minimal", "none")


def openai_duration(seconds: float) -> str:
    """A duration as OpenAI's rate-limit headers write it: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest}s"


def json_schema_format(form: object, param: str) -> Structured | None:
    """A `json_schema` format (Responses `text.format`, Chat `response_format.json_schema`
    with its type beside it) as a structured request; a strict schema OpenAI would refuse
    gets its 400, as does a format without a name or a schema."""
    if not isinstance(form, dict):
        return None
    name = form.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"Missing required parameter: '{param}.name'.", param=f"{param}.name")
    schema = form.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequest(
            f"Missing required parameter: '{param}.schema'.", param=f"{param}.schema"
        )
    if form.get("strict") is True:
        problem = strict_problem(schema)
        if problem is not None:
            raise InvalidRequest(
                f"Invalid schema for response_format '{name}': {problem}", param=param
            )
    return Structured(schema=schema)


def forced_function(choice: object, functions: dict[str, Any]) -> Structured | None:
    """`tool_choice` "required" (the last function) or a named function: the call to make,
    with arguments made from that function's parameters."""
    if choice == "required" and functions:
        name = list(functions)[-1]
    elif isinstance(choice, dict) and choice.get("type") == "function":
        function = choice.get("function")
        name = str((function if isinstance(function, dict) else choice).get("name"))
        if name not in functions:
            raise InvalidRequest(f"Tool choice '{name}' not found in 'tools' parameter.")
    else:
        return None
    schema = functions[name]
    return Structured(schema=schema if isinstance(schema, dict) else {}, tool=name)
