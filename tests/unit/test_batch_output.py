"""`grove batch` output and progress: records, what a rerun reads back (the last line per id
wins), the repair of a torn last line, the progress and summary texts, and what a restarted
service reads back of its batches."""

from __future__ import annotations

import io
import json
from pathlib import Path

from grove.actors.turn_result import TurnResult
from grove.cli.batch_progress import PlainProgress
from grove.providers.base import Usage
from grove.server.batch_files import BatchFiles, described_batches, read_recorded
from grove.supervisor.batch.done import read_previous
from grove.supervisor.batch.records import OutputLog, error_record, line_error_record, task_record
from grove.supervisor.batch.summary import Totals, duration_text, progress_line, summary_line
from grove.supervisor.batch.tasks import Task, TaskLineError

TASK = Task(id=7, key="7", line=3, prompt="Review this")


def test_records_have_the_documented_fields() -> None:
    usage = Usage(input_tokens=10, output_tokens=5)
    ok = task_record(TASK, "agent-1", TurnResult(text="Fine.", usage=usage, cost_usd=0.25))
    assert ok == {
        "id": 7,
        "agent": "agent-1",
        "status": "ok",
        "text": "Fine.",
        "usage": usage.as_dict(),
        "cost_usd": 0.25,
        "saved_usd": 0.0,
        "error": None,
        "advice": [],
        "tool_calls": [],
        "tool_results": [],
    }
    failed = task_record(TASK, "agent-2", TurnResult(text="partial", error="HTTP 529"))
    assert failed["status"] == "error" and failed["error"] == "HTTP 529"
    assert failed["text"] == "" and failed["agent"] == "agent-2"
    assert task_record(TASK, "agent-3", None)["error"] == "the agent ended without a result"
    cancelled = task_record(TASK, "agent-4", TurnResult(cancelled=True))
    assert (cancelled["status"], cancelled["error"]) == ("error", "cancelled")
    assert line_error_record(TaskLineError(4, "missing required field 'id'")) == {
        "id": None,
        "line": 4,
        "status": "error",
        "error": "missing required field 'id'",
    }


