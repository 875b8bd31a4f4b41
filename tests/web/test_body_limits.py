"""Nothing is buffered past a limit, before login or after: a body is refused with 413 by
its declared length before a byte of it is read, and cut off while it streams in when it
has none. Against ``rota web`` in its own process, over real connections (several at
once), measuring the server's peak memory: a 200 MB ``POST /api/jobs`` used to be read
whole (+490 MB) before its 413, and the login form buffered 200 MB of fields with no
credentials at all."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from rota.web.middleware.headers import SECURITY_HEADERS
from tests.cli_helpers import rota_env
from tests.redis_server import free_port
from tests.web.test_cli_web import _start, _stop, _wait_for_event

TOKEN = "limits-token-1"
MB = 1024 * 1024
#: What one refused request may add to the server's peak memory: the authenticated limit
#: (1.75 MiB at the default max_args_bytes) and the parser's copy of it, with room.
FEW_MB = 8 * MB

pytestmark = pytest.mark.timeout(180)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # body bytes the server took before it answered


class Server:
    def __init__(self, port: int, pid: int) -> None:
        self.port, self.pid = port, pid

    def _status(self, field: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field}")

    def reset_peak(self) -> int:
        """Start the server's peak memory over from what it holds now (Linux's
        clear_refs); that amount, bytes."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        return self._status("VmHWM")

    def peak(self) -> int:
        """The most resident memory the server held since :meth:`reset_peak`, bytes."""
        return self._status("VmHWM")

    def send(self, head: str, chunks: Iterable[bytes] = ()) -> Answer:
        """Send ``head``, then ``chunks`` until the server answers or stops reading."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        answer = bytearray()

        def read() -> None:
            try:
                while data := sock.recv(65536):
                    answer.extend(data)
                    if _complete(answer):
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
        raw_head, _, body = bytes(answer).partition(b"\r\n\r\n")
        status_line, *lines = raw_head.decode("latin-1").split("\r\n")
        assert status_line.startswith("HTTP/1.1 "), bytes(answer[:200])
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return Answer(int(status_line.split()[1]), headers, body, sent)


def _complete(answer: bytearray) -> bool:
    """Whether an answer's head and body (by its Content-Length) are all in."""
    head, found, body = bytes(answer).partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True


@pytest.fixture
def server(tmp_path: Path, redis_url: str, namespace: str) -> Iterator[Server]:
    port = free_port()
    log = tmp_path / "web.log"
    env = rota_env(ROTA_WEB_TOKEN=TOKEN, ROTA_LOG_FORMAT="json")
    args = ["web", "--bind", f"127.0.0.1:{port}", "--redis-url", redis_url]
    proc = _start([*args, "--namespace", namespace], log, env)
    try:
        _wait_for_event(proc, log, "web started")
        server = Server(port, proc.pid)
        _warm_up(server)
        yield server
    finally:
        assert _stop(proc) == 0


