"""A failed attempt's traceback as the job's log keeps it: the text of
``traceback.format_exception`` without the column markers Python 3.11 computes (they
parse each frame's source again, and cost a failing job many times a job's work), the
end kept when it is long."""

from __future__ import annotations

import traceback
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rota.worker.tracebacks import describe


class ServiceDown(Exception):
    pass


def _parse(text: str) -> int:
    return int(text)


def _load(text: str) -> int:
    try:
        return _parse(text)
    except ValueError as exc:
        raise ServiceDown(f"could not load {text!r}") from exc


def _handle(text: str) -> int:
    try:
        return _load(text)
    except ServiceDown:
        return {"a": 1}[text]  # another error while handling the first


def _deep(n: int) -> int:
    return _deep(n + 1)


def _odd(n: int) -> None:
    _even(n - 1)


def _even(n: int) -> None:
    if not n:
        raise ServiceDown("at the bottom")
    _odd(n - 1)


def _caught(call: object, *args: object) -> BaseException:
    try:
        call(*args)  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("it did not raise")


def _lines(text: str) -> list[str]:
    """The lines of a traceback, less the blank ones and those of column markers (the
    text of the log ends without trailing blanks)."""
    lines = [line.rstrip() for line in text.splitlines()]
    return [line for line in lines if line and set(line.strip()) - set("^~")]


def _without_markers(exc: BaseException) -> str:
    """What the traceback module writes, less the lines of column markers."""
    return "\n".join(_lines("".join(traceback.format_exception(exc))))


@pytest.mark.parametrize(
    "exc",
    [
        _caught(_parse, "x"),
        _caught(_load, "x"),  # a cause
        _caught(_handle, "x"),  # a context, itself with a cause
        _caught(_deep, 0),  # a recursion: its repeated frames said once
        ServiceDown("no traceback at all"),
        _caught(_parse, ""),
    ],
    ids=["plain", "cause", "context", "recursion", "untraced", "empty"],
)
def test_it_reads_as_the_traceback_module_writes_it(exc: BaseException) -> None:
    text = describe(exc, 100_000)
    assert "^^^" not in text
    assert [line for line in text.splitlines() if line.strip()] == _lines(_without_markers(exc))


def test_a_long_traceback_keeps_its_end_and_costs_no_more_than_its_budget() -> None:
    exc = _caught(_odd, 401)  # frames that alternate: nothing to fold into a repeat
    text = describe(exc, 2000)
    full = _without_markers(exc)
    assert len(full) > 10_000
    assert text.endswith("tests.unit.test_tracebacks.ServiceDown: at the bottom")
    assert 2000 <= len(text) < 2400  # the frames that fit, and one more
    assert full.endswith(text[-1500:])


def test_an_exception_group_shows_its_members() -> None:
    def many() -> None:
        raise ExceptionGroup("two failed", [ServiceDown("first"), KeyError("second")])

    text = describe(_caught(many), 2000)
    assert "ExceptionGroup: two failed (2 sub-exceptions)" in text
    assert "  | tests.unit.test_tracebacks.ServiceDown: first" in text
    assert "  | KeyError: 'second'" in text


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_exception_that_cannot_be_printed_is_still_described() -> None:
    exc = _caught(_raise, Unprintable())
    assert describe(exc, 2000).endswith("Unprintable: <exception str() failed>")


def _raise(exc: BaseException) -> None:
    raise exc


@given(st.text(max_size=300), st.lists(st.text(max_size=50), max_size=3))
def test_any_message_and_notes_read_as_the_traceback_module_writes_them(
    message: str, notes: list[str]
) -> None:
    raised = ServiceDown(message)
    for note in notes:
        raised.add_note(note)
    exc = _caught(_raise, raised)
    assert _lines(describe(exc, 100_000)) == _lines(_without_markers(exc))


def test_the_same_code_in_two_files_shows_its_own_file() -> None:
    """Code objects compare equal across files: the frames remembered are told apart."""
    source = "def fail():\n    raise ValueError('same line')\n"
    texts = []
    for filename in ("first_module.py", "second_module.py"):
        space: dict[str, Any] = {}
        exec(compile(source, filename, "exec"), space)
        texts.append(describe(_caught(space["fail"]), 2000))
    assert 'File "first_module.py", line 2, in fail' in texts[0]
    assert 'File "second_module.py", line 2, in fail' in texts[1]
