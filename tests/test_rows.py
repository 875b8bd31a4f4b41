"""The named rows say exactly what the scripts' headers say: the same values in the
same order, so the bytes sent to Redis are those of the bare lists they replace."""

from __future__ import annotations

from typing import Any

import msgspec

from rota.protocol.job import EXTRA_FIELDS, FETCH_FIELDS, Reason
from rota.protocol.rows import MAX_ERROR, EnqueueRow, Fetched, Outcome

JOB = Fetched("j1", "send", "tok", 1, 0, 0, b"[]", 0, None, None)


def test_each_outcome_is_the_finish_scripts_seven_strings() -> None:
    assert Outcome.complete(JOB, '{"a":1}', 3_600_000) == (
        "j1", "send", "tok", "complete", '{"a":1}', "3600000", "",
    )  # fmt: skip
    assert Outcome.retry(JOB, 123, "boom", Reason.TIMEOUT) == (
        "j1", "send", "tok", "retry", "123", "boom", "timeout",
    )  # fmt: skip
    assert Outcome.dead(JOB, Reason.UNKNOWN_JOB, "no") == (
        "j1", "send", "tok", "dead", "", "no", "unknown_job",
    )  # fmt: skip
    assert Outcome.drop(JOB, Reason.ERROR, "x")[3:] == ("drop", "", "x", "error")
    assert Outcome.aborted(JOB, 60_000, "stop")[3:] == ("aborted", "60000", "stop", "")
    assert Outcome.requeue(JOB)[3:] == ("requeue", "", "", "")
    outcome = Outcome.retry(JOB, 1, "e", Reason.RETRY)
    assert msgspec.msgpack.encode([outcome]) == msgspec.msgpack.encode([list(outcome)])
    assert all(type(v) is str for v in outcome)  # not the enum: plain text on the wire


def test_an_outcome_reads_by_name() -> None:
    long = Outcome.dead(JOB, Reason.ERROR, "e" * (MAX_ERROR + 10))
    assert len(long.error) == MAX_ERROR and long.reason == "error" and long.failed
    assert not Outcome.requeue(JOB).failed and not Outcome.complete(JOB, "", 0).failed
    assert Outcome.complete(JOB, "1", 1000).keeps_result
    assert not Outcome.complete(JOB, "1", 0).keeps_result
    assert not Outcome.complete(JOB, "", 1000).keeps_result


def _row(**changes: Any) -> EnqueueRow:
    row = EnqueueRow("id1", "send", b'{"to":1}', 10, 0, "", 86_400_000, "", "", "", "", "")
    return row._replace(**changes)


def test_the_enqueue_script_takes_only_the_arguments_in_use() -> None:
    assert _row().script_args() == ["id1", "send", b'{"to":1}', 10]
    assert _row(run_at=20).script_args()[4:] == [20]
    assert _row(unique="u").script_args()[4:] == [0, "u", 86_400_000]
    assert _row(timeout=1.5).script_args()[4:] == [0, "", 86_400_000, "", 1.5]
    assert _row(after="p1 p2").script_args()[9:] == ["p1 p2"]
    traced = _row(traceparent="00-a-b-01", tracestate="k=v").script_args()
    assert traced[9:] == ["", "00-a-b-01", "k=v"]


def test_a_batch_entry_is_strings_and_its_tail_only_when_used() -> None:
    assert _row(max_fails=3, timeout=1.5).batch_entry() == [
        "id1", "send", '{"to":1}', "0", "", "86400000", "3", "1.5",
    ]  # fmt: skip
    assert _row(group="g", group_size=7).batch_entry()[8:] == ["", "g", "", "", "", "7"]
    assert _row(waits_group="g").batch_entry()[8:] == ["", "", "g"]
    assert _row(traceparent="t").batch_entry()[8:] == ["", "", "", "t", ""]


def test_a_fetched_row_is_the_id_then_fetch_fields_and_the_extra_fields_when_set() -> None:
    extra = [b"", b"nan", b"1", b"00-t-s-01", b"k=v"]
    flat = [b"j1", b"send", b"tok", b"2", b"1", b"0", b"[]", b"5", b"1", *extra]
    plain = [b"j2", b"send", b"tok", b"1", b"", b"", b"[1]", b"6", b""]
    assert len(plain) == 1 + len(FETCH_FIELDS) and len(extra) == len(EXTRA_FIELDS)
    job, other = Fetched.parse(flat + plain)
    assert (job.id, job.attempts, job.failures, job.enqueued_at) == ("j1", 2, 1, 5)
    assert job.max_fails is None and job.timeout is None and job.deps
    assert job.trace == ("00-t-s-01", "k=v")
    assert (other.id, other.attempts, other.args, other.enqueued_at) == ("j2", 1, b"[1]", 6)
    assert other.max_fails is None and other.timeout is None and not other.deps
    assert other.trace == ("", "")
