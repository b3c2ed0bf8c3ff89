"""The Anthropic Messages wire, one module a role: wire (the `Wire`), request (bodies and
headers), stream (events mapped to Grove's), errors (Anthropic's mapped), cache (breakpoints).
"""

from __future__ import annotations

from grove.providers.base import ProviderName

PROVIDER: ProviderName = "anthropic"
