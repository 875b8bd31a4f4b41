"""The named rows say exactly what the scripts' headers say: the same values in the
same order, so the bytes sent to Redis are those of the bare lists they replace."""

from __future__ import annotations

from typing import Any

import msgspec

from rota.protocol.calls import batch_entry, encode_outcomes, enqueue_args
from rota.protocol.job import EXTRA_FIELDS, FETCH_FIELDS, Reason
from rota.protocol.rows import (
    MAX_ERROR,
    Aborted,
    Complete,
    Dead,
    Drop,
    EnqueueRow,
    Fetched,
    Outcome,
    Requeue,
    Retry,
)
from rota.protocol.shards import shard_of, shard_of_row

JOB = Fetched("j1", "send", "tok", 1, 0, 0, b"[]", 0, None, None)


def test_each_outcome_has_its_own_fields() -> None:
    done = Complete.of(JOB, '{"a":1}', 3_600_000)
    assert (done.result, done.keep_ms, done.keep_none_ms) == ('{"a":1}', "3600000", "")
    assert Complete.of(JOB, "", 0, 5).keep_none_ms == "5"
    again = Retry.of(JOB, 123, "boom", Reason.TIMEOUT)
    assert (again.due, again.error, again.reason) == (123, "boom", Reason.TIMEOUT)
    dead = Dead.of(JOB, Reason.UNKNOWN_JOB, "no")
    assert (dead.id, dead.name, dead.token) == ("j1", "send", "tok")
    assert (dead.reason, dead.error, dead.kind) == (Reason.UNKNOWN_JOB, "no", "dead")
    assert Drop.of(JOB, Reason.ERROR, "x").kind == "drop"
    aborted = Aborted.of(JOB, 60_000, "stop")
    assert (aborted.keep_ms, aborted.message, aborted.error) == (60_000, "stop", "stop")
    assert Requeue.of(JOB).kind == "requeue"


def test_the_finish_call_writes_each_outcome_as_the_scripts_seven_strings() -> None:
    outcomes: list[Outcome] = [
        Complete.of(JOB, '{"a":1}', 3_600_000),
        Retry.of(JOB, 123, "boom", Reason.TIMEOUT),
        Dead.of(JOB, Reason.UNKNOWN_JOB, "no"),
        Drop.of(JOB, Reason.ERROR, "x"),
        Aborted.of(JOB, 60_000, "stop"),
        Requeue.of(JOB),
    ]
    flat = msgspec.msgpack.decode(encode_outcomes(outcomes))
    assert [flat[i + 3 : i + 7] for i in range(0, len(flat), 7)] == [
        ["complete", '{"a":1}', "3600000", ""],
        ["retry", "123", "boom", "timeout"],
        ["dead", "", "no", "unknown_job"],
        ["drop", "", "x", "error"],
        ["aborted", "60000", "stop", ""],
        ["requeue", "", "", ""],
    ]
    assert flat[:3] == ["j1", "send", "tok"] and len(flat) == 7 * len(outcomes)
    assert all(type(v) is str for v in flat)  # not the enum nor ints: text on the wire


def test_an_outcome_reads_by_name() -> None:
    long = Dead.of(JOB, Reason.ERROR, "e" * (MAX_ERROR + 10))
    assert len(long.error) == MAX_ERROR and long.reason == "error" and long.failed
    assert not Requeue.of(JOB).failed and not Complete.of(JOB, "", 0).failed
    assert Complete.of(JOB, "1", 1000).keeps_result
    assert not Complete.of(JOB, "1", 0).keeps_result
    assert not Complete.of(JOB, "", 1000).keeps_result


def _row(**changes: Any) -> EnqueueRow:
    row = EnqueueRow("id1", "send", b'{"to":1}', 10, 0, "", 86_400_000, "", "", "", "", "")
    return row._replace(**changes)


