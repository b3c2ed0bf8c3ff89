"""`grove doctor`: checks what Grove needs (versions, the configuration, the store and the
models of its agents, the credentials file, Ray, the sandboxes, the simulator, a running service)
and says what to fix.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import typer

from grove.cli.context import CliContext
from grove.providers.errors import GroveError
from grove.providers.plurals import counted

if TYPE_CHECKING:
    from grove.supervisor.config import GroveSettings

Verdict = Literal["ok", "warn", "FAIL"]
PACKAGES = ("agentgrove", "ray", "pydantic", "httpx", "redis", "fastapi", "mcp")


@dataclass(frozen=True, slots=True)
class Finding:
    verdict: Verdict
    what: str
    detail: str
    fix: str = ""


def versions() -> list[Finding]:
    import importlib.metadata

    found = []
    for package in PACKAGES:
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{package} missing")
    python = ".".join(str(part) for part in sys.version_info[:3])
    old = sys.version_info < (3, 11)
    missing = [entry for entry in found if entry.endswith(" missing")]
    verdict: Verdict = "FAIL" if old or missing else "ok"
    fix = "install Grove again: pip install -e ." if missing else ""
    if old:
        fix = "Grove needs Python 3.11 or newer"
    return [Finding(verdict, "versions", f"python {python}, " + ", ".join(found), fix)]


def store(settings: GroveSettings) -> list[Finding]:
    from grove.supervisor.store import default_store_url, exposed_store_warning, open_store

    try:
        opened = open_store(settings.store)
        try:
            count = len(opened.list_agents(include_ended=True))
            resumable = [(a.uuid, a.model) for a in opened.list_agents() if a.model is not None]
        finally:
            opened.close()
    except GroveError as exc:
        fix = "start that Redis, or set GROVE_STORE (sqlite:///path needs nothing installed)"
        return [Finding("FAIL", "store", str(exc), fix)]
    url = settings.store or default_store_url()
    findings = [
        Finding("ok", "store", f"{url}: {counted(count, 'agent')}"),
        *stored_models(resumable),
    ]
    exposed = exposed_store_warning(settings.store)
    if exposed:
        findings.append(Finding("warn", "store", exposed, "chmod 600 the store file"))
    return findings


def stored_models(agents: list[tuple[str, str]]) -> list[Finding]:
    """One finding per stored agent (running, or stopped and resumable) on a model that is
    retired, deprecated or shuts down within 30 days: which, and how to move it."""
    from grove.providers.lifecycle import stale_agents

    found = []
    for agent, verdict in stale_agents(agents):
        switch = f"/model {verdict.successor}" if verdict.successor else "/model MODEL"
        fix = f"in `grove chat --resume {agent}`: /switch {agent}, then {switch}"
        found.append(Finding("warn", "models", f"agent {agent}: {verdict.notice}", fix))
    return found


def credentials() -> list[Finding]:
    from grove.providers.credentials import (
        API_KEY_ENV,
        CREDENTIALS_FILE,
        config_dir,
        credentials_file_problem,
        load_api_key,
    )
    from grove.providers.errors import MissingCredentialsError

    path = config_dir() / CREDENTIALS_FILE
    findings = []
    problem = credentials_file_problem(path)
    if problem:
        findings.append(Finding("FAIL", "credentials", problem, f"chmod 600 {path}"))
    keyed: list[str] = []
    for provider in API_KEY_ENV:
        try:
            load_api_key(provider)
            keyed.append(provider)
        except MissingCredentialsError:
            pass
    if keyed:
        findings.append(Finding("ok", "credentials", "keys for " + ", ".join(keyed)))
    else:
        variables = ", ".join(names[0] for names in API_KEY_ENV.values())
        findings.append(
            Finding(
                "warn",
                "credentials",
                "no provider key (only --simulate works)",
                f"set {variables}, or add them to {path} (mode 600)",
            )
        )
    return findings


def ray_check(settings: GroveSettings) -> list[Finding]:
    """Ray starts (or the cluster named by --address/RAY_ADDRESS answers), then stops."""
    from grove.supervisor.local_ray import keep_local_ray_on_loopback, start_ray

    keep_local_ray_on_loopback(settings.address)
    import ray

    started = time.monotonic()
    local = None
    try:
        local = start_ray(settings.address)  # as Grove starts it
        nodes = len([node for node in ray.nodes() if node["Alive"]])  # type: ignore[no-untyped-call]
    except Exception as exc:  # whatever Ray raises, the doctor reports it
        where = settings.address or "a local Ray"
        fix = "check --address / RAY_ADDRESS" if settings.address else "see `ray start --head`"
        return [Finding("FAIL", "ray", f"{where} did not start: {exc}", fix)]
    finally:
        ray.shutdown()
        if local is not None:
            local.stop()
    where = settings.address or "local, on 127.0.0.1"
    took = time.monotonic() - started
    return [
        Finding("ok", "ray", f"{ray.__version__} {where}: {counted(nodes, 'node')}, {took:.1f} s")
    ]


def simulator() -> list[Finding]:
    import httpx

    from grove.providers.catalog import DEFAULT_MODELS
    from grove.simulator import SimulatorConfig, SimulatorThread

    try:
        with SimulatorThread(SimulatorConfig(api_key="doctor", tokens=3)) as running:
            answer = httpx.post(
                f"{running.base_url}/v1/messages",
                headers={"x-api-key": "doctor", "anthropic-version": "2023-06-01"},
                json={
                    "model": DEFAULT_MODELS["anthropic"],
                    "max_tokens": 16,
                    "messages": [{"role": "user", "content": "hello"}],
                },
                timeout=10,
            )
    except (OSError, httpx.HTTPError) as exc:
        return [Finding("FAIL", "simulator", f"did not answer: {exc}", "reinstall Grove")]
    if answer.status_code != 200:
        return [Finding("FAIL", "simulator", f"answered {answer.status_code}", "reinstall Grove")]
    return [Finding("ok", "simulator", "answers on 127.0.0.1 (grove run --simulate works)")]


def sandbox(settings: GroveSettings) -> list[Finding]:
    """Whether bubblewrap can sandbox the processes tools start (bash)."""
    from grove.actors.sandbox_limits import processes_limited
    from grove.actors.tools.sandbox_check import sandbox_problem

    if settings.tools.sandbox.mode == "off":
        fix = 'set [tools.sandbox] mode = "workspace-write" to sandbox them'
        return [Finding("warn", "sandbox", "off: bash runs with all your rights", fix)]
    problem = sandbox_problem()
    if problem is not None:
        return [Finding("warn", "sandbox", f"bash cannot run: {problem.what}", problem.fix)]
    network = "with" if settings.tools.sandbox.network else "without"
    detail = f"{settings.tools.sandbox.mode}, {network} network (bubblewrap)"
    if processes_limited():
        return [Finding("ok", "sandbox", detail)]
    what = f"{detail}; run as root with no pids cgroup Grove may make, processes not limited"
    fix = "run Grove as a user other than root, or let it write a pids cgroup of its own"
    return [Finding("warn", "sandbox", what, fix)]


def git_sandbox() -> list[Finding]:
    """Whether Grove's own git (the worktrees of forks) runs in a sandbox of its own."""
    from grove.actors.tools.grove_git import git_sandbox_problem

    problem = git_sandbox_problem()
    if problem is None:
        return [Finding("ok", "git sandbox", "Grove's git (worktrees) runs in bubblewrap")]
    what = (
        f"Grove's git runs unsandboxed (its fixed configuration and refusals hold): {problem.what}"
    )
    return [Finding("warn", "git sandbox", what, problem.fix)]


