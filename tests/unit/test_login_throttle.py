"""The login throttle: the wait doubles, a success clears it, and a reservation taken back
leaves the count."""

from __future__ import annotations

from rota.web.middleware.throttle import Throttle


def test_the_wait_doubles_and_a_success_clears_it() -> None:
    now = [1000.0]
    throttle = Throttle(clock=lambda: now[0])
    waits = []
    for _ in range(9):
        throttle.failed("a")
        waits.append(throttle.wait("a"))
    assert waits == [0, 0, 0, 0, 1, 2, 4, 8, 16]
    for _ in range(20):
        throttle.failed("a")
    assert throttle.wait("a") == Throttle.MAX_WAIT
    now[0] += Throttle.MAX_WAIT
    assert throttle.wait("a") == 0
    throttle.succeeded("a")
    throttle.failed("a")
    assert throttle.wait("a") == 0


def test_a_taken_back_reservation_leaves_the_count_and_a_count_is_forgotten() -> None:
    now = [1000.0]
    throttle = Throttle(clock=lambda: now[0])
    for _ in range(Throttle.FREE):
        throttle.failed("a")
    throttle.failed("a")  # reserved for a read-only login, which was right
    throttle.taken_back("a")
    assert throttle.wait("a") == 0
    throttle.failed("a")  # the fifth failure: the wait begins
    assert throttle.wait("a") == 1
    now[0] += 1 + Throttle.FORGET - 0.5
    throttle.failed("a")  # not forgotten yet: the sixth
    assert throttle.wait("a") == 2
    now[0] += 2 + Throttle.FORGET
    throttle.failed("a")  # forgotten: counted from one again
    assert throttle.wait("a") == 0
    throttle.taken_back("a")
    assert throttle.wait("a") == 0 and throttle._failures == {}
