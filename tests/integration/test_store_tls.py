"""The Redis store over TLS (`rediss://`) against a real redis-server with a TLS port and a
certificate authority made for this test: it works with the CA, and fails clearly without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from grove.supervisor.errors import StoreError
from grove.supervisor.store import AgentRecord, open_store
from tests.conftest import redis_server
from tests.tls import certificates

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class TlsRedis:
    port: int
    ca_file: Path


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    """A private redis-server that speaks only TLS, on a free loopback port."""
    workdir = tmp_path_factory.mktemp("redis-tls")
    ca_file, cert_file, key_file = certificates(workdir, LOOPBACK)
    tls = [
        "--port", "0",
        "--tls-cert-file", str(cert_file),
        "--tls-key-file", str(key_file),
        "--tls-ca-cert-file", str(ca_file),
        "--tls-auth-clients", "no",
    ]  # fmt: skip
    with redis_server(
        workdir,
        lambda port: [*tls, "--tls-port", str(port)],
        lambda port: redis.Redis(
            host=LOOPBACK, port=port, ssl=True, ssl_ca_certs=str(ca_file), socket_timeout=1.0
        ),
    ) as port:
        yield TlsRedis(port=port, ca_file=ca_file)


def test_the_store_works_over_tls_with_the_servers_ca(tls_redis: TlsRedis) -> None:
    url = f"rediss://{LOOPBACK}:{tls_redis.port}/0?ssl_ca_certs={tls_redis.ca_file}&namespace=t"
    store = open_store(url)
    try:
        store.create_agents([AgentRecord(uuid="tls-root", role="root", created_at=1.0)])
        written = store.append_message("tls-root", "user", "over TLS")
        assert store.conversation("tls-root") == [written]
    finally:
        store.close()


def test_a_server_the_store_cannot_verify_is_a_clear_error(tls_redis: TlsRedis) -> None:
    # The system's CAs do not know this server's; the password must not show in the error.
    url = f"rediss://:hunter2-secret@{LOOPBACK}:{tls_redis.port}/0"
    with pytest.raises(StoreError) as info:
        open_store(url)
    text = str(info.value)
    assert text.startswith(f"Cannot reach Redis at rediss://{LOOPBACK}:{tls_redis.port} to connect")
    assert "certificate verify failed" in text
    assert "hunter2-secret" not in text


def test_plain_redis_against_a_tls_port_is_a_clear_error(tls_redis: TlsRedis) -> None:
    with pytest.raises(StoreError) as info:
        open_store(f"redis://{LOOPBACK}:{tls_redis.port}/0")
    assert str(info.value).startswith(
        f"Cannot reach Redis at redis://{LOOPBACK}:{tls_redis.port} to connect: "
    )
