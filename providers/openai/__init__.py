"""The OpenAI wires, one module a role: wire (the frame both share), responses and chat (request
bodies and each API's `Wire`), their streams, errors (OpenAI's mapped), cache (`prompt_cache_key`).
"""

from __future__ import annotations

from grove.providers.base import ProviderName

PROVIDER: ProviderName = "openai"
