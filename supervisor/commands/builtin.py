"""The bundled commands: /model, /fork, /agents, /kill, /send, /wait, /reap, /switch, /clear,
/help, /exit. Texts from spec/commands-model-fork.md are used word for word.
"""

from __future__ import annotations

import asyncio
import time

from grove.actors.tools.grant import MCP_PREFIX
from grove.actors.tools.todo import from_data, to_data, to_markdown
from grove.providers.catalog import PROVIDER_TITLES, model_info
from grove.providers.errors import ModelSpecError
from grove.providers.lifecycle import choose_model, standing
from grove.providers.plurals import counted
from grove.providers.thinking import describe_thinking
from grove.providers.tier_rules import replaced_text
from grove.supervisor.advisor_plan import AdvisorPlan
from grove.supervisor.agent_tiers import TIER_KEY, marked_tier, tier_of
from grove.supervisor.commands.parsing import parse_fork_args, split_words
from grove.supervisor.commands.registry import Command, CommandContext, CommandOutcome
from grove.supervisor.compaction import usage_of
from grove.supervisor.errors import CommandError
from grove.supervisor.fan_in import wait_for
from grove.supervisor.forking import fork_child
from grove.supervisor.rules import STREAMING_SWITCH_TEXT, checked_seconds
from grove.supervisor.store.records import AgentRecord
from grove.supervisor.tool_rules import grant_of
from grove.supervisor.turns import choice_of


def describe_model(record: AgentRecord) -> str:
    if record.model is None:
        return "no model"
    return f"{record.provider}/{record.model}/{record.thinking_level or 'default'}"


async def model_command(ctx: CommandContext, args: str) -> CommandOutcome:
    record = ctx.core.agent(ctx.focus)
    if not args:
        return CommandOutcome(text=f"Model: {describe_model(record)}")
    try:
        chosen = choose_model(args, ctx.aliases)
    except ModelSpecError as exc:
        raise CommandError(str(exc)) from exc
    spec = chosen.spec
    if ctx.core.streaming(record.uuid):
        raise CommandError(STREAMING_SWITCH_TEXT)
    info = model_info(spec.model)
    if record.metadata.get("tools") and not info.supports_tools:
        raise CommandError(f"{spec.model} cannot call tools, and this agent uses tools")
    needed = usage_of(ctx.core, record.uuid).used
    if needed > info.max_input_tokens:
        raise CommandError(
            f"{spec.model} holds {info.max_input_tokens:,} tokens of context; "
            f"this conversation needs about {needed:,}. Run /compact first"
        )
    updated = ctx.core.store.update_agent(
        record.uuid, provider=spec.provider, model=spec.model, thinking_level=spec.thinking
    )
    state = ctx.core.live(record.uuid)
    choice = choice_of(updated)  # its tier as its new provider serves it
    if state.active and choice is not None:
        await asyncio.wait_for(state.host.switch_model(record.uuid, choice), 30)
    ctx.core.event(
        "ModelSwitched",
        agent=record.uuid,
        provider=spec.provider,
        model=spec.model,
        thinking=spec.thinking,
        correlation_id=ctx.correlation_id,
    )
    text = (
        f"Switched to {PROVIDER_TITLES[spec.provider]} {spec.model}\n"
        f"  {describe_thinking(spec.model, spec.thinking)}"
    )
    for note in (
        chosen.warning,
        replaced_text(spec.provider, spec.model, record.metadata.get(TIER_KEY)),
    ):
        text += f"\n{note}" if note is not None else ""
    return CommandOutcome(text=text, data={"agent": updated.uuid, "model": str(spec)})


async def fork_command(ctx: CommandContext, args: str) -> CommandOutcome:
    parsed = parse_fork_args(args, ctx.aliases)
    parent = ctx.core.agent(ctx.focus)
    forked = await fork_child(
        ctx.core,
        parent,
        parsed.model,
        prompt=parsed.prompt,
        origin=ctx.origin,
        correlation_id=ctx.correlation_id,
    )
    child = forked.child
    data: dict[str, object] = {"child": child.uuid}
    if parsed.prompt is not None:
        ctx.core.store.set_focus(ctx.session, child.uuid)
        data["focus"] = child.uuid
    if forked.turn is not None:
        data["ticket"] = forked.turn.ticket.ticket_id
        data["host"] = forked.turn.host_id
    text = f"Forked child {child.uuid} ({describe_model(child)})"
    if parsed.warning is not None:
        text += f"\n{parsed.warning}"
    return CommandOutcome(text=text, data=data)