def service() -> list[Finding]:
    from grove.server.files import read_state
    from grove.server.service_link import healthy

    state = read_state()
    if state is None:
        return [Finding("ok", "service", "none running (grove up starts one)")]
    if not healthy(state):
        fix = "`grove down`, then `grove up`"
        return [Finding("FAIL", "service", f"pid {state.pid} does not answer at {state.url}", fix)]
    return [Finding("ok", "service", f"up at {state.url} (pid {state.pid})")]


def doctor_command(ctx: typer.Context) -> None:
    """Check versions, the configuration, the store, the credentials file, Ray, the sandbox,
    the simulator and a running service; say what to fix. Exit 1 when something must be
    fixed."""
    context: CliContext = ctx.obj
    findings = versions()
    try:
        settings = context.settings()
    except typer.Exit:
        findings.append(Finding("FAIL", "config", "the configuration cannot be read (above)"))
        settings = None
    if settings is not None:
        findings.append(Finding("ok", "config", "read"))
        checks: list[Callable[[], list[Finding]]] = [
            lambda: store(settings),
            credentials,
            lambda: ray_check(settings),
            lambda: sandbox(settings),
            git_sandbox,
            simulator,
            service,
        ]
        for check in checks:
            findings += check()
    for finding in findings:
        sys.stdout.write(f"{finding.verdict:<4}  {finding.what:<11} {finding.detail}\n")
        if finding.fix:
            sys.stdout.write(f"{'':<17} fix: {finding.fix}\n")
    if any(finding.verdict == "FAIL" for finding in findings):
        raise typer.Exit(1)
