"""The connection of a Redis store, and the one place where redis-py errors become StoreError;
the URL's password is used to connect and never appears in an error text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from grove.supervisor.errors import StoreError


class RedisConnection:
    """One redis-py client, reached once, then retried through short outages."""

    def __init__(self, url: str, socket_timeout_s: float) -> None:
        parts = urlsplit(url)
        self._where = f"{parts.scheme}://{parts.hostname or 'localhost'}:{parts.port or 6379}"
        self._secret = unquote(parts.password) if parts.password else None
        self.socket_timeout_s = socket_timeout_s
        with self.mapped("connect"):
            try:
                self.client = redis.Redis.from_url(
                    url,
                    socket_timeout=socket_timeout_s,
                    socket_connect_timeout=min(socket_timeout_s, 5.0),
                )
            except ValueError as exc:
                raise StoreError(f"Invalid Redis store URL for {self._where}") from exc
            self.client.ping()
        # Reached once: from now on a Redis that goes away (restarted, a network blip) is waited
        # for, every command sent again until it answers or about half a minute has passed.
        # Writes that matter twice are keyed (a turn's messages by its ticket): a command sent
        # again after its answer was lost stores nothing twice.
        self.client.set_retry(Retry(ExponentialWithJitterBackoff(base=0.05, cap=2.0), 20))

    @contextmanager
    def mapped(self, action: str) -> Iterator[None]:
        """The one boundary where redis-py errors become StoreError, secrets scrubbed."""
        try:
            yield
        except AuthenticationError as exc:
            raise StoreError(
                f"Redis at {self._where} refused the credentials of the store URL "
                "(wrong user name or password)"
            ) from exc
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise StoreError(
                f"Cannot reach Redis at {self._where} to {action}: {self._scrub(exc)}"
            ) from exc
        except RedisError as exc:
            raise StoreError(
                f"Redis at {self._where} failed to {action}: {self._scrub(exc)}"
            ) from exc

    def run(self, action: str, script: str, keys: Sequence[str], *args: Any) -> Any:
        """Evaluate a Lua `script` over `keys` and `args`; its reply."""
        with self.mapped(action):
            return self.client.eval(script, len(keys), *keys, *args)

    def close(self) -> None:
        with self.mapped("close"):
            self.client.close()

    def _scrub(self, exc: Exception) -> str:
        text = str(exc)
        return text.replace(self._secret, "***") if self._secret else text
