"""Benchmark: Grove as a service under a 1,000-agent fan-out, with the dashboard open in
headless chromium, against bench/fanout.py's Grove in the benchmark's own process.

Both fork N children of a root that was told bench/fanout.py's context and wait for their N
turns: in-process Grove with `fork_many` and `wait_any`; the service through the HTTP API,
counted on its event stream, while the page follows the tree. Both are up for the whole run;
each round runs in-process Grove, then the service, then the same N streams fetched by one
bare asyncio + httpx loop (fanout.py's baseline). Reported: `service_adds`, the service's wall
time over in-process Grove's (the goal: at most 1.05), both as ratios to the baseline, the
event rate the stream carried, and how the page kept up while a round ran: how late a timer
due every 100 ms ran on its main thread (how long a click would wait), the share of the round
its main thread was busy, and how long after the last completion it showed every child done.
A requestAnimationFrame loop would measure frames, but it makes the page draw 60 frames a
second, which the dashboard alone does not: about 0.1 CPU-s a round taken from the fan-out.

Prints one JSON line. Run from the repository root: `python bench/dashboard.py --n 1000`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from fanout import CONTEXT, bare_httpx, forked_round, prompts
from harness import (
    MODEL,
    REPO_ROOT,
    ExternalSimulator,
    Pacing,
    free_port,
    percentile,
    running_grove,
    simulator_process,
)

# How late a timer due every 100 ms runs on the page's main thread while a round runs;
# stopping hands the delays over.
LAG_PROBE_START = """
window.lags_ms = [];
window.lagProbe = (() => {
  let due = performance.now() + 100;
  const tick = () => {
    const now = performance.now();
    window.lags_ms.push(Math.max(0, now - due));
    due = now + 100;
    window.lagProbe = setTimeout(tick, 100);
  };
  return setTimeout(tick, 100);
})();
"""
LAG_PROBE_STOP = "clearTimeout(window.lagProbe); window.lags_ms"


class EventCounter:
    """Follows the service's event stream in a thread: events seen, and completions."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.events = 0
        self.completed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, args=(url, headers), daemon=True)
        self._thread.start()

    def _follow(self, url: str, headers: dict[str, str]) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(30, read=None)) as client,
                client.stream("GET", f"{url}/api/events/stream", headers=headers) as stream,
            ):
                for line in stream.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("event:"):
                        self.events += 1
                        self.completed += line.endswith("TurnCompleted")
        except httpx.HTTPError:
            if not self._stop.is_set():  # the service going down at the end is no news
                raise

    def stop(self) -> None:
        self._stop.set()


def timed_baseline(simulator: ExternalSimulator, texts: list[str]) -> float:
    """The bare loop's wall time, run in a thread of its own (Playwright's loop runs in this
    one)."""
    with ThreadPoolExecutor(1) as pool:
        wall, _ = pool.submit(asyncio.run, bare_httpx(simulator, texts)).result()
    return float(wall)


@contextmanager
def in_process(simulator: ExternalSimulator, texts: list[str]) -> Iterator[Callable[[], float]]:
    """bench/fanout.py's Grove: one forked round per call, its wall time."""
    with running_grove(simulator) as grove:
        root = grove.create_root(MODEL)
        if not grove.ask(root.uuid, CONTEXT).ok:
            raise SystemExit("dashboard bench: the context turn failed")

        def one_round() -> float:
            figures = forked_round(grove, root.uuid, texts)
            if figures["ok"] != len(texts):
                raise SystemExit(f"dashboard bench: {figures['ok']}/{len(texts)} turns ok")
            return float(figures["wall_s"])

        yield one_round


