"""Provider requests a host makes outside any agent's turn, each on a provider of its own closed
afterwards: a provider-side cache of a shared prefix (Gemini), its deletion, one completion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grove.actors.agent.choice import ModelChoice, ProviderFactory
from grove.actors.agent.tool import Tool
from grove.actors.host.tickets import Activation
from grove.actors.tools.grant import ToolGrant
from grove.actors.transcript import Entry, to_messages
from grove.providers.base import AssistantTurn, Message, Request
from grove.providers.errors import ProviderError
from grove.providers.google.cache import CachedContent, create_cached_content, delete_cached_content
from grove.providers.http import HTTPProvider

# An agent's tools from its grant, on its own workspace (None: the host's).
ToolsFactory = Callable[[str, ToolGrant, str | None], dict[str, Tool]]


class ProviderJobs:
    """Builds a provider for each job from the host's factory, and the tools a cached prefix
    carries from the host's tool factory."""

    def __init__(self, make_provider: ProviderFactory, make_tools: ToolsFactory | None) -> None:
        self._make_provider = make_provider
        self._make_tools = make_tools

    async def create_cache(
        self, activation: Activation, prefix: Sequence[Entry], ttl_s: int
    ) -> CachedContent:
        """A provider-side copy (Gemini `cachedContents`) of what `activation`'s agent sends
        before its own first message: its system prompt, its tools and `prefix`."""
        assert activation.choice is not None, "a cache is made for an agent with a model"
        tools = (
            self._make_tools(activation.uuid, activation.tools, activation.workspace)
            if self._make_tools and activation.tools
            else {}
        )
        request = Request(
            model=activation.choice.model,
            messages=tuple(to_messages(prefix)),
            system=activation.system,
            tools=tuple(tool.spec for tool in tools.values()),
        )
        provider = self._make_provider(activation.choice)
        try:
            if not isinstance(provider, HTTPProvider):
                raise ProviderError("explicit caches are made over HTTP")
            return await create_cached_content(provider, request, ttl_s)
        except ProviderError as exc:  # as its text: the HTTP error's own fields do not pickle
            raise ProviderError(str(exc), provider=exc.provider) from None
        finally:
            await provider.aclose()

    async def drop_cache(self, choice: ModelChoice, name: str) -> None:
        """Delete a provider-side cache `create_cache` made."""
        provider = self._make_provider(choice)
        try:
            if isinstance(provider, HTTPProvider):
                await delete_cached_content(provider, name)
        finally:
            await provider.aclose()

    async def complete(
        self, choice: ModelChoice, system: str, prompt: str, max_tokens: int
    ) -> AssistantTurn:
        """One request outside any agent's conversation (a compaction summary), on a provider
        of its own, closed afterwards."""
        provider = self._make_provider(choice)
        try:
            request = Request(
                model=choice.model,
                messages=(Message.user(prompt),),
                system=system,
                thinking=choice.thinking,
                max_tokens=max_tokens,
            )
            return await provider.complete(request)
        finally:
            await provider.aclose()
