"""The vendors' SDKs as referees of the simulator's batch and flex tiers, over real HTTP:
Anthropic's Message Batches, OpenAI's Files and Batch APIs and flex tier, Gemini's batch mode
and flex tier. A batch ends after its delay with every answer under its own custom id, in a
shuffled order (Gemini: in order, as that API gives them), the configured shares errored and
expired; cancel stops one; delete removes a batch (OpenAI: its files); unknown ids, malformed
input and (Anthropic) a body over the byte limit get the vendors' refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from grove.simulator import SimulatorConfig, SimulatorThread
from grove.simulator.script import generated_words

KEY = "sim-sdk-batches-key-51c3"
TOKENS = 4
DELAY_S = 0.3
PROMPTS = {f"task-{number}": f"Question number {number} about rivers" for number in range(8)}
CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5-mini"
GEMINI = "gemini-2.5-flash-lite"
Polled = TypeVar("Polled")
REPO_ROOT = Path(__file__).resolve().parents[2]


def answer(prompt: str) -> str:
    return "".join(generated_words(prompt, TOKENS))


def running(**settings: Any) -> Iterator[SimulatorThread]:
    config = SimulatorConfig(api_key=KEY, tokens=TOKENS, batch_delay_s=DELAY_S, **settings)
    with SimulatorThread(config) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def plain() -> Iterator[SimulatorThread]:
    """Every batched request answered."""
    yield from running()


@pytest.fixture(scope="module")
def shares() -> Iterator[SimulatorThread]:
    """A quarter of each batch errored, a quarter expired, drawn from a fixed seed."""
    yield from running(batch_errored=0.25, batch_expired=0.25, seed=11)


@pytest.fixture(scope="module")
def errors() -> Iterator[SimulatorThread]:
    """Half of each batch errored, nothing expired."""
    yield from running(batch_errored=0.5, seed=5)


@pytest.fixture(scope="module")
def slow() -> Iterator[SimulatorThread]:
    """Batches that would take a minute: there is time to cancel them."""
    config = SimulatorConfig(api_key=KEY, tokens=TOKENS, batch_delay_s=60.0)
    with SimulatorThread(config) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def flex() -> Iterator[SimulatorThread]:
    """Half the flex requests refused for want of capacity."""
    yield from running(flex_unavailable=0.5)


def poll(get: Callable[[], Polled], done: Callable[[Polled], bool]) -> Polled:
    deadline = time.monotonic() + 20.0
    while True:
        polled = get()
        if done(polled) or time.monotonic() > deadline:
            return polled
        time.sleep(0.05)


# --- Anthropic ----------------------------------------------------------------------------------


def claude(simulator: SimulatorThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=simulator.base_url, max_retries=0)


def claude_requests(prompts: dict[str, str]) -> list[Any]:
    return [
        {
            "custom_id": custom_id,
            "params": {
                "model": CLAUDE,
                "max_tokens": 256,
                "messages": [{"role": "user", "content": prompt}],
            },
        }
        for custom_id, prompt in prompts.items()
    ]


def test_anthropic_batch_ends_with_each_answer_under_its_custom_id(
    plain: SimulatorThread,
) -> None:
    client = claude(plain)
    created = client.messages.batches.create(requests=claude_requests(PROMPTS))
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == len(PROMPTS)
    assert created.results_url is None
    ended = poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    assert ended.processing_status == "ended"
    assert ended.request_counts.succeeded == len(PROMPTS)
    assert ended.request_counts.processing == 0
    assert ended.ended_at is not None and ended.ended_at >= created.created_at
    results = list(client.messages.batches.results(created.id))
    assert sorted(result.custom_id for result in results) == sorted(PROMPTS)
    assert [result.custom_id for result in results] != list(PROMPTS)  # shuffled
    for result in results:
        assert result.result.type == "succeeded"
        message = result.result.message
        assert message.content[0].text == answer(PROMPTS[result.custom_id])  # type: ignore[union-attr]
        assert message.usage.input_tokens > 0
    assert plain.simulator.billing.by_tier["batch"]["requests"] >= len(PROMPTS)
    listed = [batch.id for batch in client.messages.batches.list(limit=20)]
    assert created.id in listed
    assert client.messages.batches.delete(created.id).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(created.id)


def test_anthropic_batch_errored_and_expired_shares(shares: SimulatorThread) -> None:
    client = claude(shares)
    created = client.messages.batches.create(requests=claude_requests(PROMPTS))
    ended = poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    counts = ended.request_counts
    assert (counts.succeeded, counts.errored, counts.expired, counts.canceled) == (4, 2, 2, 0)
    results = {
        result.custom_id: result.result for result in client.messages.batches.results(created.id)
    }
    assert sorted(results) == sorted(PROMPTS)
    kinds = sorted(result.type for result in results.values())
    assert kinds == ["errored"] * 2 + ["expired"] * 2 + ["succeeded"] * 4
    for custom_id, result in results.items():
        if result.type == "errored":
            assert result.error.error.type == "api_error"
        if result.type == "succeeded":
            assert result.message.content[0].text == answer(PROMPTS[custom_id])  # type: ignore[union-attr]


def test_anthropic_batch_request_the_api_refuses_is_an_errored_result(
    plain: SimulatorThread,
) -> None:
    client = claude(plain)
    requests = claude_requests({"fine": "Name a river", "refused": "Name a lake"})
    requests[1]["params"]["thinking"] = {"type": "enabled", "budget_tokens": 100}
    created = client.messages.batches.create(requests=requests)
    poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    results = {
        result.custom_id: result.result for result in client.messages.batches.results(created.id)
    }
    assert results["fine"].type == "succeeded"
    refused = results["refused"]
    assert refused.type == "errored"
    assert refused.error.error.type == "invalid_request_error"
    assert "budget_tokens" in refused.error.error.message


def test_anthropic_batch_keeps_cache_marks(plain: SimulatorThread) -> None:
    """Batched requests sharing a marked prefix: the first written, the rest read from it."""
    client = claude(plain)
    guide = " ".join(
        f"Rule {number}: keep the river banks clear of debris." for number in range(400)
    )
    requests = claude_requests({f"cached-{n}": f"Which rule is {n}?" for n in range(3)})
    for request in requests:
        request["params"]["system"] = [
            {"type": "text", "text": guide, "cache_control": {"type": "ephemeral"}}
        ]
    created = client.messages.batches.create(requests=requests)
    poll(
        lambda: client.messages.batches.retrieve(created.id),
        lambda batch: batch.processing_status == "ended",
    )
    usages = [
        result.result.message.usage  # type: ignore[union-attr]
        for result in client.messages.batches.results(created.id)
    ]
    written = sorted(usage.cache_creation_input_tokens or 0 for usage in usages)
    read = sorted(usage.cache_read_input_tokens or 0 for usage in usages)
    assert written[:2] == [0, 0] and written[2] > 1024
    assert read[0] == 0 and read[1] == read[2] == written[2]


def test_anthropic_batch_cancel(slow: SimulatorThread) -> None:
    client = claude(slow)
    created = client.messages.batches.create(requests=claude_requests(PROMPTS))
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.delete(created.id)  # in progress: cancel first
    canceling = client.messages.batches.cancel(created.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None
    ended = client.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended"
    assert ended.request_counts.canceled == len(PROMPTS)
    results = list(client.messages.batches.results(created.id))
    assert {result.result.type for result in results} == {"canceled"}
    assert slow.simulator.billing.by_tier.get("batch") is None  # nothing was answered


def test_anthropic_batch_over_the_byte_limit_is_refused_as_too_large() -> None:
    for small in running(batch_max_bytes=200):
        with pytest.raises(anthropic.APIStatusError) as raised:
            claude(small).messages.batches.create(requests=claude_requests(PROMPTS))
        assert raised.value.status_code == 413
        assert raised.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
        assert claude(small).messages.batches.list().data == []


def test_anthropic_unknown_batch_is_not_found(plain: SimulatorThread) -> None:
    with pytest.raises(anthropic.NotFoundError) as raised:
        claude(plain).messages.batches.retrieve("msgbatch_01NoSuchBatch")
    assert raised.value.status_code == 404
    assert raised.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError):
        claude(plain).messages.batches.list(limit=0)


def test_anthropic_batch_with_a_repeated_custom_id_is_refused(plain: SimulatorThread) -> None:
    requests = claude_requests({"same": "one"}) * 2
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude(plain).messages.batches.create(requests=requests)
    assert "same" in str(raised.value)


# --- OpenAI -------------------------------------------------------------------------------------


def gpt(simulator: SimulatorThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=simulator.base_url + "/v1", max_retries=0)


def chat_line(custom_id: str, prompt: str) -> str:
    body = {"model": GPT, "messages": [{"role": "user", "content": prompt}]}
    line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return json.dumps(line)


def gpt_batch(client: openai.OpenAI, lines: list[str], endpoint: Any) -> Any:
    uploaded = client.files.create(
        file=("requests.jsonl", "\n".join(lines).encode()), purpose="batch"
    )
    assert uploaded.purpose == "batch" and uploaded.bytes > 0
    return client.batches.create(
        input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h"
    )


def jsonl(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    assert file_id is not None
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def test_openai_batch_completes_with_each_answer_under_its_custom_id(
    plain: SimulatorThread,
) -> None:
    client = gpt(plain)
    lines = [chat_line(custom_id, prompt) for custom_id, prompt in PROMPTS.items()]
    created = gpt_batch(client, lines, "/v1/chat/completions")
    assert created.status == "in_progress"
    assert created.output_file_id is None
    done = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "completed")
    assert done.status == "completed"
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (8, 8)
    assert done.error_file_id is None
    output = jsonl(client, done.output_file_id)
    assert sorted(line["custom_id"] for line in output) == sorted(PROMPTS)
    assert [line["custom_id"] for line in output] != list(PROMPTS)  # shuffled
    for line in output:
        assert line["error"] is None
        assert line["response"]["status_code"] == 200
        completion = openai.types.chat.ChatCompletion.model_validate(line["response"]["body"])
        assert completion.choices[0].message.content == answer(PROMPTS[line["custom_id"]])
    assert done.output_file_id is not None
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"


def test_openai_batch_of_responses_requests(plain: SimulatorThread) -> None:
    client = gpt(plain)
    body = {"model": GPT, "input": "Name a river"}
    line = {"custom_id": "only", "method": "POST", "url": "/v1/responses", "body": body}
    bad = {"model": GPT, "input": "Name a lake", "reasoning": {"effort": "ultra"}}
    refused = {"custom_id": "refused", "method": "POST", "url": "/v1/responses", "body": bad}
    created = gpt_batch(client, [json.dumps(line), json.dumps(refused)], "/v1/responses")
    done = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "completed")
    [output] = jsonl(client, done.output_file_id)
    response = openai.types.responses.Response.model_validate(output["response"]["body"])
    assert response.output_text == answer("Name a river")
    [failed] = jsonl(client, done.error_file_id)  # refused as the request alone would be
    assert failed["custom_id"] == "refused"
    assert failed["response"]["status_code"] == 400
    assert failed["response"]["body"]["error"]["code"] == "unsupported_value"


def test_openai_batch_errored_and_expired_shares(shares: SimulatorThread) -> None:
    client = gpt(shares)
    lines = [chat_line(custom_id, prompt) for custom_id, prompt in PROMPTS.items()]
    created = gpt_batch(client, lines, "/v1/chat/completions")
    done = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status != "in_progress")
    assert done.status == "expired"  # some requests did not run within the window
    assert done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (4, 4)
    output = jsonl(client, done.output_file_id)
    failed = jsonl(client, done.error_file_id)
    assert sorted(line["custom_id"] for line in output + failed) == sorted(PROMPTS)
    assert len(output) == 4
    refused = [line for line in failed if line["response"] is not None]
    expired = [line for line in failed if line["error"] is not None]
    assert [line["response"]["status_code"] for line in refused] == [500, 500]
    assert [line["error"]["code"] for line in expired] == ["batch_expired"] * 2


def test_openai_batch_cancel(slow: SimulatorThread) -> None:
    client = gpt(slow)
    lines = [chat_line(custom_id, prompt) for custom_id, prompt in PROMPTS.items()]
    created = gpt_batch(client, lines, "/v1/chat/completions")
    assert client.batches.cancel(created.id).status == "cancelling"
    cancelled = client.batches.retrieve(created.id)
    assert cancelled.status == "cancelled"
    assert cancelled.output_file_id is None
    codes = {line["error"]["code"] for line in jsonl(client, cancelled.error_file_id)}
    assert codes == {"batch_cancelled"}


def test_openai_batch_with_a_malformed_line_fails_validation(plain: SimulatorThread) -> None:
    client = gpt(plain)
    lines = [chat_line("first", "Name a river"), '{"custom_id": "second", "method": "PO']
    failed = gpt_batch(client, lines, "/v1/chat/completions")
    assert failed.status == "failed"
    assert failed.errors is not None and failed.errors.data is not None
    [error] = failed.errors.data
    assert (error.code, error.line) == ("invalid_json_line", 2)
    assert failed.output_file_id is None and failed.error_file_id is None


def test_openai_unknown_batch_and_file_are_not_found(plain: SimulatorThread) -> None:
    client = gpt(plain)
    with pytest.raises(openai.NotFoundError) as batch:
        client.batches.retrieve("batch_nosuchbatch")
    assert "batch_nosuchbatch" in str(batch.value)
    with pytest.raises(openai.NotFoundError) as file:
        client.files.content("file-nosuchfile")
    assert "No such File object: file-nosuchfile" in str(file.value)


def test_openai_flex_is_echoed_and_a_share_refused(flex: SimulatorThread) -> None:
    client = gpt(flex)
    answered: list[str | None] = []
    refused: list[openai.RateLimitError] = []
    for number in range(4):
        try:
            completion = client.chat.completions.create(
                model=GPT,
                messages=[{"role": "user", "content": f"Name river {number}"}],
                service_tier="flex",
            )
            answered.append(completion.service_tier)
        except openai.RateLimitError as exc:
            refused.append(exc)
    assert answered == ["flex", "flex"]
    assert [exc.status_code for exc in refused] == [429, 429]
    assert all("Resource Unavailable" in exc.message for exc in refused)
    standard = client.responses.create(model=GPT, input="Name a lake")
    assert standard.service_tier == "default"  # a request not on flex is never refused
    flex_response = poll(lambda: _flex_response(client), lambda response: response is not None)
    assert flex_response is not None and flex_response.service_tier == "flex"
    assert flex.simulator.stats()["flex_refused"] >= 2


def _flex_response(client: openai.OpenAI) -> Any:
    try:
        return client.responses.create(model=GPT, input="Name a sea", service_tier="flex")
    except openai.RateLimitError:
        return None


# --- Gemini -------------------------------------------------------------------------------------


def gemini(simulator: SimulatorThread) -> genai.Client:
    options = genai_types.HttpOptions(base_url=simulator.base_url)
    return genai.Client(api_key=KEY, http_options=options)


def inline_requests(prompts: dict[str, str]) -> list[Any]:
    return [
        {
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "metadata": {"key": custom_id},
        }
        for custom_id, prompt in prompts.items()
    ]


def ended_job(client: genai.Client, name: str) -> genai_types.BatchJob:
    running_states = (
        genai_types.JobState.JOB_STATE_RUNNING,
        genai_types.JobState.JOB_STATE_PENDING,
    )
    return poll(lambda: client.batches.get(name=name), lambda job: job.state not in running_states)


def test_gemini_batch_succeeds_with_answers_inline_in_request_order(
    plain: SimulatorThread,
) -> None:
    client = gemini(plain)
    job = client.batches.create(
        model=GEMINI, src=inline_requests(PROMPTS), config={"display_name": "rivers"}
    )
    assert job.name is not None and job.name.startswith("batches/")
    assert job.state == genai_types.JobState.JOB_STATE_RUNNING
    assert job.display_name == "rivers"
    done = ended_job(client, job.name)
    assert done.state == genai_types.JobState.JOB_STATE_SUCCEEDED
    assert done.end_time is not None
    assert done.dest is not None and done.dest.inlined_responses is not None
    keys = [inline.metadata["key"] for inline in done.dest.inlined_responses if inline.metadata]
    assert keys == list(PROMPTS)  # the API keeps the requests' order
    for inline in done.dest.inlined_responses:
        assert inline.error is None and inline.response is not None and inline.metadata
        assert inline.response.text == answer(PROMPTS[inline.metadata["key"]])


def test_gemini_batch_with_expired_requests_expires_whole(shares: SimulatorThread) -> None:
    client = gemini(shares)
    job = client.batches.create(model=GEMINI, src=inline_requests(PROMPTS))
    assert job.name is not None
    done = ended_job(client, job.name)
    assert done.state == genai_types.JobState.JOB_STATE_EXPIRED
    assert done.dest is None or not done.dest.inlined_responses


def test_gemini_batch_errored_share_inline(errors: SimulatorThread) -> None:
    client = gemini(errors)
    job = client.batches.create(model=GEMINI, src=inline_requests(PROMPTS))
    assert job.name is not None
    done = ended_job(client, job.name)
    assert done.state == genai_types.JobState.JOB_STATE_SUCCEEDED
    assert done.dest is not None and done.dest.inlined_responses is not None
    inlined = done.dest.inlined_responses
    failed = [inline for inline in inlined if inline.error is not None]
    assert len(inlined) == 8 and len(failed) == 4
    assert {inline.error.code for inline in failed if inline.error} == {500}
    for inline in inlined:
        if inline.error is None:
            assert inline.response is not None and inline.metadata
            assert inline.response.text == answer(PROMPTS[inline.metadata["key"]])


def test_gemini_batch_cancel_and_unknown_batch(slow: SimulatorThread) -> None:
    client = gemini(slow)
    job = client.batches.create(model=GEMINI, src=inline_requests(PROMPTS))
    assert job.name is not None
    client.batches.cancel(name=job.name)
    assert client.batches.get(name=job.name).state == genai_types.JobState.JOB_STATE_CANCELLED
    with pytest.raises(genai_errors.ClientError) as raised:
        client.batches.get(name="batches/nosuchbatch")
    assert raised.value.code == 404


def test_gemini_flex_share_refused_with_resource_exhausted(flex: SimulatorThread) -> None:
    client = gemini(flex)
    config = genai_types.GenerateContentConfig(service_tier=genai_types.ServiceTier.FLEX)
    codes: list[int] = []
    texts: dict[int, str | None] = {}
    for number in range(4):
        try:
            reply = client.models.generate_content(
                model=GEMINI, contents=f"Name lake {number}", config=config
            )
            texts[number] = reply.text
        except genai_errors.ClientError as exc:
            codes.append(exc.code)
            assert exc.status == "RESOURCE_EXHAUSTED"
    assert codes == [429, 429]  # every other flex request, wherever the count stood
    assert len(texts) == 2
    assert all(text == answer(f"Name lake {number}") for number, text in texts.items())
    assert flex.simulator.received[-1]["serviceTier"].lower() == "flex"


# --- the command line ---------------------------------------------------------------------------


def test_grove_simulate_takes_the_batch_settings_and_refuses_bad_shares() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "grove.cli.app", "simulate", "--batch-errored", "0.7",
         "--batch-expired", "0.5"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "--batch-expired" in refused.stderr
    delay_s = 1.5
    served = subprocess.Popen(
        [sys.executable, "-m", "grove.cli.app", "simulate", "--port", "0", "--api-key", KEY,
         "--batch-delay-s", str(delay_s), "--batch-expired", "0.5", "--seed", "3"],
        stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    try:
        assert served.stdout is not None
        base_url = served.stdout.readline().split("listening on ", 1)[1].strip()
        client = anthropic.Anthropic(api_key=KEY, base_url=base_url, max_retries=0)
        started = time.monotonic()
        created = client.messages.batches.create(requests=claude_requests(PROMPTS))
        ended = poll(
            lambda: client.messages.batches.retrieve(created.id),
            lambda batch: batch.processing_status == "ended",
        )
        assert ended.processing_status == "ended"
        assert time.monotonic() - started >= delay_s
        assert (ended.request_counts.succeeded, ended.request_counts.expired) == (4, 4)
    finally:
        served.terminate()
        served.wait(timeout=10)


def test_openai_batch_files_are_deleted_and_then_not_found(plain: SimulatorThread) -> None:
    client = gpt(plain)
    lines = [chat_line(custom_id, prompt) for custom_id, prompt in PROMPTS.items()]
    created = gpt_batch(client, lines, "/v1/chat/completions")
    done = poll(lambda: client.batches.retrieve(created.id), lambda b: b.status == "completed")
    assert done.output_file_id is not None
    for file_id in (done.input_file_id, done.output_file_id):
        deleted = client.files.delete(file_id)
        assert (deleted.id, deleted.deleted) == (file_id, True)
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(file_id)


def test_gemini_batch_job_is_deleted_and_then_not_found(plain: SimulatorThread) -> None:
    client = gemini(plain)
    job = client.batches.create(model=GEMINI, src=inline_requests(PROMPTS))
    assert job.name is not None
    ended_job(client, job.name)
    client.batches.delete(name=job.name)
    with pytest.raises(genai_errors.ClientError) as raised:
        client.batches.get(name=job.name)
    assert raised.value.code == 404
