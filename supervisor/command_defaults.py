"""`CommandDefaults`: what a command line takes from the configuration (the default model,
model aliases, the tools of the roots it makes, how its budgets are kept), from this process's
settings or from a running service's, so a command behaves the same either way. Stdlib only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grove.supervisor.config import GroveSettings


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandDefaults:
    model: str | None = None  # [defaults] model
    tier: str = "standard"  # [defaults] tier
    aliases: dict[str, str] = field(default_factory=dict)  # [models] aliases
    # What the roots of `grove chat` and `grove run` have: [tools] default, or the built-in set.
    root_tools: list[str] = field(default_factory=list)
    # What every root a command makes has: [tools] modules, then each enabled MCP server's.
    added_tools: list[str] = field(default_factory=list)
    # [tools.policy]: the tools that run without asking, ask first or are refused (before --allow).
    policy: dict[str, str] = field(default_factory=dict)
    # How a budget given by --budget-* is kept: [budget] soft, reserve_output, strict, hard_stop.
    budget_keeping: dict[str, Any] = field(default_factory=dict)
    # What a command checks before it starts anything (cli/preflight.py), as the Grove that runs
    # the agents sees it: [budget]'s limits, the models [models] prices, whether every provider
    # is the simulator, the providers with a key, and the MCP servers that cannot start.
    budget: dict[str, Any] | None = None
    priced: list[str] = field(default_factory=list)
    simulated: bool = False
    signed_in: list[str] = field(default_factory=list)
    mcp_problems: list[str] = field(default_factory=list)

    def tools(self, flags: list[str] | None, *, defaults: bool) -> list[str]:
        """The tools of a root the command line makes: the default set of chat and run roots
        (when `defaults`), the configured user and MCP tools, then the --tools flags."""
        base = self.root_tools if defaults else []
        return list(dict.fromkeys([*base, *self.added_tools, *(flags or [])]))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommandDefaults:
        return cls(**data)


def command_defaults(settings: GroveSettings, *, simulated: bool = False) -> CommandDefaults:
    """The defaults `settings` give a command line, for a Grove in this process's environment
    (`simulated`: every provider is the simulator)."""
    from grove.providers.credentials import signed_in
    from grove.supervisor.tool_rules import DEFAULT_ROOT_TOOLS, mcp_problems

    tools = settings.tools
    servers = [f"mcp__{name}" for name, server in settings.mcp.servers.items() if server.enabled]
    keeping = settings.budget
    return CommandDefaults(
        model=settings.defaults.model,
        tier=settings.defaults.tier,
        aliases=dict(settings.models.aliases),
        root_tools=list(tools.default if tools.default is not None else DEFAULT_ROOT_TOOLS),
        added_tools=[*tools.modules, *servers],
        policy=dict(tools.policy),
        budget_keeping={
            "soft": keeping.soft,
            "reserve_output": keeping.reserve_output,
            "strict": keeping.strict,
            "hard_stop": keeping.hard_stop,
        },
        budget=keeping.budget(),
        priced=list(settings.models.prices),
        simulated=simulated,
        signed_in=[] if simulated else list(signed_in()),
        mcp_problems=mcp_problems(settings.mcp.servers),
    )
