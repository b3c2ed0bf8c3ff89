"""The Redis store over TLS (`rediss://`) against a real redis-server with a TLS port and a
certificate authority made for this test: it works with the CA, and fails clearly without it.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from supervisor.errors import StoreError
from supervisor.store import AgentRecord, open_store
from tests.conftest import redis_server

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class TlsRedis:
    port: int
    ca_file: Path


def _write_pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for 127.0.0.1: (ca, server cert, server key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "grove test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, LOOPBACK)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_bytes = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return (
        _write_pem(directory / "ca.pem", ca.public_bytes(pem)),
        _write_pem(directory / "server.pem", server.public_bytes(pem)),
        _write_pem(directory / "server.key", key_bytes),
    )


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    """A private redis-server that speaks only TLS, on a free loopback port."""
    workdir = tmp_path_factory.mktemp("redis-tls")
    ca_file, cert_file, key_file = _certificates(workdir)
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
