"""The thin command line: with a Grove service up, `run`, `batch`, `agents`, `history`,
`events` and `usage` are answered by it over HTTP. Imports the standard library and httpx
only (no Ray, no pydantic-settings, no rich; a test checks), so a command starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from cli.printable import printable
from server.files import ServiceState, read_state, service_token

THIN_COMMANDS = frozenset({"run", "batch", "agents", "history", "events", "usage"})
BATCH_POLL_S = 0.5
TIMEOUT = httpx.Timeout(30.0, read=None)  # a turn streams for as long as it takes


class ServiceError(Exception):
    """The service refused a request; the text is its error."""


def run_thin(state: ServiceState, argv: list[str]) -> int:
    """Run one command against the service; its exit code."""
    parser = argparse.ArgumentParser(prog="grove")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run")
    run.add_argument("prompt")
    run.add_argument("--model", "-m")
    run.add_argument("--system")
    run.add_argument("--json", action="store_true")
    batch = commands.add_parser("batch")
    batch.add_argument("tasks", type=Path)
    batch.add_argument("--model", "-m")
    batch.add_argument("--concurrency", "-c", type=int, default=32)
    batch.add_argument("--output", "-o", type=Path)
    agents = commands.add_parser("agents")
    agents.add_argument("--all", action="store_true")
    agents.add_argument("--json", action="store_true")
    history = commands.add_parser("history")
    history.add_argument("agent")
    history.add_argument("--json", action="store_true")
    events = commands.add_parser("events")
    events.add_argument("--after", type=int, default=0)
    events.add_argument("--follow", "-f", action="store_true")
    usage = commands.add_parser("usage")
    usage.add_argument("--agent")
    usage.add_argument("--by", default="agent")
    usage.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    headers = {"authorization": f"Bearer {service_token()}"}
    with httpx.Client(base_url=state.url, headers=headers, timeout=TIMEOUT) as client:
        try:
            handler = HANDLERS[args.command]
            return handler(client, args)
        except ServiceError as exc:
            sys.stderr.write(printable(str(exc)) + "\n")
            return 1
        except httpx.HTTPError as exc:
            sys.stderr.write(f"The Grove service at {state.url} did not answer: {exc}\n")
            return 1


def answer(response: httpx.Response) -> Any:
    """The JSON of a successful answer; ServiceError with the service's text otherwise."""
    if response.status_code >= 400:
        raise ServiceError(error_text(response))
    return response.json()


def error_text(response: httpx.Response) -> str:
    """What the service said went wrong: its `error` (Grove's refusals) or `detail` (the
    API's own checks), else the body as it is. The body must have been read."""
    try:
        error = response.json()
    except ValueError:
        return response.text
    text = (error.get("error") or error.get("detail")) if isinstance(error, dict) else None
    if text is None:
        return response.text
    return text if isinstance(text, str) else json.dumps(text)


def sse_events(response: httpx.Response) -> Iterator[tuple[str, str]]:
    """`(event, data)` of a Server-Sent Events answer, as they arrive."""
    event, data = "message", list[str]()
    for line in response.iter_lines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield event, "\n".join(data)


def run_command(client: httpx.Client, args: argparse.Namespace) -> int:
    root = answer(client.post("/api/roots", json={"model": args.model, "system": args.system}))
    body = {"text": args.prompt, "stream": True}
    result: dict[str, Any] = {}
    with client.stream("POST", f"/api/agents/{root['uuid']}/prompts", json=body) as response:
        if response.status_code >= 400:
            response.read()
            answer(response)
        for event, data in sse_events(response):
            if event == "result":
                result = json.loads(data)
            elif event == "delta" and not args.json:
                delta = json.loads(data)
                if delta["kind"] == "text":
                    sys.stdout.write(printable(delta["text"]))
                    sys.stdout.flush()
                elif delta["kind"] == "notice":
                    sys.stderr.write(printable(delta["text"]) + "\n")
    if args.json:
        sys.stdout.write(json.dumps({**result, "agent": root["uuid"]}) + "\n")
    elif result.get("ok"):
        sys.stdout.write("\n")
    if not result.get("ok"):
        sys.stderr.write(printable(result.get("error") or "the turn did not finish") + "\n")
        return 1
    return 0


def batch_command(client: httpx.Client, args: argparse.Namespace) -> int:
    """The tasks the output does not hold as ok yet, run by the service; their records are
    appended to the output as `grove batch` appends them."""
    output: Path = args.output or args.tasks.with_name(
        args.tasks.name.removesuffix(".jsonl") + ".out.jsonl"
    )
    done = ok_ids(output)
    lines = [line for line in args.tasks.read_bytes().splitlines() if line.strip()]
    todo = [line for line in lines if task_id(line) not in done]
    if not todo:
        sys.stderr.write(f"Nothing to do: every task is ok in {output}\n")
        return 0
    params = {"concurrency": args.concurrency, **({"model": args.model} if args.model else {})}
    run = answer(client.post("/api/batches", params=params, content=b"\n".join(todo) + b"\n"))
    while run["finished"] is None:
        sys.stderr.write(f"batch: {run['done']}/{run['total']} done, {run['failed']} failed\n")
        time.sleep(BATCH_POLL_S)
        run = answer(client.get(f"/api/batches/{run['id']}"))
    records = client.get(f"/api/batches/{run['id']}/results").text
    with output.open("a") as file:
        file.write(records)
    sys.stderr.write(
        f"batch: {run['ok']} ok, {run['failed']} failed, {run['skipped']} skipped -> {output}\n"
    )
    if run["error"]:
        sys.stderr.write(f"{run['error']}\n")
    return 0 if run["ok"] == run["total"] else 1