def tree_lines(ctx: CommandContext, root: AgentRecord, include_ended: bool) -> list[str]:
    shown: list[tuple[AgentRecord, int]] = []

    def walk(record: AgentRecord, depth: int) -> None:
        if record.status != "running" and not include_ended:
            return
        shown.append((record, depth))
        for child in ctx.core.store.children(record.uuid):
            walk(child, depth + 1)

    walk(root, 0)
    counts = ctx.core.store.message_counts([record.uuid for record, _ in shown])
    lines = []
    for record, depth in shown:
        turn = "streaming" if ctx.core.streaming(record.uuid) else "idle"
        marker = "*" if record.uuid == ctx.focus else " "
        context = f"  {usage_of(ctx.core, record.uuid).share:.0%} context" if record.model else ""
        tier = marked_tier(tier_of(record)) if record.model else None  # standard: unsaid
        model = describe_model(record) + (f" {tier}" if tier else "")
        lines.append(
            f"{marker} {'  ' * depth}{record.uuid}  {record.role}  {record.status}  "
            f"{model}  {turn}  {counted(counts[record.uuid], 'message')}{context}"
        )
    return lines


async def agents_command(ctx: CommandContext, args: str) -> CommandOutcome:
    root = ctx.core.agent(ctx.session)
    lines = tree_lines(ctx, root, include_ended="--all" in split_words(args))
    return CommandOutcome(text="\n".join(lines))


async def kill_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    confirmed = "--yes" in words
    targets = [w for w in words if w != "--yes"]
    record = ctx.core.agent(targets[0]) if targets else ctx.core.agent(ctx.focus)
    if record.parent_uuid is None:
        raise CommandError("The root agent cannot be killed")
    victims = [record, *ctx.core.descendants(record.uuid)]
    victims = [v for v in victims if v.status == "running"]
    if len(victims) > 1 and not confirmed and ctx.origin == "repl-interactive":
        return CommandOutcome(
            text=f"This kills {len(victims)} agents. Confirm with /kill {record.uuid} --yes",
            ok=False,
            data={"confirm": f"/kill {record.uuid} --yes", "count": len(victims)},
        )
    now = time.time()
    for victim in victims:
        state = ctx.core.live(victim.uuid)
        await asyncio.wait_for(state.host.drop(victim.uuid), 30)
        state.active = False
        ctx.core.store.update_agent(victim.uuid, status="dead", ended_at=now)
        ctx.core.event("AgentKilled", agent=victim.uuid, correlation_id=ctx.correlation_id)
    focus = ctx.focus
    if any(v.uuid == ctx.focus for v in victims):
        focus = record.parent_uuid
        ctx.core.store.set_focus(ctx.session, focus)
    names = ", ".join(v.uuid for v in victims)
    return CommandOutcome(text=f"Killed {len(victims)}: {names}", data={"focus": focus})


async def send_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    if len(words) != 2:
        raise CommandError('Usage: /send <uuid> "message"')
    target = ctx.core.agent(words[0])
    message = await ctx.core.deliver_mail(ctx.focus, target.uuid, words[1])
    return CommandOutcome(text=f"Sent to {target.uuid}", data={"message_id": message.id})


async def wait_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    if not words:
        raise CommandError("Usage: /wait TIMEOUT [uuid ...]")
    timeout = checked_seconds(words[0], "TIMEOUT")
    uuids = [ctx.core.agent(word).uuid for word in words[1:]]
    results = await wait_for(ctx.core, ctx.focus, uuids, timeout)
    lines = [f"{key}: {value['status']}: {value.get('text', '')}" for key, value in results.items()]
    return CommandOutcome(text="\n".join(lines) or "Nothing arrived", data={"results": results})