def _warm_up(server: Server) -> None:
    """One of each request the tests send, within the limits, so that the imports and
    caches of a first request are not counted as what a refused body cost."""
    body = b'{"name": "warm", "args": [1]}'
    assert server.send(_api("Content-Length: 29"), [body]).status == 201
    form = f"token={TOKEN}&next=%2F".encode()
    head = _login("Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(form)}")
    assert server.send(head, [form]).status == 303
    assert server.send(_login(*_multipart_lines()), _multipart(1, 100)).status == 401


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _json_chunks(total: int, size: int = 256 * 1024) -> Iterator[bytes]:
    """A JSON body of ``total`` bytes in HTTP chunks, with no length declared."""
    yield _chunk(b'{"name": "big", "args": ["')
    for _ in range(total // size):
        yield _chunk(b"x" * size)
    yield _chunk(b'"]}')
    yield b"0\r\n\r\n"


BOUNDARY = "b0undary"


def _multipart_lines() -> tuple[str, str]:
    return f"Content-Type: multipart/form-data; boundary={BOUNDARY}", "Transfer-Encoding: chunked"


def _multipart(fields: int, size: int) -> Iterator[bytes]:
    """A multipart login form of ``fields`` fields of ``size`` bytes each, chunked."""
    for i in range(fields):
        head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="f{i}"\r\n\r\n'.encode()
        yield _chunk(head + b"y" * size + b"\r\n")
    yield _chunk(f"--{BOUNDARY}--\r\n".encode())
    yield b"0\r\n\r\n"


def _head(path: str, *lines: str) -> str:
    headers = "".join(f"{x}\r\n" for x in lines)
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n"


def _api(*lines: str) -> str:
    return _head(
        "/api/jobs", f"Authorization: Bearer {TOKEN}", "Content-Type: application/json", *lines
    )


def _login(*lines: str) -> str:
    """A login form from the UI's own page (a browser says so): no credentials at all."""
    return _head("/login", "Origin: http://127.0.0.1", "Sec-Fetch-Site: same-origin", *lines)


def _refused(answer: Answer) -> None:
    """A 413 that says why, with the headers every answer of the server carries."""
    assert answer.status == 413, answer
    for name, value in SECURITY_HEADERS:
        assert answer.headers[name.decode()] == value.decode()
    assert answer.headers["cache-control"] == "no-store"
    assert b"the body is larger than this server takes here" in answer.body


def test_a_streamed_body_without_length_is_cut_off_at_the_limit(server: Server) -> None:
    before = server.reset_peak()
    answer = server.send(_api("Transfer-Encoding: chunked"), _json_chunks(50 * MB))
    assert answer.sent < 20 * MB  # it stopped reading long before the end
    assert server.peak() - before < FEW_MB  # was +125 MB for these 50 MB
    _refused(answer)


def test_many_large_bodies_at_once_each_cost_at_most_their_limit(server: Server) -> None:
    """Eight connections at once, four authenticated JSON bodies and four login forms
    of 1 MiB fields, 50 MB each without a length: each is cut off at its own limit, so
    the peak grows by at most the limits of the requests in flight."""
    before = server.reset_peak()
    with ThreadPoolExecutor(8) as pool:
        api = [
            pool.submit(server.send, _api("Transfer-Encoding: chunked"), _json_chunks(50 * MB))
            for _ in range(4)
        ]
        forms = [
            pool.submit(server.send, _login(*_multipart_lines()), _multipart(50, MB))
            for _ in range(4)
        ]
        answers = [f.result() for f in [*api, *forms]]
    assert [a.sent < 20 * MB for a in answers] == [True] * 8
    assert server.peak() - before < 4 * FEW_MB  # was +500 MB and more
    for answer in answers:
        _refused(answer)


def test_a_declared_length_over_the_limit_is_refused_before_the_body(server: Server) -> None:
    started = time.monotonic()
    answer = server.send(_api(f"Content-Length: {10 * 1024 * MB}"))  # no body byte sent
    _refused(answer)
    assert answer.sent == 0
    assert time.monotonic() - started < 10


def test_the_login_form_takes_a_few_kib_without_credentials(server: Server) -> None:
    # the form of a person logging in logs in
    form = f"token={TOKEN}&next=%2Fqueues".encode()
    head = _login("Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(form)}")
    answer = server.send(head, [form])
    assert (answer.status, answer.headers["location"]) == (303, "/queues")
    before = server.reset_peak()
    # many large multipart fields, no length: cut off at the open limit
    answer = server.send(_login(*_multipart_lines()), _multipart(200, MB))
    assert answer.sent < 20 * MB
    _refused(answer)
    # many urlencoded fields, no length, sent without Origin (a script, not a browser):
    # the security middleware's own read for the CSRF field stops there too
    fields = (_chunk(f"f{i}=".encode() + b"z" * 64 * 1024 + b"&") for i in range(800))
    plain = _head(
        "/login", "Content-Type: application/x-www-form-urlencoded", "Transfer-Encoding: chunked"
    )
    _refused(server.send(plain, [*fields, b"0\r\n\r\n"]))
    assert server.peak() - before < FEW_MB  # was +400 MB for the 200 fields
    # a declared length over the open limit: refused before reading
    declared = _login("Content-Type: application/x-www-form-urlencoded", "Content-Length: 65536")
    answer = server.send(declared)
    _refused(answer)
    assert answer.sent == 0


def test_an_enqueue_within_the_limit_still_goes_through(server: Server) -> None:
    """The largest args an enqueue takes, escaped as Python's json does (every character
    past ASCII as \\uXXXX), fit the authenticated limit, with or without a length."""
    args = json.dumps({"name": "ok", "args": ["é" * (250 * 1024)]}).encode()  # 500 KiB UTF-8
    assert len(args) > 1.4 * MB
    answer = server.send(_api(f"Content-Length: {len(args)}"), [args])
    assert answer.status == 201, answer
    chunks = [_chunk(args[i : i + 65536]) for i in range(0, len(args), 65536)]
    answer = server.send(_api("Transfer-Encoding: chunked"), [*chunks, b"0\r\n\r\n"])
    assert answer.status == 201, answer