def test_the_enqueue_script_takes_only_the_arguments_in_use() -> None:
    assert enqueue_args(_row()) == ["id1", "send", b'{"to":1}', 10]
    assert enqueue_args(_row(run_at=20))[4:] == [20]
    assert enqueue_args(_row(unique="u"))[4:] == [0, "u", 86_400_000]
    assert enqueue_args(_row(timeout=1.5))[4:] == [0, "", 86_400_000, "", 1.5]
    assert enqueue_args(_row(after="p1 p2"))[9:] == ["p1 p2"]
    traced = enqueue_args(_row(traceparent="00-a-b-01", tracestate="k=v"))
    assert traced[9:] == ["", "00-a-b-01", "k=v"]
    assert enqueue_args(_row(expires=5))[9:] == ["", "", "", 5]
    debounced = _row(debounce_key="k", debounce_ms=1000, debounce_mode="replace")
    assert enqueue_args(debounced)[9:] == ["", "", "", "", "", "k", 1000, "replace", "1"]
    kept = enqueue_args(debounced._replace(debounce_move=False, expires=5))
    assert kept[12:] == [5, "", "k", 1000, "replace", "0"]
    keyed = enqueue_args(_row(fair="t1"))
    assert keyed[9:] == ["", "", "", "", "t1"]
    both = enqueue_args(debounced._replace(fair="t1"))
    assert both[13:] == ["t1", "k", 1000, "replace", "1"]


def test_a_batch_entry_is_strings_and_its_tail_only_when_used() -> None:
    assert batch_entry(_row(max_fails=3, timeout=1.5)) == [
        "id1", "send", '{"to":1}', "0", "", "86400000", "3", "1.5",
    ]  # fmt: skip
    assert batch_entry(_row(group="g", group_size=7))[8:] == ["", "g", "", "", "", "7"]
    assert batch_entry(_row(waits_group="g"))[8:] == ["", "", "g"]
    assert batch_entry(_row(traceparent="t"))[8:] == ["", "", "", "t", ""]
    assert batch_entry(_row(expires=5))[8:] == ["", "", "", "", "", "0", "5"]
    debounced = _row(debounce_key="k", debounce_ms=1000, debounce_mode="first")
    tail = ["k", "1000", "first", "1"]
    assert batch_entry(debounced)[8:] == ["", "", "", "", "", "0", "", "", *tail]
    assert batch_entry(debounced._replace(expires=5))[14:] == ["5", "", *tail]
    assert batch_entry(debounced._replace(fair="t1"))[14:] == ["", "t1", *tail]
    assert batch_entry(_row(fair="t1"))[8:] == ["", "", "", "", "", "0", "", "t1"]
    assert batch_entry(debounced._replace(traceparent="t"))[8:] == [
        "", "", "", "t", "", "0", "", "", *tail,
    ]  # fmt: skip


def test_a_debounced_row_goes_to_the_shard_of_its_key() -> None:
    row = _row(debounce_key="doc:7", debounce_ms=1000, debounce_mode="extend")
    assert {shard_of_row(row._replace(id=f"id{i}"), 8) for i in range(50)} == {shard_of("doc:7", 8)}


def test_a_fetched_row_is_the_id_then_fetch_fields_and_the_extra_fields_when_set() -> None:
    extra = [b"", b"nan", b"1", b"00-t-s-01", b"k=v", b"1700000000000"]
    flat = [b"j1", b"send", b"tok", b"2", b"1", b"0", b"[]", b"5", b"1", *extra]
    plain = [b"j2", b"send", b"tok", b"1", b"", b"", b"[1]", b"6", b""]
    assert len(plain) == 1 + len(FETCH_FIELDS) and len(extra) == len(EXTRA_FIELDS)
    job, other = Fetched.parse(flat + plain)
    assert (job.id, job.attempts, job.failures, job.enqueued_at) == ("j1", 2, 1, 5)
    assert job.max_fails is None and job.timeout is None and job.deps
    assert job.trace == ("00-t-s-01", "k=v") and job.expires == 1_700_000_000_000
    assert (other.id, other.attempts, other.args, other.enqueued_at) == ("j2", 1, b"[1]", 6)
    assert other.max_fails is None and other.timeout is None and not other.deps
    assert other.trace == ("", "") and other.expires == 0
