"""A private redis-server under valgrind's callgrind: the instructions it runs per phase.

Redis CPU time on a shared or virtual machine moves by tens of percent from one run to
the next; the instructions the server runs for the same work hardly move, so they show
what a change to the scripts saved. Kernel time (socket reads and writes) is not in
them. The server runs some 50 times slower: measure a few thousand jobs, not more.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from bench.redis_server import RedisServer

__all__ = ["CallgrindRedis"]


class CallgrindRedis:
    #: How long a client of this server waits for a reply (s). A script of a few
    #: thousand steps, or a pipeline of a hundred calls answered together, takes seconds
    #: under valgrind, and many times that when other processes share the CPU: redis-py's
    #: default of 5 s would cut it short.
    SOCKET_TIMEOUT = 300.0

    def __init__(self) -> None:
        for tool in ("valgrind", "callgrind_control"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} not found on PATH (Debian: apt-get install valgrind)")
        self._tmp = tempfile.TemporaryDirectory(prefix="rota-bench-callgrind-")
        self._out = Path(self._tmp.name) / "callgrind.out"
        self.server = RedisServer(
            wrap=["valgrind", "--tool=callgrind", f"--callgrind-out-file={self._out}"],
            ready_within=60.0,
        )

    @property
    def url(self) -> str:
        return self.server.url

    def mark(self, label: str) -> None:
        """End a phase: what the server ran since the last mark is kept under ``label``."""
        subprocess.run(
            ["callgrind_control", f"--dump={label}", str(self.server.pid)],
            capture_output=True,
            check=True,
        )

    def instructions(self, label: str) -> int:
        """What the server ran in the phase that ended with ``mark(label)``."""
        for path in self._out.parent.glob(self._out.name + ".*"):
            text = path.read_text(errors="replace")
            if re.search(rf"^desc: Trigger: dump {re.escape(label)}$", text, re.M):
                found = re.search(r"^summary: (\d+)$", text, re.M)
                if found:
                    return int(found[1])
        raise LookupError(f"no callgrind dump named {label!r}")

    def stop(self) -> None:
        self.server.close()
        self._tmp.cleanup()

    def __enter__(self) -> CallgrindRedis:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
