"""The service holds under abuse (a real `grove up` on the simulator): bodies over a route's
limit get 413 before they are read (a 1 GB chunked batch stops at 64 MB), text fields have
length limits, 500 open event streams leave /healthz fast and prompts working (no thread per
stream) and one more than `[service] max_streams` gets 429, `?token=` opens only the dashboard
and its streams, a foreign Host gets 400, batch results are 0600 in a 0700 directory, and the
thin client shows a model's escapes instead of obeying them.
"""

from __future__ import annotations

import json
import re
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from grove.supervisor.batch.tasks import MAX_TEXT_BYTES
from tests.integration.groves import cli_environment
from tests.integration.services import Service as RunningService
from tests.integration.services import grove_service

MAX_STREAMS = 500
ALLOWED_HOST = "grove.test"
MB = 1024 * 1024
USUAL_OPEN_FILES = 1024  # the soft limit most systems start a process with


@dataclass(frozen=True)
class Service(RunningService):
    pid: int

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def open_files_limits(self) -> tuple[int, int]:
        """The service's soft and hard limits of open files."""
        for line in Path(f"/proc/{self.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
        raise AssertionError("no open files limit")

    def status(self, field: str) -> int:
        """A number of /proc/PID/status of the service (kB for sizes)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in the service's status")

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`grove up --simulate` with a config directory that already existed, open to others,
    started with the usual soft limit of open files."""
    base = tmp_path_factory.mktemp("abuse")
    config = base / "config" / "grove"
    config.mkdir(parents=True, mode=0o755)
    config.chmod(0o755)
    settings = f'[service]\nmax_streams = {MAX_STREAMS}\nallowed_hosts = ["{ALLOWED_HOST}"]\n'
    Path(cli_environment(base)["GROVE_CONFIG_FILE"]).write_text(settings)
    with grove_service(base, open_files=USUAL_OPEN_FILES) as running:
        pid = json.loads((running.config / "service.json").read_text())["pid"]
        yield Service(running.env, running.url, running.token, running.config, pid)


def raw_request(service: Service, head: str, body: bytes = b"") -> socket.socket:
    sock = service.connect()
    sock.sendall(head.encode() + b"\r\n" + body)
    return sock


def response_head(sock: socket.socket, timeout_s: float = 30) -> str:
    """The status line and headers of the answer on `sock`, and its body when it says how
    long it is (an event stream's is left to read)."""
    sock.settimeout(timeout_s)
    seen = b""
    while b"\r\n\r\n" not in seen:
        chunk = sock.recv(65536)
        if not chunk:
            break
        seen += chunk
    head, _, body = seen.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    while length and len(body) < int(length[1]):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode(errors="replace")


def post_head(service: Service, path: str, length: int | None, **headers: str) -> str:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{service.port}"]
    lines.append(f"Authorization: Bearer {service.token}")
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return "\r\n".join(lines) + "\r\n"


def agents(service: Service) -> int:
    with service.api() as api:
        return len(api.get("/api/agents").json()["agents"])


# ----- bodies ------------------------------------------------------------------------------


def test_a_50_mb_root_is_refused_before_its_body_is_read(service: Service) -> None:
    before = agents(service)
    head = post_head(service, "/api/roots", 50 * MB, **{"Content-Type": "application/json"})
    with raw_request(service, head) as sock:  # the headers alone: not one byte of the body
        answer = response_head(sock)
    assert answer.startswith("HTTP/1.1 413"), answer
    assert "the body is over 16,777,216 bytes, the limit of /api/roots" in answer
    assert agents(service) == before


def test_a_chunked_gigabyte_batch_is_cut_off_at_its_limit(service: Service) -> None:
    """The client sends 1 MB chunks until the service stops reading: it gets 413 (or the
    connection closed) after about the batch limit, and the service's memory stays flat."""
    peak_before = service.status("VmHWM")
    chunk = b"%x\r\n" % MB + b"x" * MB + b"\r\n"
    sent = 0
    answer = ""
    with raw_request(service, post_head(service, "/api/batches", None)) as sock:
        sock.setblocking(False)
        while sent < 1024 * MB:
            readable, writable, _ = select.select([sock], [sock], [], 30)
            if readable:
                answer = response_head(sock)
                break
            if not writable:
                break  # the service stopped reading and said nothing for 30 s
            try:
                sent += sock.send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
    assert sent < 80 * MB, sent  # the 64 MB limit and what the sockets buffer
    assert answer == "" or answer.startswith("HTTP/1.1 413"), answer
    assert service.status("VmHWM") - peak_before < 150 * 1024  # kB: not the 64 MB twice over
    assert httpx.get(f"{service.url}/healthz", timeout=10).status_code == 200


OVER_TEXT = MAX_TEXT_BYTES + 1
TOO_LONG = f"Value error, is {OVER_TEXT:,} bytes; the limit is {MAX_TEXT_BYTES:,}"


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ({"model": "claude-haiku-4-5", "system": "s" * OVER_TEXT}, ["system"], TOO_LONG),
        ({"model": "m" * 201}, ["model"], None),
        ({"tools": ["read"] * 257}, ["tools"], None),
        ({"tool_files": {"big_tool.py": "#" * OVER_TEXT}}, ["tool_files", "big_tool.py"], TOO_LONG),
        ({"tool_files": {f"t{n}.py": "" for n in range(257)}}, ["tool_files"], None),
    ],
    ids=["system", "model", "tools", "tool-file", "tool-files"],
)
def test_text_fields_of_a_root_have_length_limits(
    service: Service, body: dict[str, object], where: list[str], message: str | None
) -> None:
    before = agents(service)
    with service.api() as api:
        refused = api.post("/api/roots", json=body)
    assert refused.status_code == 422, refused.text
    (problem,) = refused.json()["detail"]
    assert problem["loc"] == ["body", *where]
    assert message is None or problem["msg"] == message
    assert agents(service) == before