class PageFigures:
    """What the page and the event stream showed over the service's rounds."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.busy: list[float] = []
        self.shown_after: list[float] = []
        self.rates: list[float] = []

    def as_dict(self) -> dict[str, Any]:
        return {
            "events_per_s": round(median(self.rates)),
            "page_timer_lag_ms_p50": round(percentile(self.lags, 0.5), 1),
            "page_timer_lag_ms_p99": round(percentile(self.lags, 0.99), 1),
            "page_timer_lag_ms_max": round(max(self.lags), 1),
            "page_busy_share": round(median(self.busy), 3),
            "page_update_latency_s": round(median(self.shown_after), 3),
        }


@contextmanager
def through_service(
    simulator: ExternalSimulator, texts: list[str], chromium: str, figures: PageFigures
) -> Iterator[Callable[[], float]]:
    """`grove up` with the dashboard open in chromium: one round per call, forked through the
    HTTP API and counted on the event stream, its wall time."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="grove-bench-dashboard-") as name:
        home = Path(name)
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(home / "config"),
            "GROVE_CONFIG_FILE": str(home / "none.toml"),
            "GROVE_STORE": f"sqlite:///{home / 'grove.sqlite3'}",
            "ANTHROPIC_BASE_URL": simulator.base_url,
            "ANTHROPIC_API_KEY": simulator.api_key,
        }
        grove = [sys.executable, "-m", "grove.cli.entry"]
        port = free_port()
        up = [*grove, "up", "--port", str(port)]
        # Its output holds the token.
        subprocess.run(up, env=env, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        token = (home / "config" / "grove" / "service-token").read_text().strip()
        headers = {"authorization": f"Bearer {token}"}
        try:
            with (
                sync_playwright() as playwright,
                httpx.Client(base_url=url, headers=headers, timeout=600) as api,
            ):
                browser = playwright.chromium.launch(
                    executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{url}/?token={token}")
                page.wait_for_selector("#connection:has-text('live')")
                root = api.post("/api/roots", json={"model": MODEL}).json()["uuid"]
                told = api.post(f"/api/agents/{root}/prompts", json={"text": CONTEXT}).json()
                if not told["ok"]:
                    raise SystemExit(f"dashboard bench: the context turn failed: {told}")
                counter = EventCounter(url, headers)
                devtools = page.context.new_cdp_session(page)
                devtools.send("Performance.enable")
                rounds_done = 0

                def busy_s() -> float:
                    """Seconds the page's main thread has spent on tasks."""
                    metrics = devtools.send("Performance.getMetrics")["metrics"]
                    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))

                def one_round() -> float:
                    nonlocal rounds_done
                    page.evaluate(LAG_PROBE_START)
                    busy_before = busy_s()
                    before_events, before_done = counter.events, counter.completed
                    start = time.perf_counter()
                    api.post(f"/api/agents/{root}/fork", json={"prompts": texts})
                    while counter.completed - before_done < len(texts):
                        time.sleep(0.01)
                    wall = time.perf_counter() - start
                    figures.rates.append((counter.events - before_events) / wall)
                    rounds_done += 1
                    page.wait_for_function(
                        f"Number(document.body.dataset.agents) >= {rounds_done * len(texts) + 1}"
                        " && document.body.dataset.streaming === '0'",
                        timeout=60_000,
                    )
                    watched = time.perf_counter() - start
                    figures.shown_after.append(watched - wall)
                    figures.busy.append((busy_s() - busy_before) / watched)
                    figures.lags.extend(page.evaluate(LAG_PROBE_STOP))
                    return wall

                yield one_round
                counter.stop()
                browser.close()
        finally:
            subprocess.run([*grove, "down"], env=env, cwd=REPO_ROOT, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("dashboard bench: Debian's chromium is missing: apt-get install chromium")
    texts = prompts(args.n)
    walls: dict[str, list[float]] = {"grove": [], "service": [], "baseline": []}
    figures = PageFigures()
    with (
        simulator_process(Pacing(ttft_ms=500, tps=50.0, tokens=40)) as simulator,
        in_process(simulator, texts) as grove_round,
        through_service(simulator, texts, chromium, figures) as service_round,
    ):
        for _ in range(args.rounds):
            walls["grove"].append(grove_round())
            walls["service"].append(service_round())
            walls["baseline"].append(timed_baseline(simulator, texts))
    grove_s, service_s, baseline_s = (median(walls[key]) for key in walls)
    report: dict[str, Any] = {
        "bench": "dashboard",
        "n": args.n,
        "rounds": args.rounds,
        "grove_wall_s": round(grove_s, 3),
        "service_wall_s": round(service_s, 3),
        "baseline_wall_s": round(baseline_s, 3),
        "grove_ratio": round(grove_s / baseline_s, 3),
        "service_ratio": round(service_s / baseline_s, 3),
        "service_adds": round(service_s / grove_s, 3),
        **figures.as_dict(),
        "walls": {key: [round(w, 3) for w in values] for key, values in walls.items()},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
