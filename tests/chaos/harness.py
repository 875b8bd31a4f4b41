"""Worker processes, the ledger and the bookkeeping the chaos tests share."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import anyio
import redis

from rota import Client, JobSpec
from rota.protocol.shards import shard_of, shard_tags
from rota.testing.embedded import last_lines

REPO = Path(__file__).resolve().parents[2]
APP = "tests.chaos.app:pool"

#: ``CHAOS_LENGTH=full`` runs the long form of the suite; anything else the short one.
FULL = os.environ.get("CHAOS_LENGTH", "short") == "full"

#: Settings every worker process gets unless a test says otherwise.
#: The shards of the namespaces of a run (``ROTA_TEST_SHARDS``; see tests/conftest.py):
#: the workers, the producer and every read below follow it.
SHARDS = int(os.environ.get("ROTA_TEST_SHARDS", "1"))

BASE_SETTINGS: dict[str, Any] = {
    "shards": SHARDS,
    "concurrency": 10,
    "lease": 2,
    "heartbeat_interval": 0.5,
    "grace": 5,
    "keep_result": 600,
    # jobs whose handler returns None (``brief``) as long: a run on a busy host outlasts
    # the 60 s default, and the audit after it reads every record
    "keep_none": 600,
    "max_lost": 3,
    "wake_timeout": 1,
}


T = TypeVar("T")


def pick(short: T, full: T) -> T:
    return full if FULL else short


# -- the ledger ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # "start" or "done"
    job_id: str
    attempt: int
    pid: int
    t: float


class Ledger:
    """The file every attempt appends to; read it whole after (or during) a run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def entries(self) -> list[Entry]:
        out = []
        for line in self.path.read_text().splitlines():
            kind, job_id, attempt, pid, t = line.split()
            out.append(Entry(kind, job_id, int(attempt), int(pid), float(t)))
        return out

    def count(self, kind: str) -> int:
        return sum(1 for e in self.entries() if e.kind == kind)

    def by_job(self, kind: str) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = defaultdict(list)
        for e in self.entries():
            if e.kind == kind:
                out[e.job_id].append(e)
        return out


# -- worker processes ------------------------------------------------------------------


class Worker:
    """One ``rota worker`` process; its stdout and stderr go to a log file."""

    def __init__(self, url: str, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.url = url
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rota", "worker", APP, "--redis-url", url],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.pid = self.proc.pid
        self.started = time.time()
        self.killed_at: float | None = None
        self._up_at: float | None = None

    @property
    def up_at(self) -> float | None:
        """When its pool started (epoch seconds, from its log's line), from which on it
        leases, runs and reaps jobs; None before. On a busy host the imports alone can
        take seconds."""
        if self._up_at is None:
            with self.log.open("rb") as f:
                for line in f.read(16384).splitlines():
                    if b'"pool started"' in line:
                        stamp = json.loads(line)["timestamp"].replace("Z", "+00:00")
                        self._up_at = datetime.fromisoformat(stamp).timestamp()
        return self._up_at

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill9(self) -> float:
        """SIGKILL; returns the time of the kill."""
        self.killed_at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return self.killed_at

    def tail(self, lines: int = 25) -> str:
        return last_lines(self.log, lines)

    def __repr__(self) -> str:
        return f"Worker(pid={self.pid}, returncode={self.proc.poll()})"


class Fleet:
    """Every worker process a test started; ``close`` kills whatever still runs."""

    def __init__(self, tmp: Path, ledger: Ledger) -> None:
        self.tmp = tmp
        self.ledger = ledger
        self.workers: list[Worker] = []

    def start(self, url: str, namespace: str, **settings: Any) -> Worker:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        values = {**BASE_SETTINGS, "namespace": namespace, **settings}
        env.update({"ROTA_" + k.upper(): str(v) for k, v in values.items()})
        env["CHAOS_LEDGER"] = str(self.ledger.path)
        env["PYTHONUNBUFFERED"] = "1"
        log = self.tmp / f"worker-{len(self.workers)}.log"
        worker = Worker(url, env, log)
        self.workers.append(worker)
        return worker

    @property
    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def close(self) -> None:
        for w in self.workers:
            if w.alive:
                w.proc.send_signal(signal.SIGKILL)
        for w in self.workers:
            w.proc.wait()

    def tails(self, lines: int = 15) -> str:
        parts = []
        for w in self.workers:
            parts.append(f"--- worker pid {w.pid} (exit {w.proc.poll()}): {w.log.name}")
            parts.append(w.tail(lines))
        return "\n".join(parts)


# -- jobs and records ------------------------------------------------------------------


def enqueue(url: str, namespace: str, specs: Sequence[JobSpec], shards: int = SHARDS) -> list[str]:
    """Enqueue jobs with the client, in pipelined chunks; returns their ids in order."""

    async def run() -> list[str]:
        ids: list[str] = []
        async with Client.from_url(url, namespace, shards=shards) as client:
            for i in range(0, len(specs), 500):
                ids += [job.id for job in await client.enqueue_many(specs[i : i + 500])]
        return ids

    return anyio.run(run)


def enqueue_work(
    url: str, namespace: str, durations_ms: Sequence[float], shards: int = SHARDS
) -> list[str]:
    """One ``work`` job per duration."""
    specs = [JobSpec(name="work", kwargs={"ms": ms}) for ms in durations_ms]
    return enqueue(url, namespace, specs, shards)


def durations(n: int, low: float, high: float, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.uniform(low, high), 1) for _ in range(n)]


