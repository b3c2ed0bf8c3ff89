"""Certificates for tests that speak TLS on loopback, made with `cryptography` (no openssl
command needed): a certificate authority and a server certificate it signed for one name."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _write_pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _subject_name(server_name: str) -> x509.GeneralName:
    """An IP address entry for an address, a DNS entry for a host name."""
    try:
        return x509.IPAddress(ipaddress.ip_address(server_name))
    except ValueError:
        return x509.DNSName(server_name)


def certificates(directory: Path, server_name: str) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for `server_name` (an IP address or a host
    name), valid for an hour, written to `directory`: (ca, server cert, server key)."""
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
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([_subject_name(server_name)]), critical=False)
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
