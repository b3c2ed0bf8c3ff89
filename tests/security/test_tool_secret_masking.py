"""Secrets a tool prints, a model passes as tool arguments or writes in its reply are masked
before they are stored, logged or shown: a Python tool prints one of each shape (vendor keys,
a URL's password, an Authorization header), the scripted model calls it again with them (and
forks a child whose prompt holds them) and then repeats them in a reply streamed in pieces;
none reaches the terminal, the store (with its WAL), `/api/agents/ID/history` or the event
log. The prompt carries none of them: the tool's own output scripts the next steps.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grove.actors.agent.masking import MaskedReading, masked_entry
from grove.actors.turn_result import NewEntry
from grove.providers.secrets import MASK, Secrets, StreamMask
from grove.supervisor import Grove
from tests.integration.groves import running_grove
from tests.integration.services import service_in_process


def canary(prefix: str, size: int = 12) -> str:
    return prefix + secrets.token_hex(size)


# (what the text holds, the secret in it that must never be shown)
SHAPES = {
    "anthropic": (key := canary("sk-ant-api03-"), key),
    "openai-project": (key := canary("sk-proj-"), key),
    "openai": (key := canary("sk-"), key),
    "google": (key := "AIzaSy" + secrets.token_hex(17), key),
    "github": (key := "ghp_" + secrets.token_hex(18), key),
    "github-fine-grained": (key := canary("github_pat_11A"), key),
    "slack": (key := canary("xoxb-1234-"), key),
    "aws": (key := "AKIA" + secrets.token_hex(8).upper(), key),
    "url": (f"redis://:{(key := canary('pw'))}@127.0.0.1:6379/0", key),
    "authorization": (f"Authorization: Bearer {(key := canary('tok.'))}", key),
    "bearer": (f"curl -H 'x-api-key: {(key := canary('k'))}'", key),
}
PLANTED = "\n".join(text for text, _ in SHAPES.values())
CANARIES = [key for _, key in SHAPES.values()]
TOOL_MODULE = f'''
PLANTED = {PLANTED!r}


def deploy_notes(target: str = "") -> str:
    """The deployment notes (of one target)."""
    if not target:  # the first call: the model is scripted to call again, naming a target
        args = {{"target": PLANTED.splitlines()[0] + " " + PLANTED.splitlines()[-3]}}
        fork = {{"name": "fork", "args": {{"prompt": "Deploy with " + args["target"]}}}}
        call = [{{"name": "deploy_notes", "args": args}}, fork]
        return PLANTED + "\\n[[sim calls='" + __import__("json").dumps(call) + "']]"
    # the second: the model is scripted to repeat them all in its reply
    reply = "Deployed. " + " ".join(PLANTED.splitlines())
    return "notes for " + target + '\\n[[sim reply="' + reply + '"]]'
'''


def leaked(text: str) -> list[str]:
    return [key for key in CANARIES if key in text]


@pytest.fixture(scope="module")
def grove(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grove]:
    workspace = tmp_path_factory.mktemp("workspace")
    (workspace / "notes.py").write_text(TOOL_MODULE)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workspace)
        with running_grove(tmp_path_factory.mktemp("store"), hosts=1) as grove:
            yield grove


def test_a_tools_secrets_reach_no_terminal_store_history_or_event_log(
    grove: Grove, tmp_path: Path
) -> None:
    with service_in_process(grove, tmp_path) as service:
        done = service.grove(
            "run", "-m", "gpt-6.1-terra", "--tools", "notes:deploy_notes", "--allow",
            "deploy_notes", "[[sim tool=deploy_notes step=1]] Deploy it.", cwd=Path.cwd(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        terminal = done.stdout + done.stderr
        events = service.grove("events")
        assert events.returncode == 0, events.stderr
        with service.api() as api:
            agents = api.get("/api/agents").json()
            histories = [
                api.get(f"/api/agents/{agent['uuid']}/history").text
                for agent in (agents["agents"] if isinstance(agents, dict) else agents)
            ]
    history = "".join(histories)
    assert "Deployed." in terminal and MASK in terminal, terminal  # the reply came, masked
    assert "deploy_notes" in events.stdout and MASK in history
    assert len(histories) == 2 and "Deploy with sk-***" in history  # the child's prompt
    store = Path(str(grove.settings.store).removeprefix("sqlite:///"))
    files = [store, *store.parent.glob(store.name + "-*")]
    stored = "".join(path.read_bytes().decode("utf-8", "replace") for path in files)
    assert {
        "terminal": leaked(terminal),
        "history": leaked(history),
        "events": leaked(events.stdout),
        "store": leaked(stored),
    } == {"terminal": [], "history": [], "events": [], "store": []}


@pytest.mark.parametrize(("text", "key"), SHAPES.values(), ids=SHAPES.keys())
def test_each_shape_is_masked(text: str, key: str) -> None:
    registry = Secrets()
    for before in ("before ", "long text " * 60):  # short text and long take different scans
        masked = registry.mask(f"{before}{text} after")
        assert key not in masked  # a URL loses its user info; the rest become ***
        assert masked.startswith(before) and masked.endswith(" after")


def test_exact_values_are_masked_in_tool_arguments_results_and_thinking() -> None:
    from grove.providers import secrets as loaded

    value = canary("CANARYLOADED")
    loaded.remember_secret(value)
    entry = NewEntry(
        kind="assistant",
        content=f"the key is {value}",
        data={
            "parts": [
                {"kind": "thinking", "text": value, "signature": "sig", "provider_data": {}},
                {"kind": "text", "text": f"the key is {value}"},
                {"kind": "tool_call", "call_id": "c", "name": "x", "arguments": {"a": [value]}},
                {"kind": "tool_result", "call_id": "c", "name": "x", "content": value},
            ],
            "usage": {},
        },
    )
    masked = masked_entry(entry)
    assert value not in json.dumps([masked.content, masked.data])
    thinking = masked.data["parts"][0]
    assert thinking["signature"] is None  # it vouched for the text as it was: not sent back
    plain = NewEntry(kind="assistant", content="nothing here", data={"parts": []})
    assert masked_entry(plain) is plain


@given(
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=12),
)
def test_a_key_split_across_deltas_is_masked_in_what_streams(sizes: list[int], read: int) -> None:
    """However the reply is split into deltas, and however many of them a reader takes at
    once (`read`), what it is shown holds no key: the whole text, masked."""
    text = f"thinking done. {PLANTED} and then https://u:{CANARIES[0]}@h.test/x end"
    pieces, start = [], 0
    for size in sizes * (len(text) // sum(sizes) + 1):
        if start >= len(text):
            break
        pieces.append(text[start : start + size])
        start += size
    items = [("thinking", "thinking about "), *(("text", piece) for piece in pieces)]
    reading = MaskedReading()
    shown: list[tuple[str, str]] = []
    for at in range(0, len(items), read):
        shown.extend(reading.shown(items[at : at + read], at + read >= len(items)))
    streamed = "".join(piece for _, piece in shown)
    assert leaked(streamed) == []
    assert streamed == "thinking about " + Secrets().mask(text)
    assert shown[0] == ("thinking", "thinking about ")
    assert {kind for kind, _ in shown[1:]} == {"text"}


def test_a_stream_shows_text_up_to_its_last_space_at_once() -> None:
    stream = StreamMask(Secrets())
    assert stream.feed("hello wor") == "hello "
    assert stream.feed("ld Bearer ") == "world "
    assert stream.feed("abc123def456 ok") == "Bearer *** "
    assert stream.flush() == "ok"
