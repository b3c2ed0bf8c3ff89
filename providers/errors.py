"""Grove's one error hierarchy: every provider-layer error class lives here (the supervisor's
branch in supervisor.errors); each vendor's errors.py maps its wire's errors onto this tree.

    GroveError                         every error Grove raises on purpose; its text is masked
     +-- ModelSpecError               bad MODEL[/THINKING]: exact user-facing text
     |    +-- UnknownModelError
     |    +-- InvalidThinkingLevelError
     |    +-- RetiredModelError        a model its vendor no longer serves (lifecycle)
     |    +-- ClockError               GROVE_TODAY is not a date
     +-- CatalogError                 the models data file is malformed
     +-- OutputSchemaError            an output schema Grove or the provider cannot use
     +-- PatternError                 a pattern RE2 refuses or that is too long
     +-- ProviderError                anything that went wrong talking to a model
     |    +-- MissingCredentialsError  no key: nothing was sent
     |    +-- ProviderConfigError      a setting that cannot work (a base URL): nothing was sent
     |    +-- ProviderHTTPError        non-2xx: status, body, retry_after
     |    +-- ProviderConnectionError  no HTTP answer (refused, reset, timed out)
     |    +-- ProviderStreamError      an error event inside a 200 stream
     |    +-- StreamBroken             the stream ended before the API's terminal signal
     |    +-- ProviderProtocolError    a stream Grove cannot read
     +-- CommandError, StoreError, SupervisorError   (supervisor.errors)
     +-- InvalidRequest, MalformedRequest, DirectiveError   (the simulator's: a request its
                                      APIs refuse, bytes that are no HTTP, a bad [[sim]] line)

`retryable` says whether the provider base may try again; it never holds for auth, quota or
spend-limit errors. No error text ever contains an API key.
"""

from __future__ import annotations

import re

from grove.providers.secrets import mask


class GroveError(Exception):
    """Root of every error Grove raises on purpose. Its text is masked when it is made, so no
    loaded credential, key-shaped string or URL password survives in it."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(mask(arg) if isinstance(arg, str) else arg for arg in args))


class ModelSpecError(GroveError):
    """A MODEL[/THINKING] string Grove cannot use; `str()` is the exact user-facing text."""


class UnknownModelError(ModelSpecError):
    def __init__(self, text: str, model: str) -> None:
        super().__init__(text)
        self.model = model


class InvalidThinkingLevelError(ModelSpecError):
    def __init__(self, text: str, level: str) -> None:
        super().__init__(text)
        self.level = level


class RetiredModelError(ModelSpecError):
    """A model its vendor no longer serves; `str()` is the one line the user sees."""

    def __init__(self, text: str, model: str) -> None:
        super().__init__(text)
        self.model = model


class ClockError(ModelSpecError):
    """`GROVE_TODAY` is not a date."""


class CatalogError(GroveError):
    """The data file is malformed; the message names the file, the place and what is wrong."""


class OutputSchemaError(GroveError):
    """An output schema Grove cannot use, or a provider cannot take; one line naming why."""


class PatternError(GroveError):
    """A pattern RE2 refuses or that is too long; the text says why (the model is told)."""


class ProviderError(GroveError):
    """A failure talking to a provider. `retryable` is false unless a subclass says so."""

    retryable: bool = False
    retry_after: float | None = None

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider


class MissingCredentialsError(ProviderError):
    """No API key for a provider; the text is the reference's, nothing was sent."""


class ProviderConfigError(ProviderError):
    """A provider setting that cannot work (a base URL that is not http or https); never
    retried, found before anything is sent."""


class ProviderHTTPError(ProviderError):
    """A non-2xx answer. `kind` is the provider's error type (e.g. `rate_limit_error`)."""

    RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int,
        body: str = "",
        kind: str | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message, provider=provider)
        self.status = status
        self.body = mask(body)
        self.kind = kind
        self.retry_after = retry_after
        self.retryable = (status in self.RETRYABLE_STATUSES) if retryable is None else retryable


class ProviderConnectionError(ProviderError):
    """No HTTP answer at all: the request may be retried."""

    retryable = True


class ProviderStreamError(ProviderError):
    """An error event inside a stream that had answered 200 (overloaded, server error...)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        kind: str | None = None,
        retryable: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider)
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after


class StreamBroken(ProviderError):
    """The body ended or broke before the API's terminal signal; nothing is complete."""

    retryable = True


class ProviderProtocolError(ProviderError):
    """The provider sent something that is not its documented wire format."""


# What each provider says when a request is over the model's context window (Anthropic,
# OpenAI's two APIs and compatible servers, Gemini).
_CONTEXT_OVERFLOW = re.compile(
    r"prompt is too long|context_length_exceeded|maximum context length"
    r"|exceeds the context window|input token count .* exceeds the maximum",
    re.IGNORECASE,
)


def is_context_overflow(text: str) -> bool:
    """Whether a provider error's text says the request did not fit the context window."""
    return _CONTEXT_OVERFLOW.search(text) is not None
