"""Grove as a service, as a user runs it: `grove up` in the background on the simulator,
`grove status`, the command line through it (over HTTP, without importing Ray or pydantic), the
HTTP API with its token on every route, batches, the event stream resumed with Last-Event-ID,
bad input, a stale record, and `grove down` stopping it all."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from grove.supervisor.rules import STREAMING_SWITCH_TEXT
from tests.conformance.corpus import REPO_ROOT
from tests.conftest import required_binary
from tests.integration.groves import cli_environment, invoke, running_grove
from tests.integration.services import ONE_HOST, Service, grove_service

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

TIMEOUT_S = 180
NO_RAY_PROBE = """
import atexit, sys
def said():
    for name in ("ray", "pydantic"):
        if name in sys.modules:
            sys.stderr.write(f"{name} imported\\n")
atexit.register(said)
sys.argv = ["grove", *sys.argv[1:]]
from grove.cli.entry import main
main()
"""


@pytest.fixture(scope="module")
def rivals() -> list[tuple[int, str]]:
    """The exit code and stderr of each of the two `grove up`s the module's service began with."""
    return []


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, rivals: list[tuple[int, str]]
) -> Iterator[Service]:
    """The module's service: the one of two `grove up`s started at once that came up."""
    base = tmp_path_factory.mktemp("service")
    with grove_service(base, env=ONE_HOST, rivals=rivals) as running:
        yield running


def test_up_records_the_service_and_a_second_up_says_one_is_running(service: Service) -> None:
    token_file = service.config / "service-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == service.token
    status = invoke(service.env, "status")
    assert status.returncode == 0 and f"{service.url}/?token={service.token}" in status.stdout
    again = service.grove("up", "--simulate")
    assert again.returncode == 1
    assert again.stderr.startswith(f"Grove is already up at {service.url} (pid ")


def test_the_command_line_runs_over_http_without_ray_or_pydantic(service: Service) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_RAY_PROBE,
            "run",
            "--model",
            "gpt-6.1-terra",
            "--json",
            '[[sim reply="Hello from the service"]] hi',
        ],
        capture_output=True,
        text=True,
        env=service.env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "ray imported" not in run.stderr and "pydantic imported" not in run.stderr
    result = json.loads(run.stdout)
    assert result["stop_reason"] is not None and result["text"] == "Hello from the service"
    agents = invoke(service.env, "agents", "--json")
    assert result["agent"] in {row["uuid"] for row in json.loads(agents.stdout)}
    history = invoke(service.env, "history", result["agent"], "--json")
    kinds = [m["kind"] for m in json.loads(history.stdout)["messages"]]
    assert kinds == ["user", "assistant"]
    usage = json.loads(invoke(service.env, "usage", "--agent", result["agent"], "--json").stdout)
    assert usage["total"]["requests"] == 1
    # Without the service (an explicit --store reads it directly), the same JSON.
    direct = ("--store", service.env["GROVE_STORE"])
    assert json.loads(invoke(service.env, *direct, "agents", "--json").stdout) == json.loads(
        agents.stdout
    )
    direct_history = invoke(service.env, *direct, "history", result["agent"], "--json")
    assert json.loads(direct_history.stdout) == json.loads(history.stdout)
    missing = invoke(service.env, "history", "no-such-agent")
    assert missing.returncode == 1 and missing.stderr.startswith("Unknown agent")


