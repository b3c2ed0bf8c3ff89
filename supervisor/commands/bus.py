"""The command bus: `dispatch(line)` resolves, serializes and runs a command, with its events.

Every dispatch leaves CommandDispatched before and CommandResulted after, one correlation id;
a command's events reach the store in one write (supervisor/eventlog.py).
"""

from __future__ import annotations

import logging
import uuid
from functools import cache

from grove.supervisor.commands.builtin import BUNDLED
from grove.supervisor.commands.contextual import CONTEXT_COMMANDS
from grove.supervisor.commands.parsing import split_command
from grove.supervisor.commands.registry import (
    CommandContext,
    CommandOutcome,
    Registry,
    plugin_commands,
)
from grove.supervisor.commands.reports import REPORT_COMMANDS
from grove.supervisor.core import SupervisorCore
from grove.supervisor.errors import CommandError

LEASE_TIMEOUT_S = 120.0
logger = logging.getLogger(__name__)


@cache
def registry() -> Registry:
    return Registry([BUNDLED + CONTEXT_COMMANDS + REPORT_COMMANDS, plugin_commands()])


async def dispatch(
    core: SupervisorCore,
    session: str,
    line: str,
    *,
    origin: str,
    aliases: dict[str, str] | None = None,
) -> CommandOutcome:
    try:
        name, args = split_command(line)
    except CommandError as exc:
        return CommandOutcome(text=str(exc), ok=False)
    with core.event_log.batched():
        return await _run(core, session, name, args, origin, aliases)


async def _run(
    core: SupervisorCore,
    session: str,
    name: str,
    args: str,
    origin: str,
    aliases: dict[str, str] | None,
) -> CommandOutcome:
    correlation_id = uuid.uuid4().hex
    focus = core.store.get_focus(session) or session
    core.event(
        "CommandDispatched",
        name=name,
        args=args,
        correlation_id=correlation_id,
        origin=origin,
        agent=focus,
    )
    try:
        command = registry().get(name)

        async def run(focus: str) -> CommandOutcome:
            context = CommandContext(
                core=core,
                session=session,
                focus=focus,
                origin=origin,
                correlation_id=correlation_id,
                aliases=aliases or {},
                commands=registry().commands,
            )
            return await command.handler(context, args)

        if command.mutates:
            async with core.session_lock(session), core.store.lease(session, LEASE_TIMEOUT_S):
                # The focus may have moved while this command waited for its turn.
                outcome = await run(core.store.get_focus(session) or session)
        else:
            outcome = await run(focus)
    except CommandError as exc:
        outcome = CommandOutcome(text=str(exc), ok=False)
    except Exception as exc:  # a fault in a command fails that command, not the session
        logger.exception("/%s failed", name)
        outcome = CommandOutcome(text=f"/{name} failed: {type(exc).__name__}: {exc}", ok=False)
    core.event(
        "CommandResulted",
        name=name,
        outcome="ok" if outcome.ok else "error",
        correlation_id=correlation_id,
    )
    return outcome
