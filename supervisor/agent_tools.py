"""The fan-out tools' rules (`fork`, `send`, `wait` called by a model): the same limits and
checks as the commands, with a CommandError saying why a call is refused. What a model writes
for another agent (a fork's prompt, mail) is stored masked, as its tool call is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from grove.actors.tools.todo import TodoError, apply_todo, from_data, to_data
from grove.providers.errors import ModelSpecError
from grove.providers.lifecycle import chosen_model
from grove.providers.plurals import counted
from grove.providers.secrets import mask
from grove.supervisor.errors import CommandError
from grove.supervisor.fan_in import wait_for
from grove.supervisor.forking import fork_child
from grove.supervisor.rules import checked_seconds
from grove.supervisor.store.records import AgentRecord

if TYPE_CHECKING:
    from grove.supervisor.core import SupervisorCore

DEFAULT_TOOL_WAIT_S = 300.0


async def tool_call(
    core: SupervisorCore,
    agent: str,
    tool: str,
    arguments: dict[str, Any],
    trace: str | None = None,
) -> str:
    """Run a fan-out tool for `agent` under the commands' rules; CommandError says why not.
    `trace`: the traceparent of the call's span (a forked child's turns go under it)."""
    caller = core.agent(agent)
    if tool == "fork":
        return await _fork(core, caller, arguments, trace)
    if tool == "send":
        target, message = arguments.get("uuid"), arguments.get("message")
        if not isinstance(target, str) or not isinstance(message, str):
            raise CommandError("send needs `uuid` and `message` strings")
        mail = await core.deliver_mail(caller.uuid, target, mask(message))
        return json.dumps({"sent": True, "message_id": mail.id})
    if tool == "wait":
        uuids = arguments.get("uuids")
        if uuids is None:
            uuids = [child.uuid for child in core.store.children(caller.uuid)]
        if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
            raise CommandError("wait needs `uuids` as a list of strings")
        timeout = checked_seconds(arguments.get("timeout", DEFAULT_TOOL_WAIT_S), "wait's `timeout`")
        resolved = [core.agent(uuid).uuid for uuid in uuids]
        waited = await wait_for(core, caller.uuid, resolved, timeout, own_turn=False)
        return json.dumps(waited)
    if tool == "todo":
        return _todo(core, caller, arguments)
    raise CommandError(f"unknown tool: {tool}")


def _todo(core: SupervisorCore, caller: AgentRecord, arguments: dict[str, Any]) -> str:
    """One todo call on the caller's own list, kept in its record (children start empty)."""
    try:
        outcome = apply_todo(from_data(caller.metadata.get("todo")), arguments)
    except TodoError as exc:
        raise CommandError(str(exc)) from exc
    core.store.update_agent(
        caller.uuid, metadata={**caller.metadata, "todo": to_data(outcome.phases)}
    )
    core.event("TodoUpdated", agent=caller.uuid, completed_tasks=list(outcome.completed))
    if outcome.is_error:
        raise CommandError(outcome.text)
    return outcome.text


async def _fork(
    core: SupervisorCore, parent: AgentRecord, arguments: dict[str, Any], trace: str | None
) -> str:
    prompt, model = arguments.get("prompt"), arguments.get("model")
    if not isinstance(prompt, str) or not prompt.strip():
        raise CommandError("fork needs a non-empty `prompt` string")
    if model is not None and not isinstance(model, str):
        raise CommandError("fork's `model` must be a MODEL[/THINKING] string")
    levels = depth(core, parent)
    if levels + 1 > core.limits.fork_depth:
        raise CommandError(
            f"fork refused: a child here would be {counted(levels + 1, 'level')} below its root; "
            f"the limit is {core.limits.fork_depth}"
        )
    children = len(core.store.children(parent.uuid))
    if children >= core.limits.children_per_agent:
        raise CommandError(
            f"fork refused: this agent already has {counted(children, 'child', 'children')}; the "
            "limit is "
            f"{core.limits.children_per_agent}"
        )
    try:
        spec = chosen_model(model) if model else None
    except ModelSpecError as exc:
        raise CommandError(str(exc)) from exc
    forked = await fork_child(
        core,
        parent,
        spec,
        prompt=mask(prompt),
        origin="tool",
        tools=arguments.get("tools"),
        workspace=arguments.get("workspace"),
        trace=trace,
    )
    made: dict[str, str] = {"uuid": forked.child.uuid}
    worktree = forked.child.metadata.get("worktree")
    if worktree is not None:
        made["branch"] = worktree["branch"]
    return json.dumps(made)


def depth(core: SupervisorCore, record: AgentRecord) -> int:
    """How many levels below its root an agent is."""
    levels = 0
    while record.parent_uuid is not None:
        parent = core.store.get_agent(record.parent_uuid)
        if parent is None:
            break
        record, levels = parent, levels + 1
    return levels
