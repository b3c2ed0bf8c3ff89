"""`grove chat`: the REPL over a root agent, live in a terminal (cli/chat_live.py), line by line
otherwise.

Talks to Grove only through `supervisor.Grove`, or a running service's `server.client.RemoteGrove`;
the rules and texts live in supervisor/.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, BinaryIO, TextIO

import typer

from grove.cli.context import (
    AllowOption,
    BudgetCostOption,
    BudgetTimeOption,
    BudgetTokensOption,
    CliContext,
    HostsOption,
    SimulateOption,
    TierOption,
    ToolsOption,
    cli_budget,
    cli_tier,
    fail,
)
from grove.cli.preflight import preflight
from grove.cli.render import TurnWriter
from grove.cli.repl import Repl
from grove.providers.errors import GroveError
from grove.supervisor.errors import CommandError

if TYPE_CHECKING:
    from grove.supervisor.budget_rules import Budget
    from grove.supervisor.contract import GroveAPI, TurnAPI


def chat_command(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="MODEL[/THINKING] for the new root agent."),
    ] = None,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Resume this agent's session (uuid or prefix).")
    ] = None,
    simulate: SimulateOption = False,
    hosts: HostsOption = None,
    tools: ToolsOption = None,
    allow: AllowOption = None,
    budget_cost: BudgetCostOption = None,
    budget_tokens: BudgetTokensOption = None,
    budget_time: BudgetTimeOption = None,
    tier: TierOption = None,
) -> None:
    """Talk to a root agent; lines starting with / are commands (/help lists them). With a
    Grove service up (`grove up`), the session lives there.

    With stdin not a terminal, each line runs in order as typed at the prompt: a prompt's turn
    (and a /fork's with a prompt) ends before the next line is read."""
    context: CliContext = ctx.obj
    remote = context.remote(simulate=simulate, hosts=hosts)
    defaults = context.defaults(remote, simulate=simulate)
    budget = cli_budget(defaults, budget_cost, budget_tokens, budget_time)
    if resume is not None and tier is not None:
        fail("--tier sets a new session's tier; a resumed agent keeps its own", code=2)
    chosen_tier = cli_tier(tier, defaults)
    preflight(
        defaults,
        models=[model or (None if resume else defaults.model)],
        tools=tools,
        budget=budget,
        joined=context.joins_cluster(remote),
    )
    grove = remote or context.grove(simulate=simulate, hosts=hosts)
    try:
        grove.start()
        given = defaults.tools(tools, defaults=True)
        session = open_session(grove, model, resume, given, allow or [], budget, chosen_tier)
    except GroveError as exc:
        grove.close()
        fail(str(exc), code=2)
    rejected = 0
    try:
        sys.stdout.write(f"Agent {session}\n")
        sys.stdout.flush()
        if sys.stdin.isatty():
            from grove.cli.chat_live import LiveRepl  # prompt_toolkit: only for a terminal

            LiveRepl(grove, session).run()
        else:
            scripted = ScriptedRepl(grove, session, sys.stdout)
            scripted.run(sys.stdin.buffer)
            rejected = scripted.rejected
    finally:
        grove.close()
    if rejected:
        fail(f"{rejected} of the lines read were rejected", code=1)


def open_session(
    grove: GroveAPI,
    model: str | None,
    resume: str | None,
    tools: list[str],
    allow: list[str],
    budget: Budget | None = None,
    tier: str | None = None,
) -> str:
    """The root uuid of a new session (with `tools`, `budget` and `tier`), or of the session
    holding the resumed agent (with the tools, budget and tier it has)."""
    if resume is None:
        return grove.create_root(model, tools=tools, allow=allow, budget=budget, tier=tier).uuid
    record = grove.agent(resume)
    if model is None:
        warn_of_retired_model(record.provider, record.model)
    while record.parent_uuid is not None:
        record = grove.agent(record.parent_uuid)
    if model is not None:
        outcome = grove.dispatch(record.uuid, f"/model {model}", "repl")
        if not outcome.ok:
            raise CommandError(outcome.text)
    return record.uuid


def warn_of_retired_model(provider: str | None, model: str | None) -> None:
    """A resumed agent on a model that is retired or shutting down: what to do, on stderr
    (its model id as written for another server, `PROVIDER:MODEL`, is not judged)."""
    from grove.providers.catalog import infer_provider
    from grove.providers.lifecycle import standing

    if model is None or infer_provider(model) != provider:
        return
    verdict = standing(model)
    if verdict is not None and verdict.notice is not None:
        sys.stderr.write((verdict.resume_text if verdict.retired else verdict.notice) + "\n")


class ScriptedRepl(Repl):
    """stdin is not a terminal: the lines run in order as if typed at the prompt, each turn a
    line starts (a prompt's, a /fork's with a prompt) streamed to its end before the next."""

    def __init__(self, grove: GroveAPI, session: str, out: TextIO) -> None:
        self.grove = grove
        self.session = session
        self.writer = TurnWriter(out, styles=False)
        self.rejected = 0  # lines refused: a script reading the exit status is told

    def run(self, source: BinaryIO) -> None:
        """Every line of `source`, each capped in length as it is read (a longer one is
        rejected, not held in memory)."""
        from grove.supervisor.batch.tasks import TaskLineError, decode_lines

        for number, raw in decode_lines(source, what="stdin", max_bytes=None):
            if isinstance(raw, TaskLineError):
                self.rejected += 1
                self.writer.line(f"stdin line {number}: {raw.message}; not sent")
                continue
            line = raw.strip()
            if line and self.handle(line):
                break

    def report(self, text: str, ok: bool) -> None:
        self.rejected += not ok
        self.writer.line(text)

    def command(self, line: str) -> bool:
        """Run one command and print its outcome; True when it asks the REPL to end."""
        try:
            outcome = self.grove.dispatch(self.session, line, "repl")
        except GroveError as exc:
            self.rejected += 1
            self.writer.line(str(exc))
            return False
        self.rejected += not outcome.ok
        self.writer.line(outcome.text)
        turn = self.grove.command_turn(outcome)
        if turn is not None:
            self._follow(turn)
        return bool(outcome.data.get("exit"))

    def prompt(self, text: str) -> None:
        try:
            turn = self.grove.send(self.grove.focus(self.session), text)
        except GroveError as exc:
            self.rejected += 1
            self.writer.line(str(exc))
            return
        self._follow(turn)

    def _follow(self, turn: TurnAPI) -> None:
        """Print the turn's reply to its end, as a person at the prompt would see it."""
        try:
            self.writer.stream(turn)
        except Exception as exc:  # a lost host or Ray error: report it, keep the REPL
            self.writer.line(f"Turn failed: {exc}")