async def reap_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    scope = ctx.core.agent(words[0]) if words else ctx.core.agent(ctx.session)
    reaped = []
    for record in [scope, *ctx.core.descendants(scope.uuid)]:
        if record.status == "dead":
            ctx.core.store.update_agent(record.uuid, status="reaped")
            reaped.append(record.uuid)
    return CommandOutcome(text=f"Reaped {len(reaped)}", data={"reaped": reaped})


async def switch_command(ctx: CommandContext, args: str) -> CommandOutcome:
    words = split_words(args)
    if len(words) != 1:
        raise CommandError("Usage: /switch <uuid>")
    record = ctx.core.agent(words[0])
    if ctx.core.root_of(record).uuid != ctx.session:
        raise CommandError(f"Agent {record.uuid} is not in this session")
    if record.status != "running":
        raise CommandError(f"Agent {record.uuid} is {record.status}")
    ctx.core.store.set_focus(ctx.session, record.uuid)
    return CommandOutcome(text=f"Focus: {record.uuid}", data={"focus": record.uuid})


async def todo_command(ctx: CommandContext, args: str) -> CommandOutcome:
    """The focused agent's todo list as markdown (what its `todo` tool keeps)."""
    if args.strip():
        raise CommandError("Usage: /todo")
    record = ctx.core.agent(ctx.focus)
    phases = from_data(record.metadata.get("todo"))
    text = to_markdown(phases) if any(p.tasks for p in phases) else "The todo list is empty"
    return CommandOutcome(text=text, data={"phases": to_data(phases)})


async def mcp_command(ctx: CommandContext, args: str) -> CommandOutcome:
    """The MCP servers whose tools the focused agent has, and those tools."""
    record = ctx.core.agent(ctx.focus)
    granted = grant_of(record.metadata).mcp
    servers: dict[str, list[str]] = {}
    for spec in granted:
        server, _, tool = spec.name[len(MCP_PREFIX) :].partition("__")
        servers.setdefault(server, []).append(tool)
    if not servers:
        return CommandOutcome(text="This agent has no MCP tools", data={"servers": {}})
    lines = [f"{name}: {', '.join(tools)}" for name, tools in sorted(servers.items())]
    return CommandOutcome(text="\n".join(lines), data={"servers": servers})


async def clear_command(ctx: CommandContext, args: str) -> CommandOutcome:
    record = ctx.core.agent(ctx.focus)
    if ctx.core.streaming(record.uuid):
        raise CommandError("Cannot clear while response is streaming.")
    ctx.core.store.append_message(record.uuid, "clear", "")
    ctx.core.live(record.uuid).active = False
    if ctx.core.advisors is not None:
        await ctx.core.advisors.reset(record.uuid)
    ctx.core.event("ConversationCleared", agent=record.uuid, correlation_id=ctx.correlation_id)
    return CommandOutcome(text="Conversation cleared")


async def advisor_command(ctx: CommandContext, args: str) -> CommandOutcome:
    desk = ctx.core.advisors
    if desk is None:
        raise CommandError("This supervisor runs no advisors")
    record = ctx.core.agent(ctx.focus)
    words = split_words(args)
    action = words[0] if words else ("off" if desk.reviewers_of(record.uuid) else "on")
    if action == "on":
        started = await desk.attach_all(record.uuid)
        names = ", ".join(w.name for w in desk.reviewers_of(record.uuid))
        note = "" if started else " (already on)"
        return CommandOutcome(text=f"Advisor on{note}: {names}", data={"reviewers": names})
    if action == "off":
        names = ", ".join(await desk.detach(record.uuid)) or "none were on"
        return CommandOutcome(text=f"Advisor off: {names}")
    if action == "status":
        rows = [
            {
                "name": w.name,
                "model": str(w.model),
                **await asyncio.wait_for(w.host.reviewer_view(w.uuid, "status"), 30),
            }
            for w in desk.reviewers_of(record.uuid)
        ]
        return CommandOutcome(text=advisor_status_text(rows, desk.plan), data={"reviewers": rows})
    if action == "dump":
        what = "dump raw" if words[1:2] == ["raw"] else "dump"
        parts = [
            f"## {w.name}\n" + str(await asyncio.wait_for(w.host.reviewer_view(w.uuid, what), 30))
            for w in desk.reviewers_of(record.uuid)
        ]
        return CommandOutcome(text="\n\n".join(parts) or "No advisor watches this agent")
    raise CommandError("Usage: /advisor [on|off|status|dump [raw]]")


