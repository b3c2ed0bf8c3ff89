"""What a request about to be sent may be billed at most: told to the supervisor before it goes,
so that a request whose host dies before its reply's bill is known is still counted, once.
"""

from __future__ import annotations

from typing import Any

from grove.providers.base import ProviderName, Request, Usage
from grove.providers.catalog import model_info
from grove.providers.errors import GroveError
from grove.providers.pricing import cost_usd
from grove.providers.thinking import DEFAULT_MAX_TOKENS, anthropic_thinking

# In a bill's data: an estimate (the request's input as estimated, its reply as reserved),
# stored as the bill of a request whose host died before its reply's bill was known.
ESTIMATED = "estimated"
# The word that a request sent failed without a bill (an error answer, to be retried).
UNBILLED = "unbilled"


def estimated_bill(
    request: Request, provider: ProviderName, tokens: int, hold: Any | None
) -> dict[str, Any]:
    """The bill of a request of about `tokens` input, on the high side: the reply its budget
    holds and what the hold costs (`hold`, when a budget holds anything for it), else as long
    a reply as it may get."""
    if hold is not None and hold.tokens:
        usage = Usage(input_tokens=tokens, output_tokens=int(hold.output))
        cost = float(hold.cost_usd)
    else:
        usage = Usage(input_tokens=tokens, output_tokens=longest_reply(request, provider))
        cost = cost_usd(request.model, usage, tier=request.tier)
    return {
        "usage": usage.as_dict(),
        "cost_usd": cost,
        "model": request.model,
        "provider": provider,
        ESTIMATED: True,
    }


def longest_reply(request: Request, provider: ProviderName) -> int:
    """The reply tokens the request may be billed at most: the cap it is sent with (Anthropic's
    wire always sends one), else its model's longest reply."""
    try:
        if provider == "anthropic":
            return anthropic_thinking(request.model, request.thinking, request.max_tokens)[1]
        return request.max_tokens or model_info(request.model, provider).max_output_tokens
    except GroveError:  # a model the catalog does not know: what is asked for by default
        return request.max_tokens or DEFAULT_MAX_TOKENS


def is_bill(data: dict[str, Any]) -> bool:
    """Whether a word of a request's billing is what it was billed (not what it may be, nor
    that it failed unbilled)."""
    return not data.get(ESTIMATED) and not data.get(UNBILLED)
