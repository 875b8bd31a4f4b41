"""Nothing is buffered past a limit, before login or after: a body is refused with 413 by
its declared length before a byte of it is read, and cut off while it streams in when it
has none. Against ``rota web`` in its own process, over real connections, measuring the
server's memory: a 200 MB ``POST /api/jobs`` used to be read whole (+490 MB) before its
413, and the login form buffered 200 MB of fields with no credentials at all."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.cli_helpers import rota_env
from tests.redis_server import free_port
from tests.web.test_cli_web import _start, _stop, _wait_for_event

TOKEN = "limits-token-1"
MB = 1024 * 1024

pytestmark = pytest.mark.timeout(120)


class Server:
    def __init__(self, port: int, pid: int) -> None:
        self.port, self.pid = port, pid

    def rss(self) -> int:
        """The server process's resident memory, bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def send(self, head: str, chunks: Iterable[bytes] = ()) -> tuple[int, int]:
        """Send ``head``, then ``chunks`` until the server answers or stops reading;
        the status it answered and the body bytes it took before that."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        answer = bytearray()

        def read() -> None:
            try:
                while data := sock.recv(65536):
                    answer.extend(data)
                    if b"\r\n\r\n" in answer:
                        return
            except OSError:
                return

        reader = threading.Thread(target=read, daemon=True)
        sent = 0
        try:
            sock.sendall(head.encode())
            reader.start()
            for chunk in chunks:
                if b"\r\n\r\n" in answer:
                    break
                try:
                    sock.sendall(chunk)
                except OSError:  # the server stopped reading: it answered
                    break
                sent += len(chunk)
            reader.join(30)
        finally:
            sock.close()
        status_line = bytes(answer).split(b"\r\n", 1)[0].decode()
        assert status_line.startswith("HTTP/1.1 "), bytes(answer[:200])
        return int(status_line.split()[1]), sent


@pytest.fixture
def server(tmp_path: Path, redis_url: str, namespace: str) -> Iterator[Server]:
    port = free_port()
    log = tmp_path / "web.log"
    env = rota_env(ROTA_WEB_TOKEN=TOKEN, ROTA_LOG_FORMAT="json")
    args = ["web", "--bind", f"127.0.0.1:{port}", "--redis-url", redis_url]
    proc = _start([*args, "--namespace", namespace], log, env)
    try:
        _wait_for_event(proc, log, "web started")
        yield Server(port, proc.pid)
    finally:
        assert _stop(proc) == 0


def _chunked(total: int, size: int = 256 * 1024) -> Iterator[bytes]:
    """A JSON body of ``total`` bytes in HTTP chunks, with no length declared."""
    body_start = b'{"name": "big", "args": ["'
    first = True
    left = total
    while left > 0:
        part = (body_start if first else b"") + b"x" * min(size, left)
        first = False
        left -= size
        yield f"{len(part):x}\r\n".encode() + part + b"\r\n"
    yield b"0\r\n\r\n"


def _head(path: str, *lines: str) -> str:
    headers = "".join(f"{x}\r\n" for x in lines)
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n"


def test_a_streamed_body_without_length_is_cut_off_at_the_limit(server: Server) -> None:
    before = server.rss()
    head = _head(
        "/api/jobs",
        f"Authorization: Bearer {TOKEN}",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
    )
    status, sent = server.send(head, _chunked(200 * MB))
    assert status == 413
    assert sent < 50 * MB  # it stopped reading long before the end
    assert server.rss() - before < 30 * MB  # was +490 MB


def test_a_declared_length_over_the_limit_is_refused_before_the_body(server: Server) -> None:
    head = _head(
        "/api/jobs",
        f"Authorization: Bearer {TOKEN}",
        "Content-Type: application/json",
        f"Content-Length: {10 * 1024 * MB}",
    )
    started = time.monotonic()
    status, sent = server.send(head)  # no body byte sent at all
    assert (status, sent) == (413, 0)
    assert time.monotonic() - started < 10


def test_the_login_form_takes_a_few_kib_without_credentials(server: Server) -> None:
    before = server.rss()
    boundary = "b0undary"
    field = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\n'.encode()
        + b"y" * MB
        + b"\r\n"
    )
    head = _head(
        "/login",
        "Origin: http://127.0.0.1",
        "Sec-Fetch-Site: same-origin",
        f"Content-Type: multipart/form-data; boundary={boundary}",
        "Transfer-Encoding: chunked",
    )
    chunks = (f"{len(field):x}\r\n".encode() + field + b"\r\n" for _ in range(200))
    status, sent = server.send(head, chunks)
    assert status == 413
    assert sent < 50 * MB
    assert server.rss() - before < 30 * MB
    small = _head(
        "/login",
        "Origin: http://127.0.0.1",
        "Sec-Fetch-Site: same-origin",
        "Content-Type: application/x-www-form-urlencoded",
        f"Content-Length: {64 * 1024}",
    )
    assert server.send(small)[0] == 413  # declared: refused before reading


def test_an_enqueue_within_the_limit_still_goes_through(server: Server) -> None:
    body = b'{"name": "ok", "args": [1]}'
    head = _head(
        "/api/jobs",
        f"Authorization: Bearer {TOKEN}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    )
    assert server.send(head, [body])[0] == 201
