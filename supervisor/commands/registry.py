"""The command registry: bundled commands, then plugins from the `grove.commands` entry points.

The later layer wins a name; two commands with one name in one layer is a load error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from grove.supervisor.errors import CommandError, SupervisorError

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore

ENTRY_POINT_GROUP = "grove.commands"


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandOutcome:
    """What a command reports: text for the user and data for programs."""

    text: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, slots=True)
class CommandContext:
    core: SupervisorCore
    session: str  # the root agent's uuid
    focus: str  # the agent the command acts on
    origin: str  # repl, cli, batch, api, tool, ...
    correlation_id: str
    aliases: dict[str, str] = field(default_factory=dict)
    commands: Mapping[str, Command] = field(default_factory=dict)  # all there are, for /help


Handler = Callable[[CommandContext, str], Awaitable[CommandOutcome]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    name: str
    handler: Handler
    summary: str
    usage: str
    mutates: bool = True  # mutating commands hold the session's lease
    origin: str = "bundled"


class Registry:
    def __init__(self, layers: Iterable[Iterable[Command]]) -> None:
        self.commands: dict[str, Command] = {}
        for layer in layers:
            seen: set[str] = set()
            for command in layer:
                if command.name in seen:
                    raise SupervisorError(
                        f"two commands named /{command.name} in the {command.origin} layer"
                    )
                seen.add(command.name)
                self.commands[command.name] = command

    def get(self, name: str) -> Command:
        command = self.commands.get(name)
        if command is None:
            raise CommandError(f"Unknown command: /{name}. Type /help for the list.")
        return command

    def names(self) -> list[str]:
        return sorted(self.commands)


def plugin_commands() -> list[Command]:
    """Commands from installed packages: each entry point names a Command or a list of them."""
    found: list[Command] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        value = point.load()
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if not isinstance(item, Command):
                raise SupervisorError(f"entry point {point.name} is not a grove Command")
            found.append(item)
    return found
