"""Benchmark: Grove as a service under a 1,000-agent fan-out, with the dashboard open in
headless chromium. Each round forks N children of one root through the HTTP API and waits,
on the event stream, for N `TurnCompleted`; the same N streams fetched by one bare asyncio +
httpx loop alternate with it (the baseline of bench/fanout.py). Reported: the service's wall
time as a ratio to the baseline (bench/fanout.py's Grove ratio is the figure to hold it
against: the service may add at most 1.05x), the event rate the stream carried, and the page's
frame times and how long after the last completion it showed every child.

Prints one JSON line. Run from the repository root: `python bench/dashboard.py --n 1000`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from fanout import bare_httpx, prompts
from harness import MODEL, REPO_ROOT, Pacing, percentile, simulator_process

# Frame intervals the page records while it runs (requestAnimationFrame).
FRAME_PROBE = """
window.frames_ms = [];
let last = performance.now();
const tick = (now) => {
  window.frames_ms.push(now - last); last = now; requestAnimationFrame(tick);
};
requestAnimationFrame(tick);
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class EventCounter:
    """Follows the service's event stream in a thread: events seen, and completions."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.events = 0
        self.completed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, args=(url, headers), daemon=True)
        self._thread.start()

    def _follow(self, url: str, headers: dict[str, str]) -> None:
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

    def stop(self) -> None:
        self._stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("dashboard bench: Debian's chromium is missing: apt-get install chromium")
    texts = prompts(args.n)
    walls: dict[str, list[float]] = {"service": [], "baseline": []}
    report: dict[str, Any] = {"bench": "dashboard", "n": args.n, "rounds": args.rounds}
    with (
        tempfile.TemporaryDirectory(prefix="grove-bench-dashboard-") as name,
        simulator_process(Pacing(ttft_ms=500, tps=50.0, tokens=40)) as simulator,
    ):
        home = Path(name)
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(home / "config"),
            "GROVE_CONFIG_FILE": str(home / "none.toml"),
            "GROVE_STORE": f"sqlite:///{home / 'grove.sqlite3'}",
            "ANTHROPIC_BASE_URL": simulator.base_url,
            "ANTHROPIC_API_KEY": simulator.api_key,
        }
        grove = [sys.executable, "-m", "cli.entry"]
        port = free_port()
        subprocess.run([*grove, "up", "--port", str(port)], env=env, cwd=REPO_ROOT, check=True)
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
                counter = EventCounter(url, headers)
                frames: list[float] = []
                shown_after: list[float] = []
                rates: list[float] = []
                for _ in range(args.rounds):
                    page.evaluate(FRAME_PROBE)
                    before_events, before_done = counter.events, counter.completed
                    start = time.perf_counter()
                    api.post(f"/api/agents/{root}/fork", json={"prompts": texts})
                    while counter.completed - before_done < args.n:
                        time.sleep(0.01)
                    wall = time.perf_counter() - start
                    walls["service"].append(wall)
                    rates.append((counter.events - before_events) / wall)
                    rows = len(walls["service"]) * args.n + 1
                    page.wait_for_function(
                        f"Number(document.body.dataset.agents) >= {rows} && "
                        "document.body.dataset.streaming === '0'",
                        timeout=60_000,
                    )
                    shown_after.append(time.perf_counter() - start - wall)
                    frames += page.evaluate("window.frames_ms.splice(0)")
                    # In a thread of its own: Playwright's loop runs in this one.
                    with ThreadPoolExecutor(1) as pool:
                        baseline, _ = pool.submit(
                            asyncio.run, bare_httpx(simulator, texts)
                        ).result()
                    walls["baseline"].append(baseline)
                counter.stop()
                browser.close()
        finally:
            subprocess.run([*grove, "down"], env=env, cwd=REPO_ROOT, check=False)
    service_s, baseline_s = median(walls["service"]), median(walls["baseline"])
    report.update(
        {
            "service_wall_s": round(service_s, 3),
            "baseline_wall_s": round(baseline_s, 3),
            "ratio": round(service_s / baseline_s, 3),
            "events_per_s": round(median(rates)),
            "page_frame_ms_p50": round(percentile(frames, 0.5), 1),
            "page_frame_ms_p99": round(percentile(frames, 0.99), 1),
            "page_frame_ms_max": round(max(frames), 1),
            "page_all_shown_after_last_completion_s": round(median(shown_after), 3),
            "walls": {k: [round(w, 3) for w in v] for k, v in walls.items()},
        }
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