def task_id(line: bytes) -> str | None:
    """A task line's id as `grove batch` compares ids (7 and "7" are one); None if unread."""
    try:
        return id_key(json.loads(line).get("id"))
    except (ValueError, AttributeError):
        return None


def id_key(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def ok_ids(output: Path) -> set[str]:
    """The ids whose last record in `output` is ok."""
    status: dict[str, object] = {}
    if output.exists():
        for line in output.read_bytes().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                status[id_key(record.get("id"))] = record.get("status")
    return {key for key, value in status.items() if value == "ok"}


def agents_command(client: httpx.Client, args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = answer(client.get("/api/agents"))["agents"]
    if not args.all:
        rows = [row for row in rows if row["status"] == "running"]
    if args.json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    known = {row["uuid"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row["parent_uuid"] if row["parent_uuid"] in known else None
        children.setdefault(parent, []).append(row)

    def walk(row: dict[str, Any], depth: int) -> None:
        model = "no model"
        if row["model"]:
            model = f"{row['provider']}/{row['model']}/{row['thinking_level'] or 'default'}"
        count = row["messages"]
        noun = "message" if count == 1 else "messages"
        sys.stdout.write(
            f"{'  ' * depth}{row['uuid']}  {row['role']}  {row['status']}  {model}  "
            f"{count} {noun}\n"
        )
        for child in children.get(row["uuid"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    if not rows:
        sys.stdout.write("No agents\n")
    return 0


def history_command(client: httpx.Client, args: argparse.Namespace) -> int:
    found = answer(client.get(f"/api/agents/{args.agent}/history"))
    if args.json:
        sys.stdout.write(json.dumps(found) + "\n")
        return 0
    sys.stdout.write(f"Agent {found['agent']}\n")
    for message in found["messages"]:
        origin = (
            "" if message["agent_uuid"] == found["agent"] else f"  from {message['agent_uuid']}"
        )
        content = f"\n{message['content']}" if message["content"] else ""
        sys.stdout.write(printable(f"[{message['id']}] {message['kind']}{origin}{content}\n\n"))
    return 0


def events_command(client: httpx.Client, args: argparse.Namespace) -> int:
    if not args.follow:
        for event in answer(client.get("/api/events", params={"after": args.after}))["events"]:
            sys.stdout.write(json.dumps(event) + "\n")
        return 0
    with client.stream("GET", "/api/events/stream", params={"after": args.after}) as response:
        for _, data in sse_events(response):
            sys.stdout.write(data + "\n")
            sys.stdout.flush()
    return 0


def usage_command(client: httpx.Client, args: argparse.Namespace) -> int:
    params = {"by": args.by, **({"agent": args.agent} if args.agent else {})}
    report = answer(client.get("/api/usage", params=params))
    if args.json:
        sys.stdout.write(json.dumps(report) + "\n")
        return 0
    fields = (
        "requests",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cache_hit_share",
        "cost_usd",
        "saved_usd",
        "seconds",
    )
    sys.stdout.write(f"{report['by']:<38} " + " ".join(f"{f:>13}" for f in fields) + "\n")
    for name, row in [*report["rows"].items(), ("total", report["total"])]:
        sys.stdout.write(f"{name:<38} " + " ".join(f"{row[f]:>13,}" for f in fields) + "\n")
    return 0


HANDLERS = {
    "run": run_command,
    "batch": batch_command,
    "agents": agents_command,
    "history": history_command,
    "events": events_command,
    "usage": usage_command,
}


def dashboard_url(state: ServiceState) -> str:
    return f"{state.url}/?token={service_token()}"


def healthy(state: ServiceState) -> bool:
    try:
        return httpx.get(f"{state.url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def show_status() -> int:
    """`grove status`: the service's address with its token, pid and agents; its exit code."""
    state = read_state()
    if state is None:
        sys.stderr.write("No Grove service is up; `grove up` starts one\n")
        return 1
    if not healthy(state):
        sys.stderr.write(
            f"Grove (pid {state.pid}) does not answer at {state.url}; `grove down` stops it\n"
        )
        return 1
    headers = {"authorization": f"Bearer {service_token()}"}
    answer = httpx.get(f"{state.url}/api/agents", headers=headers, timeout=10)
    count = len(answer.json().get("agents", [])) if answer.status_code == 200 else "?"
    uptime = time.time() - state.started
    sys.stdout.write(
        f"Grove is up (pid {state.pid}, {uptime:,.0f} s, {count} agents):\n{dashboard_url(state)}\n"
    )
    return 0