def test_a_prompt_fork_or_seed_over_the_text_limit_is_refused(service: Service) -> None:
    with service.api() as api:
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
        refused = api.post(f"/api/agents/{root}/prompts", json={"text": "p" * OVER_TEXT})
        forked = api.post(f"/api/agents/{root}/fork", json={"prompts": ["q" * OVER_TEXT]})
        seeded = api.post(
            f"/api/agents/{root}/seed", json={"messages": [["user", "c" * OVER_TEXT]]}
        )
        history = api.get(f"/api/agents/{root}/history").json()["messages"]
    assert [refused.status_code, forked.status_code, seeded.status_code] == [422] * 3
    assert seeded.json()["detail"][0]["msg"] == TOO_LONG
    assert history == []


# ----- streams -----------------------------------------------------------------------------


def open_stream(service: Service, path: str = "/api/events/stream") -> tuple[socket.socket, str]:
    sock = raw_request(
        service,
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
        f"Authorization: Bearer {service.token}\r\n",
    )
    return sock, response_head(sock)


def healthz_answers(service: Service, times: int = 10) -> bool:
    """Whether /healthz answered 200 each time (how fast is bench/service_streams.py's)."""
    with httpx.Client(timeout=60) as client:
        return all(client.get(f"{service.url}/healthz").status_code == 200 for _ in range(times))


def test_500_open_streams_leave_the_service_answering_and_one_more_gets_429(
    service: Service,
) -> None:
    threads_before = service.status("Threads")
    streams: list[socket.socket] = []
    try:
        for _ in range(MAX_STREAMS):
            sock, head = open_stream(service)
            streams.append(sock)
            assert head.startswith("HTTP/1.1 200"), head
        assert healthz_answers(service)
        assert service.status("Threads") - threads_before < 20  # no thread per stream
        with service.api() as api:
            root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
            answered = api.post(f"/api/agents/{root}/prompts", json={"text": "still there?"})
        assert answered.status_code == 200 and answered.json()["ok"], answered.text
        extra, head = open_stream(service)
        extra.close()
        assert head.startswith("HTTP/1.1 429"), head
        assert (
            f"{MAX_STREAMS:,} event streams are open with this token, the limit "
            "([service] max_streams); close one first"
        ) in head
        # The streams are alive: the prompt's events reached the first of them.
        streams[0].settimeout(30)
        received = b""
        while b"TurnCompleted" not in received:
            chunk = streams[0].recv(65536)
            assert chunk, received[-500:]
            received += chunk
    finally:
        for sock in streams:
            sock.close()
    deadline = time.monotonic() + 30
    while True:  # the service notices the closed streams and frees their places
        again, head = open_stream(service)
        again.close()
        if head.startswith("HTTP/1.1 200") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert head.startswith("HTTP/1.1 200"), head