def advisor_status_text(reviewers: list[dict[str, object]], plan: AdvisorPlan) -> str:
    if not reviewers:
        state = "enabled" if plan.enabled else "off"
        return f"No advisor watches this agent (advisor.enabled: {state})"
    lines = []
    for r in reviewers:
        last = r.get("last_success")
        ago = "never" if not isinstance(last, float) else f"{time.time() - last:.0f}s ago"
        usage = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        lines += [
            f"{r['name']}  {r['model']}",
            f"  health: last success {ago}, consecutive failures "
            f"{r.get('consecutive_failures', 0)}, dropped backlogs {r.get('dropped_backlogs', 0)}",
            f"  backlog {r.get('backlog', 0)}, context {r.get('context_tokens', 0):,} of "
            f"{r.get('context_window', 0):,} tokens",
            f"  tokens: {usage.get('input_tokens', 0):,} in, {usage.get('output_tokens', 0):,} "
            f"out; cost ${float(str(r.get('cost_usd', 0.0))):.4f}",
        ]
        verdict = standing(str(r["model"]).partition("/")[0])
        if verdict is not None and verdict.notice is not None:
            lines.append(f"  {verdict.notice}")
    return "\n".join(lines)


async def help_command(ctx: CommandContext, args: str) -> CommandOutcome:
    lines = [f"  {c.usage:<40} {c.summary}" for c in ctx.commands.values()]
    return CommandOutcome(text="Commands:\n" + "\n".join(lines))


async def exit_command(ctx: CommandContext, args: str) -> CommandOutcome:
    return CommandOutcome(text="Bye", data={"exit": True})


BUNDLED: tuple[Command, ...] = (
    Command(
        name="model",
        handler=model_command,
        usage="/model MODEL[/THINKING]",
        summary="Switch the focused agent's model",
    ),
    Command(
        name="fork",
        handler=fork_command,
        usage='/fork [--model M/T] ["prompt"]',
        summary="Fork a child of the focused agent",
    ),
    Command(
        name="mcp",
        handler=mcp_command,
        usage="/mcp",
        summary="List the focused agent's MCP servers and their tools",
        mutates=False,
    ),
    Command(
        name="todo",
        handler=todo_command,
        usage="/todo",
        summary="Show the focused agent's todo list",
        mutates=False,
    ),
    Command(
        name="agents",
        handler=agents_command,
        usage="/agents [--all]",
        summary="Show the agent tree",
        mutates=False,
    ),
    Command(
        name="kill",
        handler=kill_command,
        usage="/kill [uuid]",
        summary="Kill an agent and its descendants",
    ),
    Command(
        name="send",
        handler=send_command,
        usage='/send <uuid> "message"',
        summary="Mail a running agent",
    ),
    Command(
        name="wait",
        handler=wait_command,
        usage="/wait TIMEOUT [uuid ...]",
        summary="Wait for mail, or for the named agents' results",
        mutates=False,
    ),
    Command(
        name="reap",
        handler=reap_command,
        usage="/reap [uuid]",
        summary="Remove dead agents from the tree",
    ),
    Command(
        name="switch",
        handler=switch_command,
        usage="/switch <uuid>",
        summary="Focus another agent of this session",
    ),
    Command(
        name="clear",
        handler=clear_command,
        usage="/clear",
        summary="Start the focused agent's conversation afresh",
    ),
    Command(
        name="advisor",
        handler=advisor_command,
        usage="/advisor [on|off|status|dump [raw]]",
        summary="Attach, detach or inspect the advisor reviewers",
    ),
    Command(name="help", handler=help_command, usage="/help", summary="This list", mutates=False),
    Command(name="exit", handler=exit_command, usage="/exit", summary="Leave", mutates=False),
)