def test_previous_run_takes_the_last_record_per_id(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    lines = [
        error_record(TASK, "a", "HTTP 500"),
        task_record(TASK, "b", TurnResult(text="ok")),
        task_record(Task(id="x", key="x", line=1, prompt="p"), "c", TurnResult(text="ok")),
        error_record(Task(id="x", key="x", line=1, prompt="p"), "d", "later failure"),
        task_record(Task(id="7.5", key="7.5", line=1, prompt="p"), "e", TurnResult(text="ok")),
        line_error_record(TaskLineError(9, "bad")),
    ]
    path.write_text(
        "\n".join(json.dumps(line) for line in lines) + '\nnot json\n[1]\n{"id": true}\n'
    )
    previous = read_previous(path)
    assert previous.done == {"7", "7.5"}
    assert previous.line_errors == {(9, "bad")}
    assert previous.unreadable == 3
    assert read_previous(tmp_path / "missing.jsonl").done == frozenset()


def test_a_torn_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    whole = json.dumps(task_record(TASK, "a", TurnResult(text="ok"))) + "\n"
    path.write_text(whole + '{"id": 8, "agent": "b", "sta')
    with OutputLog(path) as log:
        log.append(line_error_record(TaskLineError(2, "unicode \u00e9 and \ud800")))
    lines = path.read_text().splitlines()
    assert lines[0] == whole.strip()
    assert json.loads(lines[1])["error"] == "unicode \u00e9 and \ud800"
    assert len(lines) == 2
    assert read_previous(path).unreadable == 0


def test_output_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "out.jsonl"
    with OutputLog(path) as log:
        log.append({"id": 1, "status": "ok"})
    assert path.read_text() == '{"id": 1, "status": "ok"}\n'


def test_totals_count_records_and_tokens() -> None:
    totals = Totals(total=3)
    totals.count(task_record(TASK, "a", TurnResult(usage=Usage(input_tokens=3, output_tokens=4))))
    totals.count(error_record(TASK, None, "refused"))
    assert (totals.ok, totals.failed, totals.done, totals.tokens) == (1, 1, 2, 7)


def test_plain_progress_writes_at_most_one_line_per_period() -> None:
    now = [100.0]
    out = io.StringIO()
    progress = PlainProgress(out, every_s=10.0, clock=lambda: now[0])
    totals = Totals(total=10, ok=2, failed=1, input_tokens=1000, output_tokens=234, cost_usd=0.5)
    progress.update(totals)
    now[0] = 109.0
    progress.update(totals)
    assert out.getvalue() == ""
    now[0] = 112.0
    progress.update(totals)
    now[0] = 115.0
    progress.update(totals)
    assert out.getvalue().splitlines() == [
        "batch: 3/10 done, 1 failed, 0.2 tasks/s, ETA 28s, 1,234 tokens, $0.5000"
    ]


def test_progress_and_summary_texts() -> None:
    assert progress_line(Totals(total=5), 3.0).endswith("? tasks/s, ETA ?, 0 tokens, $0.0000")
    assert [duration_text(s) for s in (4.4, 65, 3 * 3600 + 125)] == ["4s", "1m05s", "3h02m"]
    totals = Totals(total=4, ok=2, failed=1, malformed=1, skipped=6, input_tokens=1500)
    assert summary_line(totals, 2.25, "out.jsonl") == (
        "Batch finished: 2 ok, 2 failed (1 malformed line), 6 skipped (already ok), "
        "1,500 tokens, $0.0000, 2.2s. Output: out.jsonl"
    )
    assert summary_line(totals, 1.0, "o", interrupted=1).startswith("Batch interrupted: 2 ok")
    assert summary_line(totals, 1.0, "o", interrupted=1).endswith(
        ". 1 unfinished task run again on the next run"
    )


def test_the_summary_says_what_caching_read_and_saved() -> None:
    totals = Totals(total=2)
    for saved in (0.75, 0.5):
        totals.count(
            {
                "status": "ok",
                "usage": {"input_tokens": 10_000, "output_tokens": 5, "cache_read_tokens": 9_500},
                "cost_usd": 0.01,
                "saved_usd": saved,
            }
        )
    line = summary_line(totals, 3.0, "out.jsonl")
    assert "20,010 tokens (95% of input from cache), $0.0200 (caching saved $1.2500)" in line
    totals.saved_usd = -0.25  # wrote more than it read
    assert "(caching cost $0.2500 more)" in summary_line(totals, 3.0, "out.jsonl")


def test_a_typed_task_records_its_output_or_stays_invalid_output() -> None:
    retried = Usage(input_tokens=40, output_tokens=6)
    answer = TurnResult(
        text='{"ok": true}',
        usage=Usage(input_tokens=100, output_tokens=12),
        output={"ok": True},
        output_retries=1,
        retry_usage=retried,
    )
    ok = task_record(TASK, "a", answer, typed=True)
    assert (ok["status"], ok["output"], ok["error"]) == ("ok", {"ok": True}, None)
    assert (ok["output_retries"], ok["retry_usage"]) == (1, retried.as_dict())
    malformed = TurnResult(
        text="{ok: yes", output_error="The answer is not valid JSON", output_retries=2
    )
    invalid = task_record(TASK, "b", malformed, typed=True)
    assert invalid["status"] == "invalid_output" and invalid["output"] is None
    assert (invalid["text"], invalid["error"]) == ("{ok: yes", "The answer is not valid JSON")
    failed = task_record(TASK, "c", TurnResult(error="HTTP 529"), typed=True)
    assert (failed["status"], failed["output"], failed["output_retries"]) == ("error", None, 0)
    assert task_record(TASK, "d", None, typed=True)["output"] is None
    assert "output" not in task_record(TASK, "e", TurnResult(text="plain"))


def test_totals_and_summary_count_invalid_output_and_retries(tmp_path: Path) -> None:
    totals = Totals(total=3)
    for record in (
        {
            "status": "ok",
            "output_retries": 1,
            "retry_usage": {"input_tokens": 40, "output_tokens": 6},
        },
        {"status": "invalid_output", "output_retries": 2, "retry_usage": {"input_tokens": 90}},
        {"status": "ok", "output_retries": 0},
    ):
        totals.count({**record, "usage": {"input_tokens": 1000}})
    assert (totals.ok, totals.failed, totals.invalid_output) == (2, 1, 1)
    assert (totals.output_retries, totals.retry_tokens) == (3, 136)
    assert summary_line(totals, 1.0, "o") == (
        "Batch finished: 2 ok, 1 failed (1 invalid output), 0 skipped (already ok), "
        "3,000 tokens (136 of them in 3 output retries), $0.0000, 1.0s. Output: o"
    )
    path = tmp_path / "out.jsonl"
    path.write_text(
        json.dumps({"id": 1, "status": "ok"})
        + "\n"
        + json.dumps({"id": 2, "status": "invalid_output"})
        + "\n"
    )
    assert read_previous(path).done == frozenset({"1"})  # a rerun runs the invalid one again


def test_a_services_batch_files_give_back_its_description_and_what_it_recorded(
    tmp_path: Path,
) -> None:
    """What a restarted service reads of a batch: its description (the last one written
    whole), its tasks as submitted, and the ids and totals of its whole records (a torn last
    line is not one)."""
    older = BatchFiles(directory=tmp_path, id="0a")
    older.create(b'{"id": 1, "prompt": "p"}\n', {"started": 2.0, "finished": None})
    newer = BatchFiles(directory=tmp_path, id="0b")
    newer.create(b"", {"started": 1.0, "finished": None})
    older.describe({"started": 2.0, "finished": 3.0})
    assert [(files.id, described) for files, described in described_batches(tmp_path)] == [
        ("0b", {"started": 1.0, "finished": None}),
        ("0a", {"started": 2.0, "finished": 3.0}),
    ]
    assert older.tasks.read_bytes() == b'{"id": 1, "prompt": "p"}\n'
    assert {path.stat().st_mode & 0o777 for path in tmp_path.iterdir()} == {0o600}
    ok = task_record(TASK, "a", TurnResult(text="Fine.", usage=Usage(input_tokens=4)))
    failed = error_record(Task(id="x", key="x", line=1, prompt="p"), None, "boom")
    older.output.write_text(json.dumps(ok) + "\n" + json.dumps(failed) + "\n" + '{"id": 9, "st')
    recorded = read_recorded(older.output, total=5)
    assert recorded.ids == {"7", "x"}
    totals = recorded.totals
    assert (totals.total, totals.ok, totals.failed, totals.input_tokens) == (5, 1, 1, 4)
    assert read_recorded(tmp_path / "none.jsonl", total=2).ids == set()