def test_dashboards_may_hold_more_tree_streams_than_the_usual_soft_limit_allows(
    service: Service,
) -> None:
    """A tree stream is a connection and a store connection (about three files in all): 300
    of them are near the 1,024 open files the service was started with, which its start
    raised to the hard limit (Ray's start does), so more fit. A tree is read again when the
    event log grows: a new root reaches the last of them. (That they cost next to nothing
    while nothing happens is bench/service_streams.py's figure, the service's CPU time.)"""
    soft, hard = service.open_files_limits()
    assert soft == hard and soft > USUAL_OPEN_FILES
    streams: list[socket.socket] = []
    try:
        for _ in range(300):
            sock, head = open_stream(service, "/api/tree/stream")
            streams.append(sock)
            assert head.startswith("HTTP/1.1 200"), head
        assert healthz_answers(service)
        with service.api() as api:
            root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
            answered = api.post(f"/api/agents/{root}/prompts", json={"text": "still there?"})
        assert answered.status_code == 200 and answered.json()["ok"], answered.text
        streams[-1].settimeout(30)
        received = b""
        while root.encode() not in received:  # the last stream is alive: it shows the root
            chunk = streams[-1].recv(65536)
            assert chunk, received[-500:]
            received += chunk
    finally:
        for sock in streams:
            sock.close()


# ----- tokens, hosts, files ----------------------------------------------------------------


def test_a_query_token_opens_only_the_dashboard_and_its_streams(service: Service) -> None:
    """Every route of the API but the page and the three event streams refuses `?token=`."""
    query = {"token": service.token}
    with service.api() as api:
        paths = api.get("/openapi.json").json()["paths"]
        root = api.post("/api/roots", json={"model": "claude-haiku-4-5"}).json()["uuid"]
    routes = [(method.upper(), path) for path, methods in paths.items() for method in methods]
    routes += [("GET", "/openapi.json"), ("GET", "/docs")]
    streams = {"/api/events/stream", "/api/tree/stream", "/api/agents/{agent}/stream"}
    presence = "/api/presence/stream"  # a client's (chat, batch) held stream: header token only
    assert {path for _, path in routes if path.endswith("/stream")} == streams | {presence}
    assert len(routes) >= 30, routes
    with httpx.Client(base_url=service.url, timeout=30) as anonymous:
        for method, path in routes:
            if path in streams or path == "/healthz":
                continue
            concrete = re.sub(r"\{(agent|session)\}", root, path)
            concrete = re.sub(r"\{(batch|request)\}", "x", concrete)
            answer = anonymous.request(method, concrete, params=query)
            assert (method, path, answer.status_code) == (method, path, 401)
        assert anonymous.get("/", params=query).status_code == 200
        for path in streams:
            with anonymous.stream("GET", path.replace("{agent}", root), params=query) as stream:
                assert stream.status_code == 200, path


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 400),
        ("evil.example:{port}", 400),
        ("127.0.0.1.evil.example:{port}", 400),
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("[::1]:{port}", 200),
        (f"{ALLOWED_HOST}:{{port}}", 200),
    ],
)
def test_only_the_names_it_is_served_on_are_answered(
    service: Service, host: str, status: int
) -> None:
    with service.api() as api:
        answer = api.get("/api/agents", headers={"host": host.format(port=service.port)})
    assert answer.status_code == status, answer.text
    if status == 400:
        assert (
            "is not a name this Grove is served on; add it to [service] allowed_hosts"
            in (answer.json()["error"])
        )


def test_batch_results_are_private_even_in_a_directory_that_was_open(service: Service) -> None:
    lines = "".join(json.dumps({"id": n, "prompt": f"task {n}"}) + "\n" for n in range(2))
    with service.api() as api:
        submitted = api.post("/api/batches", params={"model": "claude-haiku-4-5"}, content=lines)
        assert submitted.status_code == 202, submitted.text
        batch = submitted.json()["id"]
        deadline = time.monotonic() + 120
        while api.get(f"/api/batches/{batch}").json()["finished"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    results = service.config / "batches" / f"{batch}.jsonl"
    assert len(results.read_text().splitlines()) == 2
    assert results.stat().st_mode & 0o777 == 0o600
    assert results.parent.stat().st_mode & 0o777 == 0o700


def test_the_thin_client_shows_escapes_instead_of_obeying_them(service: Service) -> None:
    reply = "\x1b]0;served\x07\x1b[2Jcleared \x1b]52;c;c2VydmVk\x07 end"
    run = service.grove("run", "--model", "gpt-5-mini", f"[[sim reply='{reply}']] hi")
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout
    assert "^[]0;served^G^[[2Jcleared ^[]52;c;c2VydmVk^G end" in run.stdout
    exact = service.grove("run", "--model", "gpt-5-mini", "--json", f"[[sim reply='{reply}']] hi")
    assert json.loads(exact.stdout)["text"] == reply
    history = service.grove("history", json.loads(exact.stdout)["agent"])
    assert "\x1b" not in history.stdout
    assert "^[]52;c;c2VydmVk^G end" in history.stdout