def test_chat_keeps_its_session_in_the_service(service: Service) -> None:
    script = '[[sim reply="Hello from chat"]] hi\n/fork "[[sim tokens=3]] go"\n/agents\n'
    chat = subprocess.run(
        [sys.executable, "-c", NO_RAY_PROBE, "chat", "--model", "claude-haiku-4-5"],
        input=script,
        capture_output=True,
        text=True,
        env=service.env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert chat.returncode == 0, chat.stderr
    assert "ray imported" not in chat.stderr and "pydantic imported" not in chat.stderr
    session = chat.stdout.splitlines()[0].removeprefix("Agent ")
    assert "Hello from chat" in chat.stdout
    rows = json.loads(invoke(service.env, "agents", "--json").stdout)
    children = [row for row in rows if row["parent_uuid"] == session]
    assert len(children) == 1  # the fork happened in the service's tree
    history = json.loads(invoke(service.env, "history", children[0]["uuid"], "--json").stdout)
    assert [m["kind"] for m in history["messages"]][-2:] == ["user", "assistant"]


def test_every_route_but_healthz_needs_the_token(service: Service) -> None:
    with service.api() as api:
        paths = api.get("/openapi.json").json()["paths"]
    assert len(paths) >= 12
    with httpx.Client(base_url=service.url, timeout=30) as anonymous:
        assert anonymous.get("/healthz").status_code == 200
        for path, methods in paths.items():
            concrete = path.replace("{agent}", "x").replace("{batch}", "x")
            for method in methods:
                if path == "/healthz":
                    continue
                answer = anonymous.request(method.upper(), concrete)
                assert answer.status_code == 401, (method, path, answer.status_code)
                wrong = anonymous.request(
                    method.upper(), concrete, headers={"authorization": "Bearer wrong"}
                )
                assert wrong.status_code == 401
        assert anonymous.get("/").status_code == 401
        assert anonymous.get("/docs").status_code == 401
        assert anonymous.get("/", params={"token": service.token}).status_code == 200


def test_bad_input_gets_a_status_that_says_what_happened(service: Service) -> None:
    with service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        broken = api.post(
            f"/api/agents/{root}/prompts",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert broken.status_code == 422
        assert api.post("/api/agents/nobody/prompts", json={"text": "hi"}).status_code == 404
        assert api.post("/api/roots", json={"model": "no-such-model"}).status_code == 400
        bad = api.post("/api/batches", content=b'{"id": 1, "prompt": "ok"}\nnot json\n')
        assert bad.status_code == 400
        assert bad.json()["detail"]["lines"][0].startswith("line 2: ")
        assert api.get("/api/batches/nope").status_code == 404
        assert api.get("/healthz").status_code == 200  # it keeps serving


def test_a_batch_submitted_over_http_runs_to_its_end(service: Service) -> None:
    lines = "".join(
        json.dumps({"id": n, "prompt": f"[[sim tokens=3]] task {n}"}) + "\n" for n in range(20)
    )
    with service.api() as api:
        submitted = api.post(
            "/api/batches",
            params={"model": "claude-haiku-4-5", "concurrency": 5},
            content=lines.encode(),
        )
        assert submitted.status_code == 202, submitted.text
        batch = submitted.json()["id"]
        deadline = time.monotonic() + 120
        while (progress := api.get(f"/api/batches/{batch}").json())["finished"] is None:
            assert time.monotonic() < deadline, progress
            time.sleep(0.2)
        assert progress["ok"] == 20 and progress["error"] is None
        results = api.get(f"/api/batches/{batch}/results").text.splitlines()
    assert sorted(json.loads(line)["id"] for line in results) == list(range(20))


def test_grove_batch_runs_through_the_service_and_a_rerun_has_nothing_to_do(
    service: Service, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": n, "prompt": f"[[sim tokens=3]] t{n}"}) + "\n" for n in range(10))
    )
    first = invoke(service.env, "batch", str(tasks), "--model", "claude-haiku-4-5", "-c", "4")
    assert first.returncode == 0, first.stderr
    records = [json.loads(line) for line in (tmp_path / "tasks.out.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == list(range(10))
    assert all(r["status"] == "ok" for r in records)
    again = invoke(service.env, "batch", str(tasks), "--model", "claude-haiku-4-5")
    assert again.returncode == 0  # nothing to do, as without a service:
    assert again.stderr.startswith("batch: 0 tasks to run, 10 skipped (already ok)")


def test_the_event_stream_resumes_after_last_event_id(service: Service) -> None:
    with service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        assert api.post(f"/api/agents/{root}/prompts", json={"text": "hello"}).json()["ok"]
        known = api.get("/api/events", params={"limit": 10_000}).json()["events"]
        resume_after = known[-3]["id"]
        seen: list[int] = []
        headers = {"last-event-id": str(resume_after)}
        with api.stream("GET", "/api/events/stream", headers=headers) as stream:
            for line in stream.iter_lines():
                if line.startswith("id:"):
                    seen.append(int(line[3:]))
                if len(seen) == 2:
                    break  # the client goes away mid-stream
        assert seen == [known[-2]["id"], known[-1]["id"]]
        assert api.get("/healthz").status_code == 200


def tree_events(
    api: httpx.Client, headers: dict[str, str]
) -> Generator[tuple[str, Any], None, None]:
    """The tree stream's events as (id, answer), until the caller stops reading."""
    with api.stream("GET", "/api/tree/stream", headers=headers) as stream:
        cursor = ""
        for line in stream.iter_lines():
            if line.startswith("id:"):
                cursor = line[3:].strip()
            elif line.startswith("data:"):
                yield cursor, json.loads(line[5:])


def test_the_tree_stream_shows_forked_turns_and_resumes_after_last_event_id(
    service: Service,
) -> None:
    with service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        answers = tree_events(api, {})
        cursor, first = next(answers)
        assert first["complete"] and root in {row["uuid"] for row in first["agents"]}
        slow = [f"[[sim tokens=12 tps=8]] task {n}" for n in range(3)]
        children = api.post(f"/api/agents/{root}/fork", json={"prompts": slow}).json()["children"]
        turns: dict[str, list[str]] = {child: [] for child in children}
        for latest, answer in answers:
            cursor = latest
            assert not answer["complete"]
            for row in answer["agents"]:
                if row["uuid"] in turns and turns[row["uuid"]][-1:] != [row["turn"]]:
                    turns[row["uuid"]].append(row["turn"])
            if all(seen[-1:] == ["idle"] for seen in turns.values()):
                break
        answers.close()  # the client goes away mid-stream
        assert turns == {child: ["streaming", "idle"] for child in children}
        assert answer["trees"][root]["requests"] == 3

        api.post(f"/api/agents/{root}/prompts", json={"text": "hello"})
        resumed = tree_events(api, {"last-event-id": cursor})
        _, since = next(resumed)
        resumed.close()
        assert not since["complete"] and [row["uuid"] for row in since["agents"]] == [root]
        assert api.get("/healthz").status_code == 200


def test_a_record_left_by_a_service_that_died_is_cleaned_up(tmp_path: Path) -> None:
    env = cli_environment(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    record = tmp_path / "config" / "grove" / "service.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"pid": gone.pid, "host": "127.0.0.1", "port": 1, "started": 0}))
    status = subprocess.run(
        [sys.executable, "-m", "grove.cli.entry", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert status.returncode == 1
    assert status.stderr.startswith("No Grove service is up")
    assert not record.exists()


def test_up_on_a_port_in_use_says_so(service: Service, tmp_path: Path) -> None:
    port = service.url.rsplit(":", 1)[1]
    env = cli_environment(tmp_path)  # a config directory of its own: no service recorded
    taken = subprocess.run(
        [sys.executable, "-m", "grove.cli.entry", "up", "--simulate", "--port", port],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert taken.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr


def chromium_path() -> str:
    """Debian's chromium (Playwright cannot download its own browsers here)."""
    return required_binary("chromium")


@pytest.fixture(scope="module")
def browser(service: Service) -> Iterator[Browser]:
    """Headless Chromium for the dashboard's tests (one for the module: it starts slowly)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def dashboard(browser: Browser, service: Service) -> Iterator[Page]:
    """The dashboard in a page of its own, once it follows the tree."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{service.url}/?token={service.token}")
        page.wait_for_selector("#connection:has-text('live')")
        yield page
    finally:
        page.close()


def test_the_dashboard_shows_a_batch_rising_and_a_trees_caching(
    browser: Browser, service: Service
) -> None:
    tasks = 16  # four waves of a second each: the dashboard shows it rise between them
    with dashboard(browser, service) as page, service.api() as api:
        lines = "".join(
            json.dumps({"id": n, "prompt": f"[[sim tokens=20 tps=20]] task {n}"}) + "\n"
            for n in range(tasks)
        )
        submitted = api.post(
            "/api/batches",
            params={"model": "claude-haiku-4-5", "concurrency": 4},
            content=lines.encode(),
        ).json()
        cell = page.locator(f"tr[data-batch='{submitted['id']}'] td.completed")
        seen: list[int] = []
        deadline = time.monotonic() + 120
        while not seen or seen[-1] < tasks:
            assert time.monotonic() < deadline, seen
            if cell.count():
                done = int(cell.inner_text().split(" / ")[0])
                if not seen or done != seen[-1]:
                    seen.append(done)
            time.sleep(0.1)
        assert len(seen) >= 3 and seen == sorted(seen), seen  # it rose while we watched

        # A tree whose second turn reads the first's prompt from the provider's cache.
        cached = api.post("/api/roots", json={"model": "claude-sonnet-5-5"}).json()["uuid"]
        long_prompt = "[[sim tokens=3]] " + " ".join(f"note-{n}" for n in range(2_000))
        for text in (long_prompt, "[[sim tokens=3]] and again"):
            api.post(f"/api/agents/{cached}/prompts", json={"text": text})
        cache_cell = page.locator(f"tr[data-uuid='{cached}'] td.cache")
        cache_cell.filter(has_text="saved").wait_for(timeout=30_000)
        assert "%" in cache_cell.inner_text()


def test_the_dashboard_streams_a_reply_in_and_then_shows_it_once(
    browser: Browser, service: Service, tmp_path: Path
) -> None:
    reply = "Streaming into the dashboard word by word"
    with dashboard(browser, service) as page, service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        page.click(f"tr[data-uuid='{root}']")
        page.wait_for_selector(f"#transcript-title:has-text('{root}')")
        slow = {"text": f'[[sim reply="{reply}" tps=4]] go'}
        with ThreadPoolExecutor(1) as pool:
            turn = pool.submit(api.post, f"/api/agents/{root}/prompts", json=slow)
            page.wait_for_function(
                "document.getElementById('live').textContent.length > 0", timeout=30_000
            )
            partial = page.inner_text("#live")
            assert reply.startswith(partial.strip())
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
            assert turn.result(timeout=60).json()["ok"]
        page.wait_for_selector(f"#transcript .message.assistant:has-text('{reply}')")
        # The turn is over: the stored reply stays, the live copy goes.
        page.wait_for_function("document.getElementById('live').hidden", timeout=30_000)
        shown = page.locator("#transcript-section .message.assistant:visible", has_text=reply)
        assert shown.count() == 1
        assert page.inner_text("#live") == ""
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


def test_the_dashboard_keeps_a_row_as_it_changes_so_a_click_lands(
    browser: Browser, service: Service
) -> None:
    # A row made anew between a click's mouse down and mouse up swallows the click.
    with dashboard(browser, service) as page, service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        row = page.wait_for_selector(f"tr[data-uuid='{root}']")
        assert row is not None
        tokens = row.query_selector("td:nth-child(7)")
        assert tokens is not None and tokens.inner_text() == "0"
        api.post(f"/api/agents/{root}/prompts", json={"text": "[[sim tokens=30]] count"})
        page.wait_for_function(
            "cell => cell.isConnected && cell.textContent !== '0'", arg=tokens, timeout=30_000
        )
        assert row.evaluate("row => row.isConnected")
        row.click()
        page.wait_for_selector(f"#transcript-title:has-text('{root}')")
        assert page.locator("tr.agent.selected").count() == 1


def test_the_dashboard_lists_the_newest_trees_first(browser: Browser, service: Service) -> None:
    with service.api() as api:
        older = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        api.post(f"/api/agents/{older}/fork", json={"prompts": ["[[sim tokens=3]] a child"]})
        newer = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
    with dashboard(browser, service) as page:
        for uuid in (older, newer):
            page.wait_for_selector(f"tr[data-uuid='{uuid}']")
        order = page.eval_on_selector_all("tr.agent", "rows => rows.map(row => row.dataset.uuid)")
        # The newest tree on top; an older one below, its child right under it.
        assert order[0] == newer
        assert order.index(older) > order.index(newer)
        child = order[order.index(older) + 1]
        assert page.locator(f"tr[data-uuid='{child}'] td").nth(1).inner_text() == "child"


def test_the_dashboard_names_batches_by_root_and_size_and_links_the_root(
    browser: Browser, service: Service
) -> None:
    tasks = [json.dumps({"id": n, "prompt": f"[[sim tokens=3]] small {n}"}) for n in range(3)]
    with dashboard(browser, service) as page, service.api() as api:
        batches = [
            api.post(
                "/api/batches",
                params={"model": "claude-haiku-4-5", "concurrency": 3},
                content="\n".join(tasks[:size]).encode(),
            ).json()
            for size in (3, 1)
        ]
        for batch, size in zip(batches, ("3 tasks", "1 task"), strict=True):
            name = page.locator(f"tr[data-batch='{batch['id']}'] td.batch-name")
            name.filter(has_text=f"{batch['root'][:8]} · {size}").wait_for(timeout=30_000)
            assert batch["id"] not in name.inner_text()  # no hex id for a name
        order = page.eval_on_selector_all(
            "tr[data-batch]", "rows => rows.map(r => r.dataset.batch)"
        )
        assert order.index(batches[1]["id"]) < order.index(batches[0]["id"])  # newest first
        root = batches[0]["root"]
        page.click(f"tr[data-batch='{batches[0]['id']}'] a.root-link")
        page.wait_for_selector(f"#transcript-title:has-text('{root}')")
        page.wait_for_selector(f"tr.agent.selected[data-uuid='{root}']")


def test_the_dashboard_shows_a_tree_no_grove_holds_as_stopped_until_resumed(
    browser: Browser, service: Service, tmp_path: Path
) -> None:
    # A Grove of its own on the service's store (this process's, in its Ray): it ran and closed.
    with running_grove(tmp_path, hosts=1, store_url=service.env["GROVE_STORE"]) as grove:
        left = grove.create_root("claude-haiku-4-5").uuid
        ran = grove.ask(left, "[[sim reply=done]] hi")
    assert ran.ok and ran.text == "done", ran
    with dashboard(browser, service) as page, service.api() as api:
        held = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]

        def status(uuid: str) -> Locator:
            return page.locator(f"tr[data-uuid='{uuid}'] td.status")

        status(left).filter(has_text="stopped").wait_for(timeout=30_000)
        status(held).filter(has_text="running").wait_for(timeout=30_000)
        # Resumed in the service, which holds its tree from now on.
        again = {"text": "[[sim reply=again]] go on"}
        assert api.post(f"/api/agents/{left}/prompts", json=again).json()["ok"]
        status(left).filter(has_text="running").wait_for(timeout=30_000)


def test_two_ups_at_once_start_one_service(service: Service, rivals: list[tuple[int, str]]) -> None:
    assert sorted(code for code, _ in rivals) == [0, 1], rivals
    (refusal,) = [text for code, text in rivals if code == 1]
    assert "another Grove service is starting or running" in refusal or (
        refusal.startswith("Grove is already up at")
    )
    assert invoke(service.env, "status").returncode == 0  # the one that came up serves


def test_a_chat_in_the_service_asks_before_a_tool_runs(service: Service, tmp_path: Path) -> None:
    from tests.terminal import Terminal

    env = {**service.env, "TERM": "xterm"}
    argv = [
        sys.executable,
        "-m",
        "grove.cli.entry",
        "chat",
        "--model",
        "claude-haiku-4-5",
        "--tools",
        "bash",
    ]
    term = Terminal(argv, env, tmp_path)
    try:
        term.expect(">")
        call = '[[sim tool=bash args=\'{"command": "echo %s"}\' step=1]] say it\r'
        term.type(call % "asked")
        term.expect("Allow bash? [y/n/a]")
        term.type("y")  # the next key typed answers
        term.expect("\u2190 bash: exit code 0")
        term.expect(">")
        term.type(call % "refused")
        term.expect("Allow bash? [y/n/a]")
        term.type("n")
        term.expect("\u2190 bash failed: The user did not allow bash this time.")
        term.expect(">")
        term.type("/exit\r")
        assert term.wait() == 0
    finally:
        term.close()


def test_status_json_says_where_the_service_is_and_its_token(service: Service) -> None:
    status = invoke(service.env, "status", "--json")
    assert status.returncode == 0, status.stderr
    found = json.loads(status.stdout)
    port = int(service.url.rsplit(":", 1)[1])
    assert (found["url"], found["host"], found["port"]) == (service.url, "127.0.0.1", port)
    assert found["token"] == service.token
    assert found["token_file"] == str(service.config / "service-token")
    assert found["dashboard"] == f"{service.url}/?token={service.token}"
    assert isinstance(found["agents"], int) and found["uptime_s"] >= 0


def test_the_readme_curl_example_finds_the_service_by_itself(service: Service) -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Grove as a service\n", 1)[1].split("\n## ", 1)[0]
    (example,) = [b for b in re.findall(r"```bash\n(.+?)\n```", section, re.DOTALL) if "curl" in b]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example],
        capture_output=True,
        text=True,
        env={**service.env, "PATH": path},
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)["uuid"]
    rows = json.loads(invoke(service.env, "agents", "--json").stdout)
    assert made in {row["uuid"] for row in rows}


def test_a_piped_chat_cannot_switch_a_model_while_a_turn_begun_elsewhere_streams(
    service: Service,
) -> None:
    with service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        slow = {"text": "[[sim ttft_ms=600000]] slow", "stream": True}
        with api.stream("POST", f"/api/agents/{root}/prompts", json=slow) as turn:
            assert turn.status_code == 200  # the turn has begun and streams until cancelled
            chat = invoke(service.env, "chat", "--resume", root, stdin="/model gpt-6-sol\n")
            assert api.post(f"/api/agents/{root}/cancel").json()["cancelled"]
            turn.read()
        record = api.get(f"/api/agents/{root}").json()
    assert chat.returncode == 1  # the refused line is counted
    assert f"\n{STREAMING_SWITCH_TEXT}\n" in chat.stdout, chat.stdout + chat.stderr
    # The refused switch changed nothing: the model and its thinking are as they were.
    assert (record["provider"], record["model"], record["thinking_level"]) == (
        "anthropic",
        "claude-haiku-4-5",
        None,
    )
