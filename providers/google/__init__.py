"""The Gemini wire, one module a role: wire (the `Wire`), request (bodies), stream (events
mapped to Grove's), errors (Google's error objects read and mapped), cache (`cachedContents`).
"""

from __future__ import annotations

from grove.providers.base import ProviderName

PROVIDER: ProviderName = "google"
