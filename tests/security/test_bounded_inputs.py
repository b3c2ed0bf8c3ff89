"""Inputs are read with their limits enforced while reading, before Ray starts: an endless
tasks file or context (`/dev/zero`) is refused in bounded memory, and so is a piped chat line
longer than a message may be.
"""

from __future__ import annotations

from pathlib import Path

from grove.supervisor.batch.tasks import MAX_INPUT_BYTES, MAX_LINE_BYTES, MAX_TEXT_BYTES, read_tasks
from tests.security.commands import Place

ZERO = Path("/dev/zero")
# Far below the gigabytes these inputs took when read whole; a Python process with Grove's
# command line imported is about 100 MB.
PEAK_RSS_LIMIT_MB = 400
RUN = ("--simulate", "--model", "gpt-5-mini")


def test_an_endless_tasks_file_is_refused_in_bounded_memory(place: Place) -> None:
    done, peak_mb = place.measured("batch", str(ZERO), *RUN)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"{ZERO} is larger than {MAX_INPUT_BYTES:,} bytes; split the tasks into several files"
    )
    assert peak_mb < PEAK_RSS_LIMIT_MB
    assert not place.ray_started()


def test_an_endless_context_is_refused_in_bounded_memory(place: Place) -> None:
    tasks = place.base / "tasks.jsonl"
    tasks.write_text('{"id": 1, "prompt": "hi"}\n')
    done, peak_mb = place.measured("batch", str(tasks), "--context", str(ZERO), *RUN)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"{ZERO} is larger than {MAX_TEXT_BYTES:,} bytes, the limit of one message"
    )
    assert peak_mb < PEAK_RSS_LIMIT_MB
    assert not place.ray_started()


def test_a_large_context_is_refused_before_ray_starts(place: Place) -> None:
    tasks = place.base / "tasks.jsonl"
    tasks.write_text('{"id": 1, "prompt": "hi"}\n')
    context = place.base / "context.md"
    with context.open("wb") as out:
        out.truncate(50 * 1024 * 1024)
    done = place.grove("batch", str(tasks), "--context", str(context), *RUN)
    assert done.returncode == 2
    assert "is larger than" in done.stderr and "the limit of one message" in done.stderr
    assert not place.ray_started()


def test_an_overlong_task_line_is_one_error_and_the_others_are_read() -> None:
    data = (
        b'{"id": 1, "prompt": "a"}\n'
        + b"x" * (MAX_LINE_BYTES * 3)
        + b'\n{"id": 2, "prompt": "b"}\n'
    )
    parsed = read_tasks(data)
    assert [task.id for task in parsed.tasks] == [1, 2]
    assert [str(error) for error in parsed.errors] == [
        f"line 2: longer than {MAX_LINE_BYTES:,} bytes"
    ]


def test_a_piped_chat_line_longer_than_a_message_is_rejected_in_bounded_memory(
    place: Place,
) -> None:
    zeros = place.base / "zeros"
    with zeros.open("wb") as out:
        out.truncate(64 * 1024 * 1024)  # one 64 MB line without a newline
    done, peak_mb = place.measured("chat", *RUN, stdin=zeros)
    assert done.returncode == 1, done.stderr
    assert f"stdin line 1: longer than {MAX_LINE_BYTES:,} bytes; not sent" in done.stdout
    assert peak_mb < PEAK_RSS_LIMIT_MB
