"""The typed context every command receives in `ctx.obj`: the global options, and the Grove a
command runs on (a running service's `RemoteGrove`, one it starts, else one of its own), and
the one way to fail. Nothing in cli/ keeps module-level mutable state.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from grove.cli.printable import printable
from grove.cli.styles import RED, styled
from grove.providers.base import MAX_OUTPUT_RETRIES
from grove.providers.errors import GroveError
from grove.providers.tier_rules import TIER_HELP

if TYPE_CHECKING:  # the rest is imported where it is used: `grove --help` stays quick
    from grove.providers.base import JSONObject, ProviderName
    from grove.server.client import RemoteGrove
    from grove.server.files import ServiceState
    from grove.supervisor.api import Grove
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.command_defaults import CommandDefaults
    from grove.supervisor.config import GroveSettings
    from grove.supervisor.contract import GroveAPI, ReadsAPI

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
    defaults: CommandDefaults, cost: float | None, tokens: int | None, duration: str | None
) -> Budget | None:
    """The budget the --budget-* options give, kept as `[budget]` says (reserve_output, strict,
    hard_stop, soft); None: none given, the config's applies."""
    if cost is None and tokens is None and duration is None:
        return None
    from grove.supervisor.budget_rules import Budget  # only when a budget is asked for

    seconds = None
    if duration is not None:
        match = _DURATION.fullmatch(duration.strip())
        if match is None:
            fail(f"--budget-time: use seconds or a number with s, m or h; got {duration!r}", code=2)
        seconds = float(match["number"]) * _UNIT_SECONDS[match["unit"]]
    try:
        return Budget(tokens=tokens, cost_usd=cost, seconds=seconds, **defaults.budget_keeping)
    except ValueError as exc:
        fail(str(exc), code=2)


OutputSchemaOption = Annotated[
    Path | None,
    typer.Option(
        "--output-schema",
        metavar="FILE",
        help="Answer with JSON matching this JSON schema (its root an object); each answer is "
        "checked, and a malformed one goes back to the model with what is wrong.",
    ),
]
OutputRetriesOption = Annotated[
    int,
    typer.Option(
        "--output-retries",
        min=0,
        max=MAX_OUTPUT_RETRIES,
        help="How many times a malformed answer goes back to the model (with --output-schema).",
    ),
]


def cli_output_schema(path: Path | None, providers: Iterable[ProviderName]) -> JSONObject | None:
    """The schema of --output-schema, checked for `providers`; exit 2 in one line, before
    anything starts, for a file that is not a schema they take."""
    if path is None:
        return None
    from grove.providers.errors import OutputSchemaError
    from grove.supervisor.output_files import schema_file

    try:
        return schema_file(path, providers)
    except OutputSchemaError as exc:
        fail(str(exc), code=2)


TierOption = Annotated[
    str | None,
    typer.Option(
        "--tier",
        metavar="standard|flex|batch",
        help="The price tier of the agents' requests (default: [defaults] tier). "
        + TIER_HELP
        + ".",
    ),
]


def cli_tier(flag: str | None, defaults: CommandDefaults) -> str:
    """--tier, else the config's; exit 2 naming the tiers there are, before anything starts."""
    from grove.providers.tier_rules import UnknownTierError, checked_tier

    try:
        return checked_tier(flag if flag is not None else defaults.tier)
    except UnknownTierError as exc:
        fail(f"--tier: {exc}", code=2)


AllowOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        metavar="TOOL",
        help="Let this tool run without asking (e.g. bash); repeatable.",
    ),
]


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


NO_SERVICE_ENV = "GROVE_NO_SERVICE"  # =1: as --no-service, every command runs in-process

SimulateOption = Annotated[
    bool,
    typer.Option(
        "--simulate",
        help="Answer from the built-in provider simulator (offline): on a service started "
        "with --simulate, else in a Grove of this command's own (never a service it starts).",
    ),
]
HostsOption = Annotated[
    int | None,
    typer.Option(
        "--hosts",
        min=1,
        help="Agent host processes to start, in a Grove of this command's own unless a "
        "service started with the same --hosts is up; default: [hosts] count, else one per CPU.",
    ),
]


