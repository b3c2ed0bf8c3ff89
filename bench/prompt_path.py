"""Benchmark of structure: how many of Grove's modules one prompt of `grove run` crosses, from
`Grove.send` to the provider (the simulator) and back, in every process it touches.

Each process (the CLI, the supervisor and host actors) runs with a profiler hook: the modules
of Grove whose functions run or return after the CLI entered `Grove.send` are the prompt's
path (a host's periodic work in that window counts too, the same way at every commit).
Prints one JSON line: the count, and the modules.
Run from the repository root: `python bench/prompt_path.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "claude-sonnet-5-5/low"
START = "Grove.send"

# Loaded by every Python process of the run (PYTHONPATH): from the moment the CLI enters
# `Grove.send`, each module of Grove that runs is written down at once, in `<dir>/<pid>.txt`
# (Ray may end a worker without its atexit).
SITECUSTOMIZE = """
import os, sys, threading

_DIR = os.environ["PROMPT_PATH_DIR"]
_ROOT = os.environ["PROMPT_PATH_ROOT"]
_START = os.environ["PROMPT_PATH_START"]
_MARK = _DIR + "/start"
_seen = set()
_started = [False]

def _hook(frame, event, arg):
    if event != "call" and event != "return":
        return
    code = frame.f_code
    name = code.co_filename
    if name in _seen or _ROOT not in name or "/.venv/" in name or "/bench/" in name:
        return
    if not _started[0]:
        if code.co_qualname == _START:
            open(_MARK, "a").close()
        if not os.path.exists(_MARK):
            return
        _started[0] = True
    _seen.add(name)
    with open(f"{_DIR}/{os.getpid()}.txt", "a") as out:
        out.write(os.path.realpath(name) + "\\n")

sys.setprofile(_hook)
threading.setprofile(_hook)
"""


def path_modules(marks: Path) -> list[str]:
    """The modules (relative to the repository) that ran after the prompt was sent, or
    returned after it (a caller waiting on it); the simulator, the provider's stand-in, not."""
    crossed: set[str] = set()
    for written in marks.glob("*.txt"):
        for name in written.read_text().splitlines():
            module = Path(name).relative_to(ROOT)
            if "simulator" not in module.parts:
                crossed.add(str(module))
    return sorted(crossed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", default="Say hello in five words.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        hooks = Path(scratch) / "hooks"
        marks = Path(scratch) / "marks"
        hooks.mkdir()
        marks.mkdir()
        (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = {
            **os.environ,
            "PYTHONPATH": str(hooks),
            "PROMPT_PATH_DIR": str(marks),
            "PROMPT_PATH_ROOT": str(ROOT),
            "PROMPT_PATH_START": START,
            "GROVE_NO_SERVICE": "1",
            "GROVE_HOME": str(Path(scratch) / "home"),
            "XDG_CONFIG_HOME": str(Path(scratch) / "config"),
            "XDG_DATA_HOME": str(Path(scratch) / "data"),
        }
        grove = Path(sys.executable).parent / "grove"
        command = [str(grove), "run", args.prompt, "--simulate", "--model", MODEL]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"prompt_path bench: grove run failed: {done.stderr[-2000:]}")
        modules = path_modules(marks)
    print(json.dumps({"bench": "prompt_path", "modules": len(modules), "path": modules}))


if __name__ == "__main__":
    main()
