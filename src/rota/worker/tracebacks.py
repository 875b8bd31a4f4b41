"""A failed attempt's traceback as the job's log keeps it, written cheaply.

``traceback.format_exception`` costs a job that raises several times what the whole
job costs when it succeeds: on Python 3.11 it parses the source of every frame again
to place its ``^^^^`` markers, and it stats every file to check its cached lines. When a
service the jobs call is down every job fails, and a pool slowed down that much falls
behind just as its backlog grows. This writes the same text without the markers: per
frame its file, line, function and source line (from :mod:`linecache`, read once per
file), with the chained exceptions, and only the end that fits the log (the frames
nearest the error): a deep recursion costs no more than a shallow one.
"""

from __future__ import annotations

import linecache
from types import CodeType, TracebackType

__all__ = ["describe"]

_HEADER = "Traceback (most recent call last):\n"
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
#: An exception group's members shown, and how deep groups within groups are opened
#: (the traceback module's own limits).
_GROUP_WIDTH = 15
_GROUP_DEPTH = 10
#: A frame repeated more than this many times in a row is written this many times.
_REPEATS = 3
#: The frames written lately, by their code's id and instruction: the code and the text
#: (at most _FRAMES_MAX). By id: code objects compare (and hash) by value, file aside.
_FRAMES: dict[tuple[int, int], tuple[CodeType, str]] = {}
_FRAMES_MAX = 1024


def _exception_line(exc: BaseException) -> str:
    """``module.Type: message`` as the traceback module writes it, and its notes."""
    kind = type(exc)
    name = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        name = f"{kind.__module__}.{name}"
    try:
        message = str(exc)
    except Exception:
        message = "<exception str() failed>"
    text = f"{name}: {message}\n" if message else f"{name}\n"
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, (list, tuple)):
        text += "".join(f"{note}\n" for note in notes if isinstance(note, str))
    return text


def _frame(code: CodeType, at: int, lineno: int | None) -> str:
    """A frame's two lines: where, and its source line. Remembered by the instruction
    the frame was at (``tb_lasti``): a failing job fails where the one before it failed,
    and the line number of an instruction costs a walk over its code's line table (some
    microseconds for a long function: more than the rest of the frame's text)."""
    text = f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n'
    source = linecache.getline(code.co_filename, lineno).strip() if lineno else ""
    if source:
        text += f"    {source}\n"
    if len(_FRAMES) >= _FRAMES_MAX:
        _FRAMES.clear()
    _FRAMES[id(code), at] = (code, text)  # the code kept alive: its id stays its own
    return text


def _frames(tb: TracebackType | None) -> list[tuple[TracebackType, int]]:
    """The frames of a traceback, oldest first, each with how many times it repeats
    (a recursion: the same file, line and function over and over)."""
    out: list[tuple[TracebackType, int]] = []
    last = None
    while tb is not None:
        key = (id(tb.tb_frame.f_code), tb.tb_lasti)  # the same instruction: the same line
        if key == last:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((tb, 1))
            last = key
        tb = tb.tb_next
    return out


def _group(group: BaseExceptionGroup[BaseException], budget: int, depth: int) -> str:
    """The members of an exception group after its line, indented, as many as fit."""
    members = group.exceptions
    out = []
    for i, member in enumerate(members[:_GROUP_WIDTH], 1):
        text = _describe(member, budget, depth + 1).replace("\n", "\n  | ")
        out.append(f"  +---- {i} of {len(members)} ----\n  | {text}\n")
        budget -= len(out[-1])
        if budget <= 0:
            break
    return "".join(out)


def describe(exc: BaseException, budget: int) -> str:
    """The traceback of ``exc`` with its causes and contexts, as
    ``traceback.format_exception`` lays it out but without the column markers (and an
    exception group's members in a simpler frame); when it is longer than ``budget``
    characters, only (about) its last ``budget``: the caller cuts it exactly."""
    return _describe(exc, budget, 0)


def _describe(exc: BaseException, budget: int, depth: int) -> str:
    parts: list[str] = []  # back to front
    size = 0
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and size < budget:
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup) and depth < _GROUP_DEPTH:
            members = _group(current, budget - size, depth)
            parts.append(members)
            size += len(members)
        line = _exception_line(current)
        parts.append(line)
        size += len(line)
        frames = _frames(current.__traceback__)
        for tb, times in reversed(frames):
            if size >= budget:
                break
            code, at = tb.tb_frame.f_code, tb.tb_lasti
            known = _FRAMES.get((id(code), at))
            text = known[1] if known is not None else _frame(code, at, tb.tb_lineno)
            if times > _REPEATS:  # as the traceback module says it
                more = times - _REPEATS
                text = text * _REPEATS + f"  [Previous line repeated {more} more times]\n"
            elif times > 1:
                text *= times
            parts.append(text)
            size += len(text)
        if frames:
            parts.append(_HEADER)
        if current.__cause__ is not None:
            parts.append(_CAUSE)
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            parts.append(_CONTEXT)
            current = current.__context__
        else:
            current = None
    parts.reverse()
    return "".join(parts).rstrip()
