"""What only one backend can show: Redis credentials and reachability, SQLite files and speed,
store URLs, and fuzzing of the record decoder every read goes through.

The behaviour both stores share is tested once, for both, in test_store_contract.py.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
import uuid as uuid_module
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from grove.supervisor.errors import StoreError
from grove.supervisor.store import (
    AgentRecord,
    MessageRecord,
    NewMessage,
    RedisStore,
    SqliteStore,
    default_store_url,
    open_store,
)
from grove.supervisor.store.codec import validate_record

ACL_USER = "grove-test"
ACL_PASSWORD = "correct-horse-battery"
WRONG_PASSWORD = "Tr0ub4dor-and-3"


@pytest.fixture
def acl_user(redis_url: str) -> Iterator[str]:
    """A password-protected Redis user on the session's server; the URL's host part."""
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser(ACL_USER, enabled=True, passwords=[f"+{ACL_PASSWORD}"], keys=["*"],
                      channels=["*"], commands=["+@all"])  # fmt: skip
    try:
        yield redis_url.removeprefix("redis://")
    finally:
        admin.acl_deluser(ACL_USER)
        admin.close()


def _root() -> AgentRecord:
    return AgentRecord(uuid=str(uuid_module.uuid4()), role="root", created_at=time.time())


# ----- Redis ---------------------------------------------------------------------------------


def test_wrong_redis_password_is_one_clear_error_without_the_password(acl_user: str) -> None:
    with pytest.raises(StoreError) as refused:
        RedisStore(f"redis://{ACL_USER}:{WRONG_PASSWORD}@{acl_user}")
    text = str(refused.value)
    assert text == (
        f"Redis at redis://{acl_user.partition('/')[0]} refused the credentials of the store URL "
        "(wrong user name or password)"
    )
    chain = [refused.value, refused.value.__cause__, refused.value.__context__]
    assert all(WRONG_PASSWORD not in repr(error) for error in chain)
    store = open_store(
        f"redis://{ACL_USER}:{ACL_PASSWORD}@{acl_user}?namespace=acl-{uuid_module.uuid4().hex}"
    )
    root = _root()
    store.create_agents([root])
    assert store.get_agent(root.uuid) == root
    store.close()


def _unused_loopback_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_unreachable_redis_is_a_store_error() -> None:
    port = _unused_loopback_port()
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"Cannot reach Redis at redis://127\.0\.0\.1:{port}"):
        RedisStore(f"redis://:secret-pw@127.0.0.1:{port}/0")
    assert time.monotonic() - started < 5.0


def test_redis_namespaces_do_not_see_each_other(redis_url: str) -> None:
    first = open_store(f"{redis_url}?namespace=ns-{uuid_module.uuid4().hex}")
    second = open_store(f"{redis_url}?namespace=ns-{uuid_module.uuid4().hex}")
    root = _root()
    first.create_agents([root])
    first.append_message(root.uuid, "user", "hi")
    assert second.get_agent(root.uuid) is None
    assert second.last_message_id() == 0
    with pytest.raises(StoreError, match="namespace must be non-empty and contain no ':'"):
        open_store(f"{redis_url}?namespace=a:b")
    first.close()
    second.close()


def test_a_redis_socket_timeout_in_the_url_bounds_each_wait(redis_url: str) -> None:
    namespace = f"ns-{uuid_module.uuid4().hex}"
    store = open_store(f"{redis_url}?socket_timeout=0.5&namespace={namespace}")
    try:
        started = time.monotonic()
        # each blocking read ends before the half-second socket timeout does
        assert store.wait_events(store.last_event_id(), timeout_s=1.2) == []
        assert 1.2 <= time.monotonic() - started < 5.0
    finally:
        store.close()
    for wrong in ("0", "-1", "soon", "nan"):
        with pytest.raises(StoreError, match="socket_timeout must be a positive number"):
            open_store(f"{redis_url}?socket_timeout={wrong}")


# ----- SQLite --------------------------------------------------------------------------------


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite3"
    path.write_bytes(b"these are my notes, not a database" * 100)
    with pytest.raises(
        StoreError, match=r"SQLite store .*notes\.sqlite3: open failed: file is not a database"
    ):
        SqliteStore(path)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "grove.sqlite3"
    SqliteStore(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(StoreError, match="has schema version 99; this Grove reads version 1"):
        SqliteStore(path)


def test_sqlite_uses_wal_keeps_its_file_private_and_takes_forks_with_their_prompts(
    sqlite_store: SqliteStore, sqlite_path: Path
) -> None:
    """What a fork write costs against a bare SQLite insert is bench/store_timing.py's."""
    with sqlite3.connect(sqlite_path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()
    assert sqlite_path.stat().st_mode & 0o777 == 0o600
    root = _root()
    sqlite_store.create_agents([root])
    sqlite_store.append_message(root.uuid, "user", "shared context")
    for number in range(300):
        child = AgentRecord(
            uuid=str(uuid_module.uuid4()),
            role="child",
            parent_uuid=root.uuid,
            fork_message_id=1,
            provider="openai",
            model="gpt-5-mini",
            created_at=time.time(),
        )
        prompt = NewMessage(agent_uuid=child.uuid, kind="user", content=f"task {number}")
        sqlite_store.create_agents([child], [prompt])
    children = sqlite_store.children(root.uuid)
    assert len(children) == 300
    assert sqlite_store.conversation(children[-1].uuid)[-1].content == "task 299"


# ----- URLs ----------------------------------------------------------------------------------


def test_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///data/relative.sqlite3")
    assert isinstance(relative, SqliteStore)
    relative.close()
    assert (tmp_path / "data" / "relative.sqlite3").exists()
    absolute_path = tmp_path / "abs" / "grove.sqlite3"
    open_store(f"sqlite:///{absolute_path}").close()  # sqlite:////tmp/... : four slashes
    assert absolute_path.exists()

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_url() == f"sqlite:///{tmp_path / 'xdg' / 'grove' / 'grove.sqlite3'}"
    open_store(None).close()
    assert (tmp_path / "xdg" / "grove" / "grove.sqlite3").exists()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for unusable in ("", "relative/xdg"):
        monkeypatch.setenv("XDG_DATA_HOME", unusable)
        expected = tmp_path / "home" / ".local" / "share" / "grove" / "grove.sqlite3"
        assert default_store_url() == f"sqlite:///{expected}"

    accepted = "sqlite:///relative/path.sqlite3, sqlite:////absolute/path.sqlite3, redis://"
    for wrong, shown in (
        ("postgres://db/grove", "scheme 'postgres'"),
        ("grove.sqlite3", "a URL without a known scheme"),
        ("sqlite://grove.sqlite3", "scheme 'sqlite'"),
    ):
        with pytest.raises(
            StoreError, match=f"Unknown store URL \\({shown}\\); accepted forms: {accepted}"
        ):
            open_store(wrong)
    with pytest.raises(StoreError, match="names no file"):
        open_store("sqlite:///")


# ----- the decoder every read goes through ---------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
message_like = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values | st.integers(-5, 5),
        "agent_uuid": json_values | st.sampled_from(["a1", "", "bad:id", "x" * 70]),
        "kind": json_values | st.sampled_from(["user", "clear", "USER", ""]),
        "content": json_values,
        "data": json_values,
        "created_at": json_values,
        "ticket": json_values,
        "extra": json_values,
    },
)


@given(raw=st.binary(max_size=200) | message_like.map(lambda value: json.dumps(value).encode()))
def test_untrusted_bytes_decode_to_a_record_or_a_store_error(raw: bytes) -> None:
    try:
        record = validate_record(MessageRecord, raw, "message record")
    except StoreError as error:
        assert str(error).startswith("Corrupted message record in the store: ")
    else:
        assert record.id >= 1 and record.kind


@given(fields=message_like)
def test_untrusted_rows_decode_to_a_record_or_a_store_error(fields: dict[str, object]) -> None:
    try:
        validate_record(AgentRecord, fields, "agent record")
    except StoreError as error:
        assert "Corrupted agent record in the store: " in str(error)


def test_deeply_nested_stored_json_is_a_store_error() -> None:
    deep = '{"id": 1, "agent_uuid": "a", "kind": "user", "content": "", "created_at": 1.0, "data": '
    deep += "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(StoreError, match="Corrupted message record in the store"):
        validate_record(MessageRecord, deep, "message record")
