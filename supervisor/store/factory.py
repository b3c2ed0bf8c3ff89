"""Choosing a store from a URL: `open_store` and the default SQLite file's URL.

Accepted forms: sqlite:///relative/path, sqlite:////absolute/path, redis://..., rediss://...
(a Redis URL may carry `?namespace=NAME` to share one server between deployments, and
`socket_timeout=SECONDS` for how long a command may wait on the server, 10 by default).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from grove.supervisor.errors import NoStoreError, StoreError
from grove.supervisor.store.base import (
    DEFAULT_LEASE_POLL_S,
    DEFAULT_LEASE_TTL_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    Store,
)
from grove.supervisor.store.sqlite import SqliteStore

SQLITE_PREFIX = "sqlite:///"
ACCEPTED_FORMS = (
    "sqlite:///relative/path.sqlite3, sqlite:////absolute/path.sqlite3, "
    "redis://[user:password@]host:port/db, rediss://[user:password@]host:port/db"
)


def default_store_url() -> str:
    """sqlite:/// plus the absolute path of $XDG_DATA_HOME/grove/grove.sqlite3
    (~/.local/share when XDG_DATA_HOME is unset or not absolute)."""
    data_home = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return SQLITE_PREFIX + str(base / "grove" / "grove.sqlite3")


def store_files(url: str | None = None) -> list[str]:
    """The files a SQLite store at `url` keeps (none for Redis): what sandboxes hide."""
    target = default_store_url() if url is None else url.strip()
    if not target.startswith(SQLITE_PREFIX) or not target[len(SQLITE_PREFIX) :]:
        return []
    path = os.path.abspath(target[len(SQLITE_PREFIX) :])
    return [path, f"{path}-wal", f"{path}-shm"]


def open_store(
    url: str | None = None,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
    lease_poll_s: float = DEFAULT_LEASE_POLL_S,
    make_directory: bool = True,
) -> Store:
    """The store at `url` (None: the default SQLite file), opened and ready. Without
    `make_directory` (commands that only read) a SQLite file whose directory does not exist
    is an error, not a new store."""
    target = default_store_url() if url is None else url.strip()
    if target.startswith(SQLITE_PREFIX):
        path = target[len(SQLITE_PREFIX) :]
        if not path:
            raise StoreError(
                f"The SQLite store URL names no file; accepted forms: {ACCEPTED_FORMS}"
            )
        directory = Path(path).expanduser().parent
        if not make_directory and not directory.is_dir():
            raise NoStoreError(
                f"No Grove store at {target}: the directory {directory} does not exist"
            )
        return SqliteStore(
            path,
            max_message_bytes=max_message_bytes,
            lease_ttl_s=lease_ttl_s,
            lease_poll_s=lease_poll_s,
        )
    scheme = target.partition("://")[0].lower() if "://" in target else ""
    if scheme in ("redis", "rediss"):
        # Imported here: the Redis client (which loads OpenTelemetry's metrics SDK when it is
        # installed) costs a SQLite deployment nothing.
        from grove.supervisor.store.redis import RedisStore

        redis_url, options = _split_options(target)
        return RedisStore(
            redis_url,
            max_message_bytes=max_message_bytes,
            lease_ttl_s=lease_ttl_s,
            lease_poll_s=lease_poll_s,
            **options,
        )
    shown = f"scheme {scheme!r}" if scheme else "a URL without a known scheme"
    raise StoreError(f"Unknown store URL ({shown}); accepted forms: {ACCEPTED_FORMS}")


def exposed_store_warning(url: str | None = None) -> str | None:
    """A warning when the SQLite file at `url` can be read or written by other users (a store
    Grove creates is 0600; one made another way may not be), else None."""
    target = default_store_url() if url is None else url.strip()
    if not target.startswith(SQLITE_PREFIX):
        return None
    path = target[len(SQLITE_PREFIX) :]
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return (
        f"Warning: the store {path} can be read by other users (mode {mode:o}); "
        f"run: chmod 600 {path}"
    )


def _split_options(url: str) -> tuple[str, dict[str, Any]]:
    """The URL without the store's own query parameters (`namespace`, `socket_timeout`), and
    the RedisStore options they give (the last of each counts)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = {key: value for key, value in query if key in ("namespace", "socket_timeout")}
    rest = [(key, value) for key, value in query if key not in given]
    options: dict[str, Any] = {}
    if "namespace" in given:
        namespace = given["namespace"]
        if not namespace or ":" in namespace:
            raise StoreError("A Redis store namespace must be non-empty and contain no ':'")
        options["namespace"] = namespace
    if "socket_timeout" in given:
        try:
            seconds = float(given["socket_timeout"])
        except ValueError:
            seconds = 0.0
        if not 0 < seconds < float("inf"):
            raise StoreError("A Redis store socket_timeout must be a positive number of seconds")
        options["socket_timeout_s"] = seconds
    return urlunsplit(parts._replace(query=urlencode(rest))), options
