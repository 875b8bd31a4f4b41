"""The supervisor's stop passes over a child process that has just exited."""

from __future__ import annotations

import subprocess
import sys

import anyio

from rota.daemon import _Supervisor


async def test_stopping_passes_over_a_child_that_has_just_exited() -> None:
    """Two children that refuse their settings end at once: the first one's stop signals
    the other, which has exited but whose end the supervisor has not handled yet. The
    supervisor stops, and says so, instead of dying of the signal it could not send."""
    supervisor = _Supervisor([sys.executable, "-c", "pass"], None, 1.0)
    gone = await anyio.open_process([sys.executable, "-c", "pass"], stdin=subprocess.DEVNULL)
    await gone.wait()
    await anyio.sleep(0.05)  # its transport closes: a signal now finds no process
    supervisor.children[1] = gone
    supervisor.stop()
    assert supervisor.stopping.is_set()