def records(r: redis.Redis, namespace: str, ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each job's hash, as text, read in pipelined chunks; the counters and token a
    record leaves out read as 0 (protocol v3), and a missing job is an empty dict."""
    ids = list(ids)
    out: dict[str, dict[str, str]] = {}
    tags = _tags(namespace)
    for i in range(0, len(ids), 1000):
        chunk = ids[i : i + 1000]
        pipe = r.pipeline(transaction=False)
        for job_id in chunk:
            pipe.hgetall("{" + tags[shard_of(job_id, len(tags))] + "}:job:" + job_id)
        for job_id, h in zip(chunk, pipe.execute(), strict=True):
            rec = {k.decode(): v.decode("utf-8", "replace") for k, v in h.items()}
            out[job_id] = {**_ZEROS, **rec} if rec else rec
    return out


_ZEROS = {"attempts": "0", "failures": "0", "lost": "0", "token": "0"}


def pool_pid(record: dict[str, str]) -> int | None:
    """The pid in the ``pool`` field (``host:pid:suffix``) of a job's hash."""
    pool = record.get("pool")
    if not pool:
        return None
    return int(pool.rsplit(":", 2)[1])


def _tags(namespace: str) -> tuple[str, ...]:
    """The hash tags of ``namespace``'s shards (a tag passed as the namespace: itself)."""
    return shard_tags(namespace, SHARDS) if "~" not in namespace else (namespace,)


def stats(r: redis.Redis, namespace: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for tag in _tags(namespace):
        raw = cast(dict[bytes, bytes], r.hgetall("{" + tag + "}:stats"))
        for k, v in raw.items():
            out[k.decode()] = out.get(k.decode(), 0) + int(v)
    return out


def processed(r: redis.Redis, namespace: str) -> int:
    return sum(int(r.hget("{" + tag + "}:stats", "processed") or 0) for tag in _tags(namespace))


def processed_or_away(r: redis.Redis, namespace: str) -> int:
    """Jobs complete so far; -1 while Redis is away or loading."""
    try:
        return processed(r, namespace)
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return -1


def leftovers(r: redis.Redis, namespace: str, names: Iterable[str]) -> dict[str, int]:
    """Sizes of the queues, running sets and job sets: all zero after a clean run."""
    sizes: dict[str, int] = {}
    names = list(names)
    for tag in _tags(namespace):
        p = "{" + tag + "}:"
        counts = [
            (f"{kind}:{n}", cmd(p + kind + ":" + n))
            for n in names
            for kind, cmd in (("queue", r.llen), ("running", r.zcard))
        ]
        counts += [(z, r.zcard(p + z)) for z in ("scheduled", "retry", "dead")]
        for key, n in counts:
            sizes[key] = sizes.get(key, 0) + int(n)
    return sizes


@dataclass
class Audit:
    """What the ledger and Redis say about a run of ``work`` jobs."""

    ids: list[str]
    recs: dict[str, dict[str, str]]
    starts: dict[str, list[Entry]]
    dones: dict[str, list[Entry]]
    lost: list[str] = field(default_factory=list)
    duplicate_runs: int = 0
    jobs_run_twice: list[str] = field(default_factory=list)
    completed_twice: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, r: redis.Redis, namespace: str, ledger: Ledger, ids: list[str]) -> Audit:
        recs = records(r, namespace, ids)
        a = cls(ids, recs, ledger.by_job("start"), ledger.by_job("done"))
        for job_id in ids:
            if recs[job_id].get("state") != "complete" or not a.dones.get(job_id):
                a.lost.append(job_id)
            n = len(a.starts.get(job_id, []))
            if n > 1:
                a.duplicate_runs += n - 1
                a.jobs_run_twice.append(job_id)
            if len(a.dones.get(job_id, [])) > 1:
                a.completed_twice.append(job_id)
        return a

    def describe(self, job_id: str) -> str:
        return json.dumps(
            {
                "id": job_id,
                "record": self.recs.get(job_id),
                "starts": [(e.pid, e.attempt, e.t) for e in self.starts.get(job_id, [])],
                "dones": [(e.pid, e.attempt, e.t) for e in self.dones.get(job_id, [])],
            }
        )

    def explain(self, job_ids: Sequence[str], fleet: Fleet) -> str:
        """What went wrong, for an assertion message: a few jobs and the workers' logs."""
        jobs = "\n".join(self.describe(j) for j in job_ids[:5])
        return f"{len(job_ids)} jobs:\n{jobs}\n{fleet.tails()}"

    def most_running(
        self, key_of: dict[str, str], killed_at: dict[int, float], held_only: bool = False
    ) -> dict[str, int]:
        """The most attempts of each fair key that ran at once, each attempt from its
        start to its done line, or to the SIGKILL of its process. ``held_only``: only
        the attempts whose finish was accepted (a lease reclaimed while its process was
        cut off from Redis no longer counts against its key's limit there)."""
        events: list[tuple[float, int, str]] = []
        for job_id in self.ids:
            dones = {(e.pid, e.attempt): e.t for e in self.dones.get(job_id, [])}
            for e in self.starts.get(job_id, []):
                if held_only and e.attempt != int(self.recs[job_id].get("attempts", 0)):
                    continue
                end = dones.get((e.pid, e.attempt), killed_at.get(e.pid))
                assert end is not None, self.describe(job_id)
                events += [(e.t, 1, key_of[job_id]), (end, -1, key_of[job_id])]
        running = dict.fromkeys(key_of.values(), 0)
        most = dict.fromkeys(key_of.values(), 0)
        for _, step, key in sorted(events, key=lambda ev: (ev[0], ev[1])):  # ends first
            running[key] += step
            most[key] = max(most[key], running[key])
        return most

    def accepted_result_ok(self, job_id: str) -> bool:
        """The stored result is the one of the attempt whose finish was accepted: the
        job's last attempt, with the token the finish retired."""
        rec = self.recs[job_id]
        pid, attempt, token = json.loads(rec["result"])
        return bool(
            attempt == int(rec["attempts"]) and -token == int(rec["token"]) and pid == pool_pid(rec)
        )


def report(name: str, figures: dict[str, Any]) -> None:
    """Print the figures of a run (``pytest -s`` shows them); with ``CHAOS_REPORT`` set,
    also append them as a JSON line to that file."""
    line = json.dumps({"scenario": name, "length": "full" if FULL else "short", **figures})
    print(line)  # noqa: T201 - the figures are the point of a chaos run
    path = os.environ.get("CHAOS_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def poll(
    check: Callable[[], bool],
    within: float,
    what: str,
    details: Callable[[], str] = lambda: "",
    every: float = 0.05,
) -> None:
    """Wait (blocking) until ``check()``; fail after ``within`` seconds with details."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within} s\n{details()}")
        time.sleep(every)


class Chaos(NamedTuple):
    """What a chaos test works with: the private Redis's URL and a client of it, a
    namespace of its own, the worker processes and the ledger they write."""

    url: str
    r: redis.Redis
    namespace: str
    fleet: Fleet
    ledger: Ledger
