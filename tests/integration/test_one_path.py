"""One command path, local or served: `grove run`, `batch`, `agents`, `history`, `events`,
`usage` and `models` print the same (uuids, times and paths aside) and exit the same with a
service up as with a Grove of their own, options and defaults included (tools, MCP servers,
budgets, a system prompt, a tool module from a local file, the flex and batch tiers); and
each ends quietly on a closed pipe.

Served, a command goes to the service's app on the module's Grove, recorded as `grove up`
records a service (test_service.py starts `grove up` itself); local, it runs in this process
on the module's Grove (the same command code and `Grove` class, Ray already started) through
a Grove of its own, or reads the service's store directly with `--store`, so both read the
same data.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grove.cli.app import app
from grove.server.client import RemoteGrove
from grove.server.remote_turn import RemoteTurn
from grove.supervisor import Grove
from tests.integration.groves import cli_environment, running_grove
from tests.integration.services import TIMEOUT_S, Service, service_in_process
from tests.mcp_servers import served_over_http

CALC = Path(__file__).resolve().parents[1] / "mcp_servers" / "calc.py"
MODEL = "claude-haiku-4-5"
GPT = "gpt-5-mini"
SONNET = "claude-sonnet-5-5"
SHORT_BATCH_WINDOW = {"GROVE_TIERS__BATCH_WINDOW_S": "0.2"}  # a batch-tier step waits little

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
CALL_ID = re.compile(r"\b(?:call|toolu)_[A-Za-z0-9]+\b")
TIMES = frozenset({"created_at", "seconds", "duration_s", "started", "finished"})
SHOPKIT = {
    "__init__.py": '"""A local package of tools."""\n',
    "money.py": 'def euros(cents: int) -> str:\n    return f"{cents / 100:.2f} EUR"\n',
    "tools.py": (
        "from shopkit.money import euros\n\n\n"
        "def price(item: str) -> str:\n"
        '    """The price of an item.\n\n    Args:\n        item: What to price.\n    """\n'
        '    return f"{item} costs {euros(350)}"\n'
    ),
}


FINDING = {
    "title": "Finding",
    "type": "object",
    "properties": {
        "severity": {"enum": ["low", "medium", "high"]},
        "file": {"type": "string"},
        "line": {"type": "integer"},
    },
    "required": ["severity", "file", "line"],
}
VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
# A typed batch: ok at once, ok after a retry, malformed throughout, a failed turn, a schema of
# its own, and a schema that is none (an error record for its line).
TYPED_TASKS = [
    {"id": "plain", "prompt": "Review part 1."},
    {"id": "retried", "prompt": "Review part 2. [[sim invalid_output=1]]"},
    {"id": "invalid", "prompt": "Review part 3. [[sim invalid_output=5]]"},
    {"id": "broken", "prompt": "[[sim fault=disconnect after=2]] Review part 4."},
    {"id": "own", "prompt": "Is it fine?", "schema": VERDICT},
    {"id": "unusable", "prompt": "Review part 5.", "schema": {"type": "array"}},
]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`[mcp.servers.calc]` as a setting: a copy of the tests' server of this module's own
    (test_mcp.py counts the processes of the copy it has of its own), over streamable HTTP,
    started once. Over stdio each command's Grove started a server to list its tools (an
    import of the MCP SDK each, seconds on a busy machine); test_mcp.py tests both ways."""
    server = tmp_path_factory.mktemp("mcp") / "calc.py"
    shutil.copy(CALC, server)
    with served_over_http(server) as url:
        yield {"GROVE_MCP__SERVERS": json.dumps({"calc": {"url": url}})}


@pytest.fixture(scope="module")
def grove(
    tmp_path_factory: pytest.TempPathFactory, store_url: str, mcp: dict[str, str]
) -> Iterator[Grove]:
    """The module's Grove (what a command without a service runs on here), with the server."""
    env = {**mcp, **SHORT_BATCH_WINDOW}
    with running_grove(tmp_path_factory.mktemp("grove"), store_url=store_url, env=env) as grove:
        yield grove


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, grove: Grove, mcp: dict[str, str]
) -> Iterator[Service]:
    """The service on the module's Grove: what a command with a service up goes to."""
    with service_in_process(grove, tmp_path_factory.mktemp("served"), env=mcp) as running:
        yield running


