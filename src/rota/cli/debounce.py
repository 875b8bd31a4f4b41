"""The debounce options of ``rota enqueue``: four flags that become one
:class:`~rota.Debounce` (checked as the client checks it, see
:mod:`rota.client.debounce`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from rota.cli.common import ExitError, parse_duration
from rota.client.debounce import MODES, Debounce, Mode

__all__ = ["debounce_options"]

T = TypeVar("T")


def debounce_options(f: Callable[..., T]) -> Callable[..., T]:
    """--debounce-key, --debounce-window, --debounce-mode and --debounce-keep-time, handed
    to ``f`` as one ``debounce`` argument (None without a key)."""

    @functools.wraps(f)
    def command(
        *args: Any,
        debounce_key: str | None,
        debounce_window: str | None,
        debounce_mode: str,
        debounce_keep_time: bool,
        **kwargs: Any,
    ) -> T:
        debounce = None
        if debounce_key is not None or debounce_window is not None:
            if debounce_key is None or debounce_window is None:
                raise ExitError("--debounce-key and --debounce-window go together", code=2)
            window = parse_duration(debounce_window, "--debounce-window")
            mode = cast(Mode, debounce_mode)  # one of MODES: click.Choice
            debounce = Debounce(debounce_key, window, mode, move=not debounce_keep_time)
        return f(*args, debounce=debounce, **kwargs)

    for option in reversed(
        [
            click.option(
                "--debounce-key",
                metavar="KEY",
                help="Enqueues of this key within the window become one job (with"
                " --debounce-window).",
            ),
            click.option(
                "--debounce-window",
                metavar="DURATION",
                help="The debounce window: the job is due this long after (1ms .. 30d).",
            ),
            click.option(
                "--debounce-mode",
                type=click.Choice(MODES),
                default="extend",
                show_default=True,
                help="first: keep the pending job; extend: move its run time to now +"
                " window; replace: give it these args (and move its run time).",
            ),
            click.option(
                "--debounce-keep-time",
                is_flag=True,
                help="With --debounce-mode replace: keep the pending job's run time.",
            ),
        ]
    ):
        command = option(command)
    return command