@dataclass
class CliContext:
    """The global options. `own`: --store or --address was given on the command line, so
    every command uses a Grove of its own (or reads that store), never a running service;
    `no_service` (--no-service, GROVE_NO_SERVICE=1): the same, whatever the store."""

    store: str | None = None
    address: str | None = None
    own: bool = False
    no_service: bool = False
    _settings: GroveSettings | None = field(default=None, repr=False)

    def settings(self) -> GroveSettings:
        from grove.supervisor.config import load_settings
        from grove.supervisor.local_ray import keep_local_ray_on_loopback

        if self._settings is None:
            try:
                self._settings = load_settings(store=self.store, address=self.address)
            except GroveError as exc:
                fail(str(exc), code=2)
            keep_local_ray_on_loopback(self._settings.address)
        return self._settings

    def service(self, *, simulate: bool = False, hosts: int | None = None) -> ServiceState | None:
        """The running service to use, unless none is up or this command runs in-process
        (--store / --address given, --no-service); with --simulate or --hosts, only a service
        started the same way (`grove up --simulate`, `--hosts N`)."""
        if self.own or self.no_service or self.prints_traces():
            return None
        from grove.server.files import read_state

        state = read_state()
        if state is None or (simulate and not state.simulate):
            return None
        if hosts is not None and hosts != state.hosts:
            return None
        return state

    def remote(self, *, simulate: bool = False, hosts: int | None = None) -> RemoteGrove | None:
        """The Grove of the service to use (see `service`), if any."""
        state = self.service(simulate=simulate, hosts=hosts)
        if state is None:
            return None
        from grove.server.client import RemoteGrove

        return RemoteGrove(state)

    def prints_traces(self) -> bool:
        """Whether this command's spans are printed where it runs (OTEL_TRACES_EXPORTER=console,
        GROVE_TRACES_FILE): it then runs a Grove of its own, whose span printer is in this
        process, not a service's, whose output is its log (supervisor/trace_printer.py). Told
        from the variables alone when neither is set (no settings, no pydantic: a command
        through a service starts fast)."""
        exporters = os.environ.get("OTEL_TRACES_EXPORTER", "").lower()
        if "console" not in exporters and not os.environ.get("GROVE_TRACES_FILE", "").strip():
            return False
        from grove.supervisor.telemetry import telemetry_settings

        try:
            telemetry = telemetry_settings(self.settings().telemetry)
        except GroveError:  # the command's own checks say what is wrong with it
            return False
        return telemetry is not None and telemetry.printed is not None

    def defaults(self, remote: RemoteGrove | None, *, simulate: bool = False) -> CommandDefaults:
        """What the configuration gives the command: the service's, or this process's (for a
        Grove of its own, on the simulator with `simulate`)."""
        if remote is not None:
            try:
                return remote.defaults()
            except GroveError as exc:
                remote.close()
                fail(str(exc))
        from grove.supervisor.command_defaults import command_defaults

        return command_defaults(self.settings(), simulated=simulate)

    def joins_cluster(self, remote: RemoteGrove | None) -> bool:
        """Whether the agents run on a Ray this command does not start: a cluster it joins
        (--address), or the Ray this process runs already (a program that calls the command
        line); its hosts' environment (keys, commands) is not this process's."""
        if remote is not None:
            return False
        ray = sys.modules.get("ray")  # never imported here for the question
        return self.address is not None or (ray is not None and ray.is_initialized())

    def grove(
        self, *, simulate: bool = False, hosts: int | None = None, own_hosts: int | None = None
    ) -> GroveAPI:
        """The Grove of a command that needs Ray and found no service to use (`remote`): a
        service it starts in the background (cli/autostart.py) when it may (`[service]
        autostart`; not with --simulate, --hosts, --store, --address, --no-service, printed
        spans, nor in a program running Ray), else one of its own, with `hosts`, else
        `own_hosts`. Its store and where its traces go are checked first (exit 2)."""
        settings = self.checked_settings()
        given_own = simulate or hosts is not None or self.own or self.no_service
        given_own = given_own or self.prints_traces()
        if not given_own and settings.service.autostart and not self.joins_cluster(None):
            from grove.cli.autostart import started_service

            started = started_service(self.store, settings.service.idle_stop_s)
            if started is not None:
                return started
        return own_grove(settings, simulate=simulate, hosts=hosts or own_hosts)

    def local_grove(self, *, simulate: bool = False, hosts: int | None = None) -> Grove:
        """A Grove of this command's own, not started; its store and where its traces go
        checked first (exit 2)."""
        return own_grove(self.checked_settings(), simulate=simulate, hosts=hosts)

    def checked_settings(self) -> GroveSettings:
        """The settings, once the store they name and where traces go are checked (exit 2)."""
        settings = self.settings()
        self.checked_store()
        from grove.supervisor.telemetry import telemetry_settings

        try:
            telemetry_settings(settings.telemetry)
        except GroveError as exc:
            fail(str(exc), code=2)
        return settings

    @contextmanager
    def catalog(self) -> Iterator[GroveAPI]:
        """What `grove models` asks: the service, or a Grove of this command's own, not started
        (the catalog needs no Ray and no store)."""
        remote = self.remote()
        if remote is not None:
            with remote:
                yield remote
            return
        from grove.supervisor.api import Grove  # after the settings: see keep_local_ray_on_loopback

        with contextlib.closing(Grove(settings=self.settings())) as grove:
            yield grove

    @contextmanager
    def reads(self) -> Iterator[ReadsAPI]:
        """What agents, history, events and usage read: the service, or the store itself
        (no Ray): exit 2 when no store is there, 1 when it cannot be read."""
        state = self.service()
        if state is not None:
            from grove.server.remote_reads import RemoteReads
            from grove.server.service_link import ServiceLink

            with RemoteReads(ServiceLink(state)) as remote:
                yield remote
            return
        from grove.supervisor.errors import NoStoreError
        from grove.supervisor.reads import StoreReads

        settings = self.settings()
        try:
            opened = StoreReads(settings.store, keep_days=settings.events.keep_days)
        except NoStoreError as exc:
            fail(str(exc), code=2)
        except GroveError as exc:
            fail(str(exc))
        self.warn_if_store_exposed()
        with opened:
            yield opened

    def checked_store(self) -> None:
        """Before Ray starts (run, chat, batch): an unusable store fails here with one line
        (exit 2) instead of a supervisor dying under Ray; joining a cluster, the cluster's
        store may not be reachable from here, so it is left to the supervisor."""
        from grove.supervisor.store import open_store

        if self.address is None:
            try:
                open_store(self.settings().store).close()
            except GroveError as exc:
                fail(str(exc), code=2)
        self.warn_if_store_exposed()

    def warn_if_store_exposed(self) -> None:
        from grove.supervisor.store import exposed_store_warning

        warning = exposed_store_warning(self.settings().store)
        if warning:
            sys.stderr.write(styled(sys.stderr, warning, RED) + "\n")


def own_grove(settings: GroveSettings, *, simulate: bool, hosts: int | None) -> Grove:
    """A Grove of the command's own on `settings`, not started."""
    from grove.supervisor.api import Grove  # after the settings: see keep_local_ray_on_loopback

    return Grove(settings=settings, simulate=simulate, hosts=hosts)
