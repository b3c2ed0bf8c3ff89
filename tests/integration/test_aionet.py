"""Grove's HTTP clients on plain asyncio streams: TLS to a real local server (certificate
checked, hostname checked), a refused connection, and a keep-alive connection reused.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from grove.providers.aionet import AsyncioTransport
from tests.conftest import free_loopback_port
from tests.tls import certificates

RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\nhello"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signed for `localhost`: (ca, cert, key)."""
    return certificates(tmp_path_factory.mktemp("tls"), "localhost")


# Answers one request, given its head; says whether the connection goes on.
Answer = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


async def hello(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    writer.write(RESPONSE)
    await writer.drain()
    return True


async def serve(
    connections: list[int], server_tls: ssl.SSLContext | None, answer: Answer = hello
) -> asyncio.Server:
    """A tiny HTTP/1.1 server answering each request with `answer` (`hello` by default),
    counting its connections."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while await answer(await reader.readuntil(b"\r\n\r\n"), reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_tls)


@pytest.fixture
async def tls_server(
    certificate: tuple[Path, Path, Path],
) -> AsyncIterator[tuple[int, list[int]]]:
    _, cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    connections: list[int] = []
    server = await serve(connections, server_tls)
    async with server:
        yield server.sockets[0].getsockname()[1], connections


async def test_tls_with_the_certificate_checked(
    certificate: tuple[Path, Path, Path], tls_server: tuple[int, list[int]]
) -> None:
    port, connections = tls_server
    trusting = ssl.create_default_context(cafile=str(certificate[0]))
    async with httpx.AsyncClient(transport=AsyncioTransport(trusting)) as client:
        first = await client.get(f"https://localhost:{port}/")
        second = await client.get(f"https://localhost:{port}/again")
    assert (first.status_code, first.text, second.text) == (200, "hello", "hello")
    assert len(connections) == 1  # kept alive and reused


async def test_tls_refuses_an_untrusted_or_misnamed_server(
    certificate: tuple[Path, Path, Path], tls_server: tuple[int, list[int]]
) -> None:
    port, _ = tls_server
    default = ssl.create_default_context()
    async with httpx.AsyncClient(transport=AsyncioTransport(default)) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"https://localhost:{port}/")
    trusting = ssl.create_default_context(cafile=str(certificate[0]))
    async with httpx.AsyncClient(transport=AsyncioTransport(trusting)) as client:
        with pytest.raises(httpx.ConnectError, match=r"IP address mismatch"):
            await client.get(f"https://127.0.0.1:{port}/")


async def test_a_refused_connection_is_a_connect_error() -> None:
    port = free_loopback_port()
    async with httpx.AsyncClient(transport=AsyncioTransport(ssl.create_default_context())) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get(f"http://127.0.0.1:{port}/")


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    connections: list[int] = []

    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await reader.readuntil(b"\r\n\r\n")
        writer.write(RESPONSE)  # keep-alive as far as the client knows, then closed
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with (
        server,
        httpx.AsyncClient(transport=AsyncioTransport(ssl.create_default_context())) as client,
    ):
        assert (await client.get(f"http://127.0.0.1:{port}/")).text == "hello"
        await asyncio.sleep(0.1)  # the close reaches the idle pooled connection
        assert (await client.get(f"http://127.0.0.1:{port}/")).text == "hello"
    assert len(connections) == 2


async def stalling(head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """`GET /trickle` answers in ten pieces 0.05 s apart; `GET /stall` sends its head and then
    nothing until the client closes; anything else is answered `hello` at once."""
    if head.startswith(b"GET /stall "):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        await writer.drain()
        await reader.read()
        return False
    if head.startswith(b"GET /trickle "):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n")
        for _ in range(10):
            await asyncio.sleep(0.05)
            writer.write(b"x")
            await writer.drain()
        return True
    return await hello(head, reader, writer)


def plain_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=AsyncioTransport(ssl.create_default_context()))


async def test_a_read_that_outlives_its_timeout_fails_and_the_connection_is_dropped() -> None:
    """A stalled body fails with httpx's ReadTimeout (the guard only stops a hang: the limit
    is 0.2 s); the connection it stalled on is not used again."""
    connections: list[int] = []
    server = await serve(connections, None, stalling)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, plain_client() as client:
        stalled = client.get(f"{base}/stall", timeout=httpx.Timeout(5.0, read=0.2))
        with pytest.raises(httpx.ReadTimeout, match="timed out reading the response"):
            await asyncio.wait_for(stalled, 10)
        assert (await client.get(f"{base}/")).text == "hello"
    assert len(connections) == 2


async def test_reads_that_keep_coming_move_the_deadline_on() -> None:
    """Ten pieces 0.05 s apart take 0.5 s in all, each read well within 0.2 s: the reply
    arrives whole, though it takes longer than one read's limit."""
    connections: list[int] = []
    server = await serve(connections, None, stalling)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, plain_client() as client:
        reply = await client.get(f"{base}/trickle", timeout=httpx.Timeout(5.0, read=0.2))
        assert reply.text == "x" * 10


async def test_a_shorter_limit_after_a_longer_one_on_the_same_connection_holds() -> None:
    """The connection's timer was set for a 60 s read; the next read, limited to 0.2 s, still
    fails in time (the guard is far below 60 s)."""
    connections: list[int] = []
    server = await serve(connections, None, stalling)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, plain_client() as client:
        assert (await client.get(f"{base}/", timeout=httpx.Timeout(5.0, read=60))).text == "hello"
        stalled = client.get(f"{base}/stall", timeout=httpx.Timeout(5.0, read=0.2))
        with pytest.raises(httpx.ReadTimeout):
            await asyncio.wait_for(stalled, 10)
    assert len(connections) == 1  # the stall came on the kept-alive connection
