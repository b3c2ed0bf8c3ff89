"""The typed context every command receives in `ctx.obj`, and the one way to fail.

Global options land here; nothing in cli/ keeps module-level mutable state.
"""

from __future__ import annotations

import re
import secrets
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from cli.printable import printable
from cli.styles import RED, styled
from providers.errors import GroveError

if TYPE_CHECKING:  # the rest is imported where it is used: `grove --help` stays quick
    from providers.base import ProviderName
    from providers.http import Endpoint
    from supervisor.budget_rules import Budget
    from supervisor.config import GroveSettings

ToolsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        metavar="PACKAGE.MODULE:ATTR",
        help="Give the agents these Python tools (a function or a list of them); repeatable. "
        "Modules are looked for in the current directory first.",
    ),
]
BudgetCostOption = Annotated[
    float | None,
    typer.Option("--budget-cost", help="Stop the tree's requests at this cost in USD."),
]
BudgetTokensOption = Annotated[
    int | None,
    typer.Option("--budget-tokens", help="Stop the tree's requests at this many tokens."),
]
BudgetTimeOption = Annotated[
    str | None,
    typer.Option("--budget-time", help="Stop the tree's requests after 90s, 5m, 2h (or seconds)."),
]
_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<unit>[smh]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def cli_budget(
    settings: GroveSettings, cost: float | None, tokens: int | None, duration: str | None
) -> Budget | None:
    """The budget the --budget-* options give, kept as `[budget]` says (reserve_output, strict,
    hard_stop, soft); None: none given, the config's applies."""
    from supervisor.budget_rules import Budget  # only when a budget is asked for

    if cost is None and tokens is None and duration is None:
        return None
    seconds = None
    if duration is not None:
        match = _DURATION.fullmatch(duration.strip())
        if match is None:
            fail(f"--budget-time: use seconds or a number with s, m or h; got {duration!r}", code=2)
        seconds = float(match["number"]) * _UNIT_SECONDS[match["unit"]]
    keeping = settings.budget
    try:
        return Budget(
            tokens=tokens,
            cost_usd=cost,
            seconds=seconds,
            soft=keeping.soft,
            reserve_output=keeping.reserve_output,
            strict=keeping.strict,
            hard_stop=keeping.hard_stop,
        )
    except ValueError as exc:
        fail(str(exc), code=2)


AllowOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        metavar="TOOL",
        help="Let this tool run without asking (e.g. bash); repeatable.",
    ),
]


def root_tools(settings: GroveSettings, flags: list[str] | None, *, defaults: bool) -> list[str]:
    """The tools of a root the command line makes: the default set of chat and run roots
    (`[tools] default`; todo, fork, send and wait unless set), then `[tools] modules`, the
    MCP servers' tools, then `--tools`. Batch tasks get the user and MCP tools only."""
    from supervisor.tool_rules import DEFAULT_ROOT_TOOLS

    chosen = settings.tools.default if settings.tools.default is not None else DEFAULT_ROOT_TOOLS
    base = list(chosen) if defaults else []
    servers = [f"mcp__{name}" for name, server in settings.mcp.servers.items() if server.enabled]
    return list(dict.fromkeys([*base, *settings.tools.modules, *servers, *(flags or [])]))


def fail(text: str, code: int = 1) -> NoReturn:
    """Print `text` as an error and exit with `code`."""
    show_error(text)
    raise typer.Exit(code)


def show_error(text: str) -> None:
    """`text` on stderr, red on a terminal, made printable (it may hold a provider's words)."""
    sys.stderr.write(styled(sys.stderr, printable(text), RED) + "\n")


def undecodable_text(what: str, text: str) -> str | None:
    """What is wrong with command-line text that is not UTF-8, else None. Python hands bytes
    it could not decode over as lone surrogates (U+DC80..U+DCFF stands for byte 0x80..0xff);
    caught here, before Ray or the store ever see them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        shown = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
        return f"The {what} is not valid UTF-8: {shown} at character {exc.start + 1}"
    return None


@dataclass
class CliContext:
    store: str | None = None
    address: str | None = None
    _settings: GroveSettings | None = field(default=None, repr=False)

    def settings(self) -> GroveSettings:
        from supervisor.config import load_settings
        from supervisor.local_ray import keep_local_ray_on_loopback

        if self._settings is None:
            try:
                self._settings = load_settings(store=self.store, address=self.address)
            except GroveError as exc:
                fail(str(exc), code=2)
            keep_local_ray_on_loopback(self._settings.address)
        return self._settings

    def checked_store(self) -> None:
        """Before Ray starts (run, chat, batch): an unusable store fails here with one line
        (exit 2) instead of a supervisor dying under Ray; joining a cluster, the cluster's
        store may not be reachable from here, so it is left to the supervisor."""
        from supervisor.store import open_store

        if self.address is None:
            try:
                open_store(self.settings().store).close()
            except GroveError as exc:
                fail(str(exc), code=2)
        self.warn_if_store_exposed()

    def warn_if_store_exposed(self) -> None:
        from supervisor.store import exposed_store_warning

        warning = exposed_store_warning(self.settings().store)
        if warning:
            sys.stderr.write(styled(sys.stderr, warning, RED) + "\n")

    def simulator_endpoint(self, stack: ExitStack, provider: ProviderName) -> Endpoint:
        """Start the simulator in this process for the life of `stack`; a throwaway key."""
        from providers.http import Endpoint
        from providers.simulator import SimulatorConfig, SimulatorThread

        key = "sim-" + secrets.token_hex(16)
        simulator = stack.enter_context(SimulatorThread(SimulatorConfig(port=0, api_key=key)))
        return Endpoint(base_url=simulator.base_url, api_key=key)