@pytest.fixture(scope="module")
def local_env(
    tmp_path_factory: pytest.TempPathFactory, store_url: str, mcp: dict[str, str]
) -> dict[str, str]:
    """The environment of a command with no service up, on the module's Grove and store. Its
    agents answer from the module's simulator; the key only lets the command's own checks
    (cli/preflight.py) pass, as a user's real key would."""
    env = cli_environment(tmp_path_factory.mktemp("local"))
    env.update(GROVE_STORE=store_url, **mcp, **SHORT_BATCH_WINDOW)
    env.update(ANTHROPIC_API_KEY="sk-ant-not-used", OPENAI_API_KEY="sk-not-used")
    return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the commands run: a local package of tools, a task file and a context file."""
    base = tmp_path_factory.mktemp("work")
    package = base / "shopkit"
    package.mkdir()
    for name, text in SHOPKIT.items():
        (package / name).write_text(text)
    tasks = [
        {"id": n, "prompt": f'[[sim reply="done {n}" tokens=3 tps=6]] task {n}'} for n in (1, 2)
    ]
    tasks.append({"id": "sys", "prompt": "[[sim reply=ok]] go", "system": "Be brief."})
    (base / "tasks.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    (base / "guide.md").write_text("Review with care.\n")
    (base / "finding.json").write_text(json.dumps(FINDING))
    (base / "typed.jsonl").write_text("".join(json.dumps(task) + "\n" for task in TYPED_TASKS))
    return base


def invoke(env: dict[str, str], *args: str) -> Outcome:
    """`grove ARGS` in this process (a service's, or the module's Grove, as `env` says)."""
    result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    return Outcome(result.exit_code, result.stdout, result.stderr)


def normalised(outcome: Outcome, paths: dict[str, str]) -> tuple[int, Any, Any]:
    """The outcome with uuids, tool call ids, times and the given paths made comparable."""
    names: dict[str, str] = {}

    def named(match: re.Match[str]) -> str:
        return names.setdefault(match.group(), f"<id{len(names)}>")

    def text(value: str) -> str:
        for path, name in paths.items():
            value = value.replace(path, name)
        value = CALL_ID.sub(named, UUID.sub(named, value))
        value = re.sub(r"\b\d+\.\ds\. Output", "<s>. Output", value)  # a batch's wall time
        return re.sub(r" +[\d.]+$", " <s>", value, flags=re.MULTILINE)  # usage's time column

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: 0 if key in TIMES else walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return text(value) if isinstance(value, str) else value

    def shown(output: str) -> Any:
        try:
            return [walk(json.loads(line)) for line in output.splitlines()]
        except ValueError:
            return text(output)

    return outcome.code, shown(outcome.stdout), shown(outcome.stderr)


ADD = '[[sim tool=mcp__calc__add args=\'{"a": 2, "b": 3}\' step=1]] add'
PRICE = '[[sim tool=price args=\'{"item": "tea"}\' step=1]] price?'
TODO = '[[sim tool=todo args=\'{"ops": [{"op": "view"}]}\' step=1]] plan'
BASH = '[[sim tool=bash args=\'{"command": "echo hi"}\' step=1]] say hi'


@pytest.fixture(scope="module")
def session(service: Service) -> str:
    """A served root with a tool call in its history (for history, events and usage)."""
    done = invoke(service.env, "run", "--model", MODEL, "--json", ADD)
    assert done.code == 0, done.stderr
    agent: str = json.loads(done.stdout)["agent"]
    return agent


# (name, arguments, exit code, what the output shows): each run both ways, then compared.
RUNS = [
    ("plain", ["run", "--model", MODEL, '[[sim reply="Hello both ways"]] hi'], 0, "Hello"),
    ("json", ["run", "--model", MODEL, "--json", '[[sim reply="J"]] hi'], 0, '"provider"'),
    ("system", ["run", "--model", MODEL, "--system", "Be brief.", "[[sim reply=ok]] hi"], 0, "ok"),
    ("todo", ["run", "--model", MODEL, TODO], 0, "← todo"),
    ("mcp", ["run", "--model", MODEL, ADD], 0, "← mcp__calc__add: 5"),
    ("local-tools", ["run", "-m", MODEL, "--tools", "shopkit.tools:price", PRICE], 0, "3.50 EUR"),
    ("allow", ["run", "-m", MODEL, "--tools", "bash", "--allow", "bash", BASH], 0, "exit code 0"),
    ("ask", ["run", "-m", MODEL, "--tools", "bash", BASH], 0, "needs approval"),
    ("budget", ["run", "-m", MODEL, "--budget-tokens", "100000", "[[sim reply=ok]] hi"], 0, "ok"),
    ("bad-budget", ["run", "-m", MODEL, "--budget-time", "soon", "hi"], 2, "--budget-time"),
    ("bad-model", ["run", "--model", "no-such-model", "hi"], 2, "Unknown model"),
    ("no-module", ["run", "-m", MODEL, "--tools", "nosuchmodule:fn", "hi"], 2, "nosuchmodule"),
    ("no-function", ["run", "-m", MODEL, "--tools", "shopkit.tools:nope", "hi"], 2, "nope"),
    ("failed-turn", ["run", "-m", MODEL, "[[sim fault=disconnect after=2]] hi"], 1, "stream"),
    ("batch", ["batch", "tasks.jsonl", "-m", MODEL, "-c", "1", "--context", "guide.md"], 0, "ok"),
    ("typed", ["run", "-m", MODEL, "--output-schema", "finding.json",
               "Review. [[sim invalid_output=1]]"], 0, '"severity"'),
    ("typed-json", ["run", "-m", MODEL, "--json", "--output-schema", "finding.json", "Review."], 0,
     '"output": {"severity"'),
    ("typed-invalid", ["run", "-m", MODEL, "--output-schema", "finding.json", "--output-retries",
                       "1", "Review. [[sim invalid_output=5]]"], 1, "invalid output after 1 retry"),
    ("typed-batch", ["batch", "typed.jsonl", "-m", MODEL, "--output-schema", "finding.json"], 1,
     "3 failed (1 malformed line, 1 invalid output)"),
    ("tier-flex", ["run", "-m", GPT, "--tier", "flex", "[[sim reply=ok]] hi"], 0, "ok"),
    # Runs on batch: said once a process for each model, which both ways share here (the
    # saying is test_tiers.py's, on other models: a worker may run both modules).
    ("tier-anthropic-flex", ["run", "-m", SONNET, "--tier", "flex", "[[sim reply=ok]] hi"], 0,
     "waiting on a provider batch"),
    ("tier-batch", ["batch", "tasks.jsonl", "-m", GPT, "--tier", "batch"], 0, "ok"),
    ("bad-tier", ["run", "-m", MODEL, "--tier", "cheap", "hi"], 2, "unknown tier 'cheap'"),
]  # fmt: skip
# Reads of the service's store: served, and with --store (which reads it directly).
READS = [
    ("agents", ["agents"], 0, "root"),
    ("agents-json", ["agents", "--all", "--json"], 0, '"uuid"'),
    ("history", ["history", "{agent}"], 0, "mcp__calc__add"),
    ("history-json", ["history", "{agent}", "--json"], 0, '"messages"'),
    ("history-unknown", ["history", "zzzz"], 1, "Unknown agent"),
    ("events", ["events"], 0, "TurnCompleted"),
    ("events-after", ["events", "--after", "3"], 0, '"id"'),
    ("usage", ["usage"], 0, "total"),
    ("usage-json", ["usage", "--by", "model", "--json"], 0, '"rows"'),
    ("usage-agent", ["usage", "--agent", "{agent}"], 0, "tree"),
    ("usage-by-week", ["usage", "--by", "week"], 2, "'week' is not one of"),
    ("usage-by-tier", ["usage", "--by", "tier"], 0, "tier $"),
    ("models", ["models"], 0, "claude-sonnet-5-5 *"),
    ("models-json", ["models", "--all", "--provider", "anthropic", "--json"], 0,
     '"id": "claude-sonnet-4-5", "provider": "anthropic", "default": false, "status": "retired", '
     '"retires": "2026-11-30", "successor": "claude-sonnet-5-5"'),
    ("models-provider", ["models", "--provider", "mistral"], 2, "'mistral' is not one of"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "code", "shows"), RUNS, ids=[case[0] for case in RUNS])
def test_a_command_runs_the_same_with_a_service_and_without(
    name: str,
    args: list[str],
    code: int,
    shows: str,
    service: Service,
    grove: Grove,
    local_env: dict[str, str],
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(workdir)  # where the tool package, tasks and context are
    outputs = {}
    for way, env in (("served", service.env), ("local", local_env)):
        output = workdir / f"{name}-{way}.out.jsonl"
        outcome = invoke(env, *(str(workdir / a) if a.endswith(".jsonl") else a for a in args),
                         *(["--output", str(output)] if args[0] == "batch" else []))  # fmt: skip
        outputs[way] = outcome
        assert outcome.code == code, (way, outcome)
        assert shows in outcome.stdout + outcome.stderr, (way, outcome)
        if args[0] == "batch":
            records = sorted(output.read_text().splitlines())
            outputs[f"{way} records"] = Outcome(0, "\n".join(records), "")
    for kind in ("", " records") if args[0] == "batch" else ("",):
        served, local = outputs[f"served{kind}"], outputs[f"local{kind}"]
        paths = {str(workdir / f"{name}-{way}.out.jsonl"): "<out>" for way in ("served", "local")}
        assert normalised(served, paths) == normalised(local, paths)


def test_a_typed_batch_rerun_runs_again_only_what_was_not_ok(
    service: Service,
    grove: Grove,
    local_env: dict[str, str],
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both ways: the first run records each typed answer (the retries' usage counted in its
    usage), the rerun runs just the invalid_output and the error, never an ok; `grove history`
    shows the typed answer as JSON."""
    monkeypatch.chdir(workdir)
    for way, env in (("served", service.env), ("local", local_env)):
        output = workdir / f"typed-rerun-{way}.out.jsonl"
        args = ["batch", str(workdir / "typed.jsonl"), "-m", MODEL, "--output-schema",
                "finding.json", "--output", str(output)]  # fmt: skip
        first = invoke(env, *args)
        assert first.code == 1, (way, first)
        records = {r["id"]: r for r in map(json.loads, output.read_text().splitlines())}
        assert records["plain"]["status"] == records["own"]["status"] == "ok"
        assert records["own"]["output"] in ({"ok": True}, {"ok": False})
        retried = records["retried"]
        assert retried["status"] == "ok" and retried["output"]["severity"] in (
            "low",
            "medium",
            "high",
        )
        assert retried["output_retries"] == 1 and retried["retry_usage"]["input_tokens"] > 0
        assert retried["usage"]["input_tokens"] > retried["retry_usage"]["input_tokens"]
        invalid = records["invalid"]
        assert (invalid["status"], invalid["output"], invalid["output_retries"]) == (
            "invalid_output", None, 2,
        )  # fmt: skip
        assert invalid["text"] and invalid["error"].startswith("The answer does not match")
        assert records["broken"]["status"] == "error" and records["broken"]["output"] is None
        assert records[None]["line"] == 6 and "'schema'" in records[None]["error"]
        again = invoke(env, *args)
        assert again.code == 1, (way, again)
        assert "batch: 2 tasks to run, 3 skipped (already ok), 1 malformed line;" in again.stderr
        rerun = [json.loads(line) for line in output.read_text().splitlines()[len(records) :]]
        assert sorted(record["id"] for record in rerun) == ["broken", "invalid"], way
        history = ["history", records["retried"]["agent"]]
        shown = invoke(env, *history)
        assert shown.code == 0 and "(typed, after 1 output retries)" in shown.stdout, shown
        assert json.dumps(retried["output"], indent=2) in shown.stdout
        assert "output_retry" in shown.stdout  # what went back to the model, in its history


