"""The lines of failed attempts' logs travel apart from the seven fields of each outcome."""

from __future__ import annotations

from typing import Any

import msgspec

from rota.protocol.calls import encode_outcomes
from rota.protocol.job import Reason
from rota.protocol.rows import Aborted, Complete, Dead, Fetched, Outcome, Requeue, Retry

JOB = Fetched("j1", "send", "tok", 1, 0, 0, b"[]", 0, None, None)


def test_the_lines_of_the_outcomes_go_apart_from_their_seven_fields() -> None:
    logs: list[Any] = []
    outcomes: list[Outcome] = [
        Complete.of(JOB, "", 0),
        Retry.of(JOB, 1, "boom", Reason.ERROR)._replace(log="attempt 1 failed"),
        Dead.of(JOB, Reason.ERROR, "x"),  # no line
        Aborted.of(JOB, 0, "stop"),
        Requeue.of(JOB),
    ]
    flat = msgspec.msgpack.decode(encode_outcomes(outcomes, logs))
    assert len(flat) == 7 * len(outcomes)  # the rows as they were
    assert logs == ["j1", "attempt 1 failed"]
    assert encode_outcomes(outcomes) == msgspec.msgpack.encode(flat)  # none asked for
