"""CPU time and resident memory of a process and its descendants, read from /proc.

A sampler thread records (time, CPU seconds) of the worker's process tree and of
redis-server every few milliseconds, so the runner can read the CPU spent between the
first job's start and the last job's finish, leaving out start-up (imports, connecting).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Load", "Sampler", "cpu_seconds", "rss_bytes", "tree", "wait_quiet"]

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its live descendants."""
    seen = [pid]
    i = 0
    while i < len(seen):
        seen.extend(c for c in _children(seen[i]) if c not in seen)
        i += 1
    return seen


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of live processes (their reaped children not included)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except OSError:
            continue
    return total


@dataclass
class Sampler:
    """Samples the CPU time of a process tree (and of one more process) in a thread."""

    root: int
    other: int | None = None
    interval: float = 0.02
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    other_cpu: list[float] = field(default_factory=list)
    peak_rss: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        pids = tree(self.root)
        self.times.append(time.time())
        self.cpu.append(cpu_seconds(pids))
        self.other_cpu.append(cpu_seconds([self.other]) if self.other else 0.0)
        self.peak_rss = max(self.peak_rss, rss_bytes(pids))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def at(self, when: float, other: bool = False) -> float:
        """CPU seconds at time ``when``, interpolated between samples."""
        series = self.other_cpu if other else self.cpu
        if not self.times:
            return 0.0
        i = bisect.bisect_left(self.times, when)
        if i <= 0:
            return series[0]
        if i >= len(self.times):
            return series[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = series[i - 1], series[i]
        if t1 <= t0:
            return c1
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0)


def _machine_busy() -> tuple[float, float]:
    """CPU seconds processes used on the whole machine (all CPUs), and the seconds the
    hypervisor stole. Interrupt time is left out: loopback traffic (the benchmark's own)
    is processed there, charged to no process."""
    with open("/proc/stat") as f:
        parts = f.readline().split()
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = (int(x) for x in parts[1:9])
    return (user + nice + system) / _TICK, steal / _TICK


def _own_cpu() -> float:
    """CPU seconds of this process, of its children it reaped, and of its live
    descendants (redis-server, a running worker)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    mine = sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
    return mine + cpu_seconds(tree(os.getpid())[1:])


@dataclass
class Load:
    """What other processes on the machine use: busy CPU minus the benchmark's own."""

    at: float = field(default_factory=time.monotonic)
    busy: float = 0.0
    steal: float = 0.0
    own: float = 0.0

    @classmethod
    def mark(cls) -> Load:
        busy, steal = _machine_busy()
        return cls(time.monotonic(), busy, steal, _own_cpu())

    def since(self, start: Load) -> tuple[float, float]:
        """(foreign, stolen) CPU since ``start``, in cores (1.0 = one CPU all the time)."""
        span = max(self.at - start.at, 1e-3)
        foreign = (self.busy - start.busy) - (self.own - start.own)
        return max(0.0, foreign) / span, (self.steal - start.steal) / span


def wait_quiet(limit: float, threshold: float = 0.2, step: float = 0.5) -> float:
    """Wait (at most ``limit`` seconds) until other processes use less than ``threshold``
    of a CPU; return the seconds waited."""
    started = time.monotonic()
    while True:
        before = Load.mark()
        time.sleep(step)
        foreign, _ = Load.mark().since(before)
        waited = time.monotonic() - started
        if foreign < threshold or waited >= limit:
            return waited