@pytest.mark.parametrize(("name", "args", "code", "shows"), READS, ids=[case[0] for case in READS])
def test_a_read_shows_the_same_through_the_service_as_from_the_store(
    name: str, args: list[str], code: int, shows: str, service: Service, session: str
) -> None:
    given = [arg.replace("{agent}", session) for arg in args]
    served = invoke(service.env, *given)
    local = invoke(service.env, "--store", service.env["GROVE_STORE"], *given)
    assert served.code == code, served
    assert shows in served.stdout + served.stderr, served
    assert (served.code, served.stdout, served.stderr) == (local.code, local.stdout, local.stderr)


def closed_pipe(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`grove ARGS` with its stdout a pipe nobody reads any more (`| head -0`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "grove.cli.entry", *args], stdout=write, stderr=subprocess.PIPE,
            text=True, env=env, cwd=cwd, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    finally:
        os.close(write)


PIPED = [
    ["run", "--model", MODEL, '[[sim reply="to nobody"]] hi'],
    ["run", "--model", MODEL, "--json", "[[sim reply=x]] hi"],
    ["batch", "tasks.jsonl", "--model", MODEL, "--output", "piped.out.jsonl"],
    ["agents"],
    ["events"],
    ["events", "--follow"],  # ends only because nobody reads
    ["history", "{agent}"],
    ["usage"],
]


@pytest.mark.parametrize(
    "args", PIPED, ids=[args[0] + "-" + str(n) for n, args in enumerate(PIPED)]
)
def test_a_closed_pipe_ends_a_command_quietly(
    args: list[str], service: Service, session: str, workdir: Path
) -> None:
    given = [arg.replace("{agent}", session) for arg in args]
    ways = [("served", service.env, given)]
    if args[0] not in ("run", "batch"):  # a read needs no Ray: straight from the store too
        ways.append(("local", service.env, ["--store", service.env["GROVE_STORE"], *given]))
    for way, env, argv in ways:
        done = closed_pipe(env, workdir, *argv)
        assert done.returncode == 141, (way, done.stderr)
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, way
        assert "BrokenPipe" not in done.stderr, way


def test_a_closed_pipe_ends_a_run_of_its_own_quietly(
    grove: Grove, local_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`grove run` on a Grove of its own (the module's, in this process) into a closed pipe."""
    read, write = os.pipe()
    os.close(read)
    stdout, stderr = os.fdopen(write, "w"), io.StringIO()
    for name, value in local_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "stdout", stdout)
    with redirect_stderr(stderr), pytest.raises(SystemExit) as ended:
        app(["run", "--model", MODEL, '[[sim reply="to nobody"]] hi'], prog_name="grove")
    stdout.close()
    assert ended.value.code == 141
    assert "Traceback" not in stderr.getvalue() and "BrokenPipe" not in stderr.getvalue()


def test_following_the_event_log_ends_when_its_reader_goes(service: Service, session: str) -> None:
    """`grove events --follow | head -1` with nothing new to say: the command notices the
    reader has gone while it waits, instead of waiting for the next event."""
    local = ["--store", service.env["GROVE_STORE"], "events", "--follow"]
    following = subprocess.Popen(
        [sys.executable, "-m", "grove.cli.entry", *local], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=service.env,
    )  # fmt: skip
    assert following.stdout is not None and following.stderr is not None
    assert json.loads(following.stdout.readline())["id"] == 1
    following.stdout.close()  # the reader goes, as `head -1` does
    assert following.wait(TIMEOUT_S) == 141
    assert following.stderr.read() == ""


def test_a_turn_still_going_times_out_the_same_with_a_service_and_without(
    grove: Grove, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`result(timeout_s)` of a turn that has not ended by then raises TimeoutError with the
    same text on a local Grove and on a RemoteGrove (as `/fork` in a chat streams it), which
    read the service's "no result yet" as an interrupted turn."""
    monkeypatch.setenv("XDG_CONFIG_HOME", service.env["XDG_CONFIG_HOME"])
    said = []
    with RemoteGrove.running() as remote:
        for via in (grove, remote):
            root = via.create_root(MODEL).uuid
            turn = via.command_turn(via.dispatch(root, '/fork "[[sim tokens=60 tps=2]] go on"'))
            assert turn is not None
            with pytest.raises(TimeoutError) as timed_out:
                turn.result(0.2)
            said.append(str(timed_out.value).replace(turn.agent, "AGENT"))
            assert via.cancel(turn.agent)
    assert said == ["The turn of agent AGENT did not end within 0.2 s"] * 2


def test_a_prompt_whose_turn_is_slow_times_out_the_same_with_a_service_and_without(
    grove: Grove, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`send(...).result(timeout_s)` and `ask(..., timeout_s)` raise TimeoutError with the same
    text on a local Grove and on a RemoteGrove once `timeout_s` has passed, the turn left
    going; a RemoteGrove read the whole stream of the turn first, with no deadline."""
    monkeypatch.setenv("XDG_CONFIG_HOME", service.env["XDG_CONFIG_HOME"])
    said = []
    with RemoteGrove.running() as remote:
        for via in (grove, remote):
            root = via.create_root(MODEL).uuid
            for asking in (False, True):
                with pytest.raises(TimeoutError) as timed_out:
                    if asking:
                        via.ask(root, "[[sim tokens=60 tps=2]] go on", 0.3)
                    else:
                        via.send(root, "[[sim tokens=60 tps=2]] go on").result(0.3)
                said.append(str(timed_out.value).replace(root, "AGENT"))
                assert via.cancel(root)  # the wait ended while the turn still went on
                ended = via.wait_turn(root, TIMEOUT_S)
                assert ended is not None and ended.cancelled
    assert said == ["The turn of agent AGENT did not end within 0.3 s"] * 4


def test_a_wait_with_no_turn_ended_here_answers_the_stored_one_with_a_service_and_without(
    grove: Grove, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent whose last answer was stored before this Grove held it (seeded here, as after
    a restart): a wait for its turn answers that answer at once, locally and through a
    service (a RemoteTurn too); it answered None, the RemoteTurn a timeout."""
    monkeypatch.setenv("XDG_CONFIG_HOME", service.env["XDG_CONFIG_HOME"])
    with RemoteGrove.running() as remote:
        for via in (grove, remote):
            root = via.create_root(MODEL).uuid
            via.seed(root, [("user", "Which way?"), ("assistant", "The other way.")])
            waited = via.wait_turn(root, 0.3)
            assert waited is not None and waited.text == "The other way."
        assert RemoteTurn(remote, root).result(0.3).text == "The other way."


def test_the_services_routes_refuse_a_retired_model_or_a_typo_as_the_command_line_does(
    service: Service, session: str
) -> None:
    """What a client of the HTTP API sends goes through the command line's model checks: one
    line naming the successor, or the did-you-mean; nothing is made."""
    retired = "claude-sonnet-4-5 was retired on 2026-11-30; use claude-sonnet-5-5"
    with service.api() as api:
        before = len(api.get("/api/agents").json()["agents"])
        for path, body, error in (
            ("/api/roots", {"model": "claude-sonnet-4-5/low"}, retired),
            (f"/api/agents/{session}/fork", {"prompts": ["a"], "model": "claude-sonnet-4-5"},
             retired),
            ("/api/roots", {"model": "claude-sonet-5-5"},
             "Unknown model: claude-sonet-5-5. Did you mean claude-sonnet-5-5? (To send "
             "claude-sonet-5-5 as written, name it anthropic:claude-sonet-5-5.)"),
        ):  # fmt: skip
            answer = api.post(path, json=body)
            assert (answer.status_code, answer.json()) == (400, {"error": error}), path
        assert len(api.get("/api/agents").json()["agents"]) == before
