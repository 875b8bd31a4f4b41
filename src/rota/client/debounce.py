"""Debounce by key: many enqueues of one key within a window become one job, run once
after the last of them (``extend``), with the newest args (``replace``), or the first
enqueue's job once (``first``).

The option is checked here, once, for the client, the CLI and the HTTP API alike; the
enqueue scripts do the rest atomically (``protocol/lua/_debounce.lua``): every producer
of a key meets the same pending job, whatever the races between them.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from rota.protocol.bounds import JOB, check

__all__ = ["MAX_DEBOUNCE_KEY", "MODES", "Debounce", "Mode", "checked_debounce"]

#: The modes of a debounce, as the enqueue scripts take them.
MODES: Final = ("first", "extend", "replace")
#: The longest debounce key (characters), as a unique key of the HTTP API.
MAX_DEBOUNCE_KEY: Final = 1024

Mode = Literal["first", "extend", "replace"]


class Debounce(msgspec.Struct, frozen=True):
    """Debounce an enqueue by ``key``: the first enqueue of the key makes a job due
    ``window`` seconds from now (the pending job); each later enqueue of the key while
    that job is still pending (scheduled) makes none, and returns the pending job's id
    with ``created=False``:

    - ``"first"``: the pending job stays as it is (its args, its run time);
    - ``"extend"``: its run time moves to now + ``window`` (it runs once, ``window``
      after the last enqueue);
    - ``"replace"``: it takes the new args, and its run time moves as in ``extend``
      unless ``move=False``.

    A job that is due (queued), running or finished is never changed: the next enqueue
    of the key makes a new pending job. The job's record keeps its ``debounce_key`` and
    counts the enqueues it took in (``absorbed``)."""

    key: str
    window: float  # seconds
    mode: Mode = "extend"
    move: bool = True

    @property
    def window_ms(self) -> int:
        return max(1, round(self.window * 1000))


def checked_debounce(debounce: Any, *, unique: bool, scheduled: bool, linked: bool) -> Debounce:
    """``debounce`` when it is a usable :class:`Debounce` for a job that has a unique
    key, a run time of its own (``scheduled``) or parents or a group (``linked``) as
    said; else a ValueError (TypeError for a wrong kind of value) naming the option."""
    if not isinstance(debounce, Debounce):
        raise TypeError(f"debounce: give a rota.Debounce, got {type(debounce).__name__}")
    if not isinstance(debounce.key, str) or not 1 <= len(debounce.key) <= MAX_DEBOUNCE_KEY:
        raise ValueError(f"debounce_key: 1 to {MAX_DEBOUNCE_KEY} characters, got {debounce.key!r}")
    wrong = check("debounce_window", debounce.window, JOB["debounce_window"])
    if wrong is not None:
        raise ValueError(wrong)
    if debounce.mode not in MODES:
        raise ValueError(
            f"debounce_mode: must be 'first', 'extend' or 'replace', got {debounce.mode!r}"
        )
    if not isinstance(debounce.move, bool):
        raise ValueError(f"debounce_move: must be true or false, got {debounce.move!r}")
    for given, what in ((unique, "unique key"), (scheduled, "run time (delay, run_at)")):
        if given:
            raise ValueError(f"debounce: a debounced job is due a window on: give it no {what}")
    if linked:
        raise ValueError("debounce: a debounced job cannot wait for other jobs or be in a group")
    return debounce
