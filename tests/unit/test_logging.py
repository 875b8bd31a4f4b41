"""Log lines: JSON, one per call, written once per turn of the event loop."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest
import structlog

import rota.logging
from rota.logging import LineWriter, configure_logging


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    yield
    structlog.reset_defaults()
    for handler in [h for h in root.handlers if isinstance(h, rota.logging.StdlibBridge)]:
        root.removeHandler(handler)
    root.setLevel(level)


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_outside_a_loop_lines_are_written_at_once() -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    structlog.get_logger("t").info("hello", n=1)
    structlog.get_logger("t").debug("hidden")
    (line,) = _lines(out)
    assert (line["event"], line["n"], line["level"]) == ("hello", 1, "info")
    assert isinstance(line["timestamp"], str) and line["timestamp"].endswith("Z")


async def test_in_a_loop_lines_of_one_turn_are_written_together_in_order() -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    log = structlog.get_logger("t")
    for i in range(50):
        log.info("job", i=i)
    assert out.getvalue() == ""  # not yet: at the end of this turn of the loop
    await asyncio.sleep(0)
    assert [line["i"] for line in _lines(out)] == list(range(50))
    log.warning("later")
    await asyncio.sleep(0)
    assert _lines(out)[-1]["event"] == "later"


async def test_lines_from_threads_and_a_closed_stream_are_safe() -> None:
    out = io.StringIO()
    writer = LineWriter(out)

    def write(k: int) -> None:
        for i in range(100):
            writer.msg(f"{k}-{i}")

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.msg("from the loop")
    await asyncio.sleep(0)
    lines = out.getvalue().splitlines()
    assert len(lines) == 401 and len(set(lines)) == 401
    out.close()
    writer.msg("after close")  # dropped without an error: logging must not crash a pool
    writer.flush()  # here, not in a loop callback, so that an error would fail the test


async def test_the_job_summary_line_is_the_same_json_with_context_and_level_filter() -> None:
    out = io.StringIO()
    job_line = configure_logging("json", "warning", stream=out)
    assert job_line is not None
    structlog.contextvars.bind_contextvars(request_id="r-1")
    try:
        job_line("info", {"job_name": "a", "outcome": "complete"})
        job_line("warning", {"job_name": "a", "outcome": "retry", "reason": "error"})
    finally:
        structlog.contextvars.unbind_contextvars("request_id")
    await asyncio.sleep(0)
    (line,) = _lines(out)  # info is below the level
    assert line["event"] == "job" and line["level"] == "warning"
    assert (line["outcome"], line["reason"], line["request_id"]) == ("retry", "error", "r-1")
    # Console lines go through structlog.
    assert configure_logging("console", "info", stream=io.StringIO()) is None


async def test_standard_logging_comes_out_as_the_pools_lines() -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    structlog.contextvars.bind_contextvars(job_id="j-1")
    try:
        logging.getLogger("handler.lib").info("charged %s", "ada")
        logging.getLogger("handler.lib").debug("hidden")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("handler.lib").exception("failed")
    finally:
        structlog.contextvars.unbind_contextvars("job_id")
    await asyncio.sleep(0)
    info, error = _lines(out)
    assert (info["event"], info["level"], info["logger"], info["job_id"]) == (
        "charged ada",
        "info",
        "handler.lib",
        "j-1",
    )
    assert error["level"] == "error" and "ValueError: boom" in str(error["exception"])


async def test_the_job_line_follows_what_is_bound_and_unbound_between_lines() -> None:
    out = io.StringIO()
    job_line = configure_logging("json", "info", stream=out)
    assert job_line is not None
    job_line("info", {"job_name": "a", "n": 1})
    structlog.contextvars.bind_contextvars(tenant_first_bound_here="t-1")
    job_line("info", {"job_name": "a", "n": 2})
    structlog.contextvars.unbind_contextvars("tenant_first_bound_here")
    job_line("info", {"job_name": "a", "n": 3})
    await asyncio.sleep(0)
    lines = _lines(out)
    assert [line.get("tenant_first_bound_here") for line in lines] == [None, "t-1", None]
    assert [line["n"] for line in lines] == [1, 2, 3]


def test_timestamps_are_iso_utc_with_microseconds_and_the_current_time() -> None:
    import re
    import time
    from datetime import UTC, datetime

    stamp = rota.logging._Stamp()
    seen = []
    for _ in range(2000):
        before = time.time()
        text = stamp(None, "", {})["timestamp"]
        after = time.time()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", text), text
        when = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()
        assert before - 2e-6 <= when <= after + 2e-6  # a float holds 0.24 µs here
        seen.append(text)
    assert seen == sorted(seen)
