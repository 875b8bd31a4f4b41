"""The benchmark runner: every system, the same workloads, one private Redis.

``python -m bench`` (``make bench``) runs in the project's virtual environment. It starts
a private redis-server, then for each workload and each repetition runs every system in
turn (A, B, C, ... then again), each run on a flushed Redis with a fresh worker process:
rota's from the project's environment, the others' from ``bench/.venv-peers``. Producers
are separate processes in the same environment as their system's worker. The runner only
measures: Redis INFO, /proc of the worker's process tree, and the timing lines the jobs
write (see ``bench/systems/common.py``).

Writes ``results.json``, ``results.md`` and ``results.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench import positive_int, report
from bench.procstat import Load, Sampler, cpu_seconds, tree, wait_quiet
from bench.redis_server import RedisServer

__all__ = ["Config", "main"]

REPO = Path(__file__).resolve().parents[1]
PEERS_VENV = REPO / "bench" / ".venv-peers"
PEERS_BIN = PEERS_VENV / "bin"
PROJECT_PY = Path(sys.executable)
PEERS = ("arq", "saq", "streaq", "taskiq", "dramatiq")
SMOKE_PEER = "saq"
PRIO_JOBS = "p8,p4,p2,p1"
LATENCY_CONCURRENCY = 10
# The group workload's pool (see bench/workflow_cost.py for why not 100).
GROUP_CONCURRENCY = 50
# Other processes on the machine (in cores) above which a run is repeated once.
NOISY = 0.3
# What the runner itself sends to Redis, left out of the command counts.
_OWN_COMMANDS = frozenset(
    {"info", "flushall", "monitor", "ping", "config|resetstat", "config|set"}
    | {"slowlog|get", "slowlog|reset"}
)
# SLOWLOG keeps the calls that ran at least this long (µs); the slowest of them is the
# figure, since one call blocks every other client of the shard while it runs.
SLOW_US = 100


@dataclass(frozen=True)
class Config:
    noop_n: int = 20_000
    sleep_n: int = 2_000
    enqueue_n: int = 20_000
    latency_n: int = 500
    latency_rate: float = 200.0
    group_n: int = 10_000
    idle_seconds: float = 10.0
    settle_seconds: float = 1.0
    reps: int = 3
    drain_cap: float = 30.0
    run_timeout: float = 240.0
    quiet_wait: float = 20.0  # most seconds to wait for a quiet machine before a run
    quiet_budget: float = 300.0  # most seconds of such waits in all
    retry_until: float = 840.0  # repeat noisy runs only this long into the benchmark
    systems: tuple[str, ...] = ("rota", *PEERS)
    scale: bool = True
    profile: bool = True
    smoke: bool = False


SMOKE = Config(
    noop_n=400,
    sleep_n=200,
    enqueue_n=400,
    latency_n=40,
    group_n=400,
    idle_seconds=0.5,
    settle_seconds=0.2,
    reps=1,
    drain_cap=20.0,
    run_timeout=30.0,
    quiet_wait=0.0,
    quiet_budget=0.0,
    retry_until=0.0,
    systems=("rota", SMOKE_PEER),
    scale=True,
    profile=False,
    smoke=True,
)


# -- systems ----------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """One benchmarked system, or a variant of rota (``--processes 2``, priorities)."""

    key: str
    app: str
    python: Path
    batch_api: str | None
    no_batch_reason: str = ""
    processes: int = 1
    prio: bool = False

    def worker_command(self, concurrency: int, url: str) -> list[str]:
        c = str(concurrency)
        if self.app == "rota":
            target = "bench.systems.rota_app:" + ("prio_pool" if self.prio else "pool")
            command = [str(self.python), "-m", "rota", "worker", target, "-c", c]
            command += ["--redis-url", url, "--processes", str(self.processes)]
            return command
        b = PEERS_BIN
        return {
            "arq": [str(b / "arq"), "bench.systems.arq_app.WorkerSettings"],
            "saq": [str(b / "saq"), "bench.systems.saq_app.settings"],
            "streaq": [str(b / "streaq"), "run", "bench.systems.streaq_app:worker"],
            "taskiq": [
                str(b / "taskiq"), "worker", "bench.systems.taskiq_app:broker",
                "--workers", "1", "--max-async-tasks", c,
            ],
            "dramatiq": [
                str(b / "dramatiq"), "bench.systems.dramatiq_app",
                "--processes", "1", "--threads", c,
            ],
        }[self.app]  # fmt: skip


def _systems() -> dict[str, System]:
    peers_py = PEERS_BIN / "python"
    return {
        "rota": System("rota", "rota", PROJECT_PY, "enqueue_many"),
        "rota --processes 2": System("rota --processes 2", "rota", PROJECT_PY, None, processes=2),
        "rota priorities": System("rota priorities", "rota", PROJECT_PY, None, prio=True),
        "arq": System("arq", "arq", peers_py, None, "no batch enqueue API"),
        "saq": System("saq", "saq", peers_py, None, "no batch enqueue (map() also waits)"),
        "streaq": System("streaq", "streaq", peers_py, "enqueue_many"),
        "taskiq": System("taskiq", "taskiq", peers_py, None, "no batch kick API"),
        "dramatiq": System("dramatiq", "dramatiq", peers_py, None, "group() sends one by one"),
    }


def peers_available() -> bool:
    return (PEERS_BIN / "python").exists()


def _versions(systems: list[str]) -> dict[str, str]:
    names = {"rota": "rota", "arq": "arq", "saq": "saq", "streaq": "streaq"}
    names |= {"taskiq": "taskiq", "dramatiq": "dramatiq", "taskiq-redis": "taskiq-redis"}
    out: dict[str, str] = {}
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    pythons = [PROJECT_PY] + ([PEERS_BIN / "python"] if any(s in PEERS for s in systems) else [])
    for py in pythons:
        done = subprocess.run(
            [str(py), "-c", code, *names.values(), "redis", "coredis", "uvloop"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            found = json.loads(done.stdout)
            for key, value in found.items():
                label = key if py == PROJECT_PY or key not in out else key + " (peers)"
                if py != PROJECT_PY and key in ("redis", "uvloop"):
                    label = key + " (peers)"
                out.setdefault(label, value)
    return out


# -- Redis measurements -----------------------------------------------------------------


@dataclass
class Snapshot:
    commands: int
    reads: int
    cpu: float
    memory: int
    runner_calls: int
    slowest_us: int  # the longest command or script call since the previous snapshot


class Bench:
    def __init__(self, server: RedisServer, cfg: Config, work: Path) -> None:
        self.server = server
        self.cfg = cfg
        self.work = work
        self.r = redis.Redis(host="127.0.0.1", port=server.port)
        self.calls = 0  # commands this runner sent on self.r
        self.systems = _systems()
        self.seq = 0
        # rota runs from a copy of src/ taken now, so that edits made while the benchmark
        # runs do not mix two versions into one table.
        self.rota_src = work / "rota-src"
        shutil.copytree(REPO / "src", self.rota_src, ignore=shutil.ignore_patterns("__pycache__"))

    # Redis

    def flush(self) -> None:
        self.r.flushall()
        self.r.config_set("slowlog-log-slower-than", SLOW_US)
        self.r.config_set("slowlog-max-len", 10_000)
        self.r.slowlog_reset()
        self.calls += 4

    def snapshot(self) -> Snapshot:
        info = self.r.info("all")
        slow = self.r.slowlog_get(10_000)
        self.r.slowlog_reset()
        self.calls += 3
        commands = 0
        for key, value in info.items():
            if key.startswith("cmdstat_") and key[8:] not in _OWN_COMMANDS:
                commands += int(value["calls"])
        return Snapshot(
            commands=commands,
            reads=int(info["total_reads_processed"]),
            cpu=float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
            memory=int(info["used_memory"]),
            runner_calls=self.calls,
            slowest_us=max((int(e["duration"]) for e in slow), default=0),
        )

    @staticmethod
    def delta(a: Snapshot, b: Snapshot) -> dict[str, float]:
        return {
            "commands": b.commands - a.commands,
            "reads": (b.reads - a.reads) - (b.runner_calls - a.runner_calls),
            "redis_cpu": b.cpu - a.cpu,
            "memory": b.memory - a.memory,
            "slowest_ms": b.slowest_us / 1000,
        }

    # processes

    def env(self, concurrency: int, records: Path | None, app: str = "") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "BENCH_"))}
        paths = [str(self.rota_src)] if app == "rota" else []
        env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO)])
        env["BENCH_REDIS_URL"] = self.server.url
        env["BENCH_CONCURRENCY"] = str(concurrency)
        if records is not None:
            env["BENCH_RECORD_DIR"] = str(records)
        return env

    def produce(
        self, system: System, mode: str, n: int, jobs: str = "noop", timeout: float | None = None
    ) -> dict[str, Any]:
        command = [str(system.python), "-m", "bench.producer", system.app, mode, str(n)]
        command += ["--jobs", jobs, "--rate", str(self.cfg.latency_rate), "--url", self.server.url]
        done = subprocess.run(
            command,
            cwd=REPO,
            env=self.env(10, None, system.app),
            capture_output=True,
            text=True,
            timeout=timeout or self.cfg.run_timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RunError(f"producer {mode} failed ({done.returncode}): {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def start_worker(
        self, system: System, concurrency: int, folder: Path, wrap: list[str] | None = None
    ) -> subprocess.Popen[bytes]:
        command = system.worker_command(concurrency, self.server.url)
        with open(folder / "worker.log", "wb") as log:
            return subprocess.Popen(
                [*(wrap or []), *command],
                cwd=REPO,
                env=self.env(concurrency, folder, system.app),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @staticmethod
    def stop_worker(proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the worker's main process, as ``kill PID`` would (its own
        supervisor, if any, passes it on); SIGKILL to what is left after 15 s."""
        pids = tree(proc.pid)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            proc.poll()
            time.sleep(0.05)
        for pid in pids:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        proc.wait()

    def folder(self, workload: str, system: str, rep: int) -> Path:
        self.seq += 1
        name = f"{self.seq:03d}-{workload}-{system.replace(' ', '_')}-r{rep}"
        path = self.work / name
        path.mkdir(parents=True)
        return path

    # runs

    def drain(
        self, system: System, n: int, concurrency: int, jobs: str, folder: Path
    ) -> dict[str, Any]:
        """Enqueue n jobs first, then start one worker and time it through them all."""
        self.flush()
        s0 = self.snapshot()
        self.produce(system, "fill", n, jobs)
        s1 = self.snapshot()
        proc = self.start_worker(system, concurrency, folder)
        sampler = Sampler(proc.pid, self.server.pid)
        sampler.start()
        try:
            records = wait_records(folder, n, self.cfg.drain_cap, proc)
            s2 = self.snapshot()
        finally:
            sampler.stop()
            self.stop_worker(proc)
        return drain_metrics(records, n, sampler, self.delta(s0, s1), self.delta(s1, s2))

    def enqueue(self, system: System, mode: str) -> dict[str, Any]:
        n = self.cfg.enqueue_n
        self.flush()
        s0 = self.snapshot()
        result = self.produce(system, mode, n)
        s1 = self.snapshot()
        d = self.delta(s0, s1)
        return {
            "n": n,
            "rate": n / result["elapsed"],
            "cmds_per_job": d["commands"] / n,
            "reads_per_job": d["reads"] / n,
            "redis_cpu_us": d["redis_cpu"] * 1e6 / n,
            "memory_per_job": d["memory"] / n,
            "slowest_ms": d["slowest_ms"],
        }

    def group(self, system: System) -> dict[str, Any]:
        """rota only: ``bench.workflow_cost`` on this Redis, one round: plain jobs and a
        group of as many members with a callback, enqueued and run by an in-process pool."""
        self.flush()
        command = [str(system.python), "-m", "bench.workflow_cost", "--json", "--reps", "1"]
        command += ["--jobs", str(self.cfg.group_n), "--concurrency", str(GROUP_CONCURRENCY)]
        command += ["--redis-url", self.server.url]
        done = subprocess.run(
            command,
            cwd=REPO,
            env=self.env(GROUP_CONCURRENCY, None, system.app),
            capture_output=True,
            text=True,
            timeout=self.cfg.run_timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RunError(f"workflow_cost failed ({done.returncode}): {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def latency(self, system: System, folder: Path, idle: bool) -> dict[str, Any]:
        """An idle worker; jobs paced at a steady rate; enqueue-to-start latency."""
        n = self.cfg.latency_n
        self.flush()
        proc = self.start_worker(system, LATENCY_CONCURRENCY, folder)
        out: dict[str, Any] = {"n": n}
        try:
            self.produce(system, "warm", 1)
            wait_records(folder, 1, self.cfg.run_timeout, proc)
            time.sleep(self.cfg.settle_seconds)
            if idle:
                out |= self.measure_idle(proc.pid)
            self.produce(system, "paced", n)
            records = wait_records(folder, n + 1, self.cfg.run_timeout, proc)
        finally:
            self.stop_worker(proc)
        lat = sorted(r.started - r.enqueued for r in records if r.enqueued > 0)
        if len(lat) < n:
            out["partial"] = f"{len(lat)} of {n} jobs ran"
        if lat:
            out |= {
                "p50_ms": _pct(lat, 50) * 1000,
                "p99_ms": _pct(lat, 99) * 1000,
                "max_ms": lat[-1] * 1000,
            }
        return out

    def measure_idle(self, pid: int) -> dict[str, Any]:
        """Commands an idle worker sends: counted by MONITOR (client commands, not those
        a script runs) and by INFO commandstats (all, scripts' included)."""
        seconds = self.cfg.idle_seconds
        sent: list[str] = []
        stop = threading.Event()
        ready = threading.Event()

        def watch() -> None:
            conn = redis.Redis(host="127.0.0.1", port=self.server.port)
            with conn.monitor() as m:
                ready.set()
                for event in m.listen():
                    if stop.is_set():
                        break
                    if event.get("client_type") == "lua":
                        continue
                    command = str(event.get("command", "")).split(" ")[0].strip('"').lower()
                    if command not in _OWN_COMMANDS:
                        sent.append(command)
            conn.close()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        ready.wait(5)
        time.sleep(0.1)
        s0 = self.snapshot()
        cpu0 = cpu_seconds(tree(pid))
        time.sleep(seconds)
        s1 = self.snapshot()
        cpu1 = cpu_seconds(tree(pid))
        stop.set()
        self.r.ping()  # wakes the monitor loop up
        self.calls += 1
        watcher.join(10)
        d = self.delta(s0, s1)
        return {
            "idle_seconds": seconds,
            "idle_client_cmds_per_s": len(sent) / seconds,
            "idle_cmds_per_s": d["commands"] / seconds,
            "idle_worker_cpu_pct": 100 * (cpu1 - cpu0) / seconds,
            "idle_commands": dict(Counter(sent).most_common()),
        }

    def profile(self, out: Path) -> dict[str, Any]:
        """rota noop c=100 under py-spy: a flame graph (SVG) and the collapsed stacks (a
        second run), from which the hot spots are read."""
        py_spy = PEERS_BIN / "py-spy"
        if not py_spy.exists():
            return {"error": "py-spy is not installed in bench/.venv-peers"}
        system = self.systems["rota"]
        n = self.cfg.noop_n
        result: dict[str, Any] = {}
        for fmt, path in (("flamegraph", out / "rota-noop.svg"), ("raw", out / "rota-noop.txt")):
            folder = self.folder("profile", "rota", 0)
            self.flush()
            self.produce(system, "fill", n)
            spy = [str(py_spy), "record", "--rate", "250", "--format", fmt, "-o", str(path), "--"]
            proc = self.start_worker(system, 100, folder, wrap=spy)
            try:
                wait_records(folder, n, self.cfg.run_timeout, proc)
                # Stop the worker, not py-spy: py-spy writes its output when its target exits.
                for pid in tree(proc.pid)[1:2]:
                    os.kill(pid, signal.SIGTERM)
                proc.wait(60)
            finally:
                self.stop_worker(proc)
            if not path.exists():
                log = (folder / "worker.log").read_text(errors="replace")[-500:]
                result["error"] = f"py-spy wrote no {fmt} output: {log}"
                return result
            shutil.rmtree(folder, ignore_errors=True)
        result["svg"] = "rota-noop.svg"
        result |= report.hot_spots((out / "rota-noop.txt").read_text())
        return result


class RunError(Exception):
    pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pct(sorted_values: list[float], p: float) -> float:
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


# -- job records ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    name: str
    enqueued: float
    started: float
    finished: float
    process: str


def _read_records(folder: Path, offsets: dict[Path, int], into: list[Record]) -> None:
    for path in folder.glob("*.rec"):
        start = offsets.get(path, 0)
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
        end = data.rfind(b"\n") + 1
        offsets[path] = start + end
        for line in data[:end].splitlines():
            name, enq, began, done = line.split()
            into.append(Record(name.decode(), float(enq), float(began), float(done), path.stem))


def wait_records(
    folder: Path, n: int, timeout: float, proc: subprocess.Popen[bytes]
) -> list[Record]:
    """Wait until n jobs recorded their timings (or the time is up, or the worker died)."""
    records: list[Record] = []
    offsets: dict[Path, int] = {}
    deadline = time.monotonic() + timeout
    while True:
        _read_records(folder, offsets, records)
        if len(records) >= n:
            return records
        if time.monotonic() > deadline:
            if not records:
                raise RunError(f"no job ran within {timeout:g} s")
            return records
        if proc.poll() is not None:
            log = (folder / "worker.log").read_text(errors="replace")[-2000:]
            raise RunError(f"worker exited with {proc.returncode}: {log}")
        time.sleep(0.02)


def drain_metrics(
    records: list[Record],
    n: int,
    sampler: Sampler,
    enqueue: dict[str, float],
    run: dict[str, float],
) -> dict[str, Any]:
    first = min(r.started for r in records)
    last = max(r.finished for r in records)
    done = len(records)
    span = max(last - first, 1e-6)
    out: dict[str, Any] = {
        "n": n,
        "done": done,
        "seconds": span,
        "rate": done / span,
        "cmds_per_job": run["commands"] / done,
        "reads_per_job": run["reads"] / done,
        "redis_cpu_us": run["redis_cpu"] * 1e6 / done,
        "worker_cpu_us": (sampler.at(last) - sampler.at(first)) * 1e6 / done,
        "worker_rss_mib": sampler.peak_rss / 2**20,
        "fill_cmds_per_job": enqueue["commands"] / n,
        "slowest_ms": run["slowest_ms"],
    }
    if done < n:
        out["partial"] = f"{done} of {n} jobs in {span:.0f} s"
    processes = {r.process for r in records}
    if len(processes) > 1:
        # Jobs done while every process was running: leaves out the start-up skew.
        begin = max(min(r.started for r in records if r.process == p) for p in processes)
        end = min(max(r.finished for r in records if r.process == p) for p in processes)
        if end > begin:
            both = sum(begin <= r.started <= end for r in records)
            out["steady_rate"] = both / (end - begin)
        out["per_process"] = {p: sum(r.process == p for r in records) for p in processes}
    names = sorted({r.name for r in records})
    if len(names) > 1:
        ordered = sorted(records, key=lambda r: r.started)
        head = ordered[: int(len(ordered) * 0.4)]
        out["shares"] = {name: sum(r.name == name for r in head) / len(head) for name in names}
    return out


# -- the plan ---------------------------------------------------------------------------


@dataclass
class Result:
    workload: str
    system: str
    rep: int
    ok: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    na: str = ""
    foreign_cores: float = 0.0  # CPU other processes used during the run
    steal_cores: float = 0.0
    waited_s: float = 0.0
    repeated: bool = False


WORKLOADS = (
    "noop c=10",
    "noop c=100",
    "sleep c=100",
    "enqueue one",
    "enqueue 64",
    "enqueue batch",
    "latency",
    "group",
)
#: Workloads only rota runs (the peers have no such API, or one of another kind).
ROTA_ONLY = frozenset({"group"})


def plan(cfg: Config) -> Iterator[tuple[str, int, str]]:
    for workload in WORKLOADS:
        for rep in range(cfg.reps):
            for key in cfg.systems:
                if workload not in ROTA_ONLY or key == "rota":
                    yield workload, rep, key
            if workload == "noop c=100" and cfg.scale and "rota" in cfg.systems:
                yield workload, rep, "rota --processes 2"
                yield workload, rep, "rota priorities"


def run_one(b: Bench, workload: str, rep: int, key: str) -> Result:
    cfg = b.cfg
    system = b.systems[key]
    res = Result(workload, key, rep, ok=False)
    if workload == "enqueue batch" and system.batch_api is None:
        res.na = system.no_batch_reason
        return res
    folder = b.folder(workload.replace(" ", "").replace("=", ""), key, rep)
    try:
        if workload.startswith("noop"):
            c = 10 if workload == "noop c=10" else 100
            jobs = PRIO_JOBS if system.prio else "noop"
            res.metrics = b.drain(system, cfg.noop_n, c, jobs, folder)
        elif workload == "sleep c=100":
            res.metrics = b.drain(system, cfg.sleep_n, 100, "sleep", folder)
            ideal = cfg.sleep_n / 100 * 0.01
            res.metrics["pct_of_ideal"] = 100 * ideal / res.metrics["seconds"]
        elif workload.startswith("enqueue"):
            mode = {"enqueue one": "one", "enqueue 64": "concurrent"}.get(workload, "batch")
            res.metrics = b.enqueue(system, mode)
        elif workload == "latency":
            res.metrics = b.latency(system, folder, idle=rep == 0)
        elif workload == "group":
            res.metrics = b.group(system)
        res.ok = True
    except (RunError, subprocess.TimeoutExpired, OSError, redis.RedisError) as exc:
        res.error = str(exc)[-1500:]
    if res.ok:
        shutil.rmtree(folder, ignore_errors=True)
    return res


def _log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _summary(res: Result) -> str:
    if res.na:
        return f"n/a ({res.na})"
    if not res.ok:
        return "FAILED: " + res.error.splitlines()[0][:200] if res.error else "FAILED"
    m = res.metrics
    if "group_enqueue_seconds" in m:
        return (
            f"group of {m['jobs']:,}: enqueued in {m['group_enqueue_seconds']:.2f} s;"
            f" per member {m['added_commands']:+.1f} commands,"
            f" {m['added_cpu_us']:+.1f} µs Redis CPU"
        )
    if "p50_ms" in m:
        return f"p50 {m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms"
    return f"{m['rate']:,.0f} jobs/s"


def run(cfg: Config, out: Path, command: str) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    started = time.time()
    started_mono = time.monotonic()
    git_before = _git()
    results: list[Result] = []
    profile: dict[str, Any] = {}
    with RedisServer() as server:
        b = Bench(server, cfg, work)
        redis_version = str(b.r.info("server")["redis_version"])
        b.calls += 1
        _log(f"bench: redis-server {redis_version} on port {server.port}; systems: {cfg.systems}")
        if not cfg.smoke:
            # A first, unrecorded run, so that the first recorded one finds Redis warm.
            warm = b.folder("warmup", cfg.systems[0], 0)
            b.drain(b.systems[cfg.systems[0]], max(1, cfg.noop_n // 10), 100, "noop", warm)
            shutil.rmtree(warm, ignore_errors=True)
        waited = 0.0
        for workload, rep, key in plan(cfg):
            t0 = time.monotonic()
            res = measured(
                b, workload, rep, key, max(0.0, min(cfg.quiet_wait, cfg.quiet_budget - waited))
            )
            waited += res.waited_s
            if res.ok and res.foreign_cores > NOISY and t0 - started_mono < cfg.retry_until:
                limit = max(0.0, min(cfg.quiet_wait, cfg.quiet_budget - waited))
                again = measured(b, workload, rep, key, limit)
                waited += again.waited_s
                if not again.ok or again.foreign_cores >= res.foreign_cores:
                    again = res
                again.repeated = True
                res = again
            results.append(res)
            took = time.monotonic() - t0
            noise = f" (others: {res.foreign_cores:.2f} CPU)" if res.foreign_cores > NOISY else ""
            _log(
                f"  {workload:<14} rep {rep + 1}  {key:<20} {_summary(res)}{noise}  [{took:.1f} s]"
            )
        if cfg.profile and "rota" in cfg.systems:
            _log("  profiling rota noop c=100 with py-spy")
            try:
                profile = b.profile(out)
            except (RunError, subprocess.TimeoutExpired, OSError) as exc:
                profile = {"error": str(exc)[-500:]}
        b.r.close()
    shutil.rmtree(work, ignore_errors=True)
    data: dict[str, Any] = {
        "command": command,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
        "duration_s": time.time() - started,
        "config": asdict(cfg),
        "machine": _machine(redis_version),
        "versions": _versions(list(cfg.systems)),
        "git": {"start": git_before},
        "results": [asdict(r) for r in results],
        "profile": profile,
    }
    (out / "results.json").write_text(json.dumps(data, indent=1))
    chart = _chart(out)
    data["chart"] = chart
    (out / "results.md").write_text(report.markdown(data))
    return data


def measured(b: Bench, workload: str, rep: int, key: str, quiet_wait: float) -> Result:
    """One run, after waiting (up to ``quiet_wait`` s) for a quiet machine, with the CPU
    other processes used meanwhile."""
    waited = wait_quiet(quiet_wait) if quiet_wait > 0 else 0.0
    start = Load.mark()
    res = run_one(b, workload, rep, key)
    res.foreign_cores, res.steal_cores = Load.mark().since(start)
    res.waited_s = waited
    return res


def _git() -> str:
    """The commit the benchmark ran, and whether rota's sources had changes on top."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" with uncommitted changes in src/" if dirty else "")


def _machine(redis_version: str) -> dict[str, str]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": str(os.cpu_count()),
        "cpu": model,
        "python": platform.python_version(),
        "redis": redis_version,
        "kernel": platform.release(),
    }


def _chart(out: Path) -> str:
    """Draw results.png with matplotlib from the peers' environment, when there is one."""
    py = PEERS_BIN / "python"
    if not py.exists():
        return "no chart: bench/.venv-peers (matplotlib) is not installed"
    done = subprocess.run(
        [str(py), "-m", "bench.chart", str(out / "results.json"), str(out / "results.png")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return "no chart: " + done.stderr[-300:]
    return "results.png"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny counts, 1 repetition")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--systems", help="comma-separated subset, e.g. rota,arq")
    parser.add_argument("--reps", type=positive_int)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument(
        "--quiet-budget",
        type=float,
        help="most seconds in all to wait for other processes to go quiet (default 300)",
    )
    args = parser.parse_args(argv)
    cfg = SMOKE if args.smoke else Config()
    systems = tuple(args.systems.split(",")) if args.systems else cfg.systems
    unknown = [s for s in systems if s not in ("rota", *PEERS)]
    if unknown:
        parser.error(f"unknown systems: {unknown}")
    if not peers_available() and any(s in PEERS for s in systems):
        _log("bench: bench/.venv-peers is missing (make bench-smoke or make bench creates it):")
        _log("       running rota alone")
        systems = tuple(s for s in systems if s not in PEERS)
    overrides: dict[str, Any] = {"systems": systems}
    if args.reps is not None:
        overrides["reps"] = args.reps
    if args.no_profile:
        overrides["profile"] = False
    if args.no_scale:
        overrides["scale"] = False
    if args.quiet_budget is not None:
        overrides["quiet_budget"] = args.quiet_budget
        overrides["retry_until"] = max(cfg.retry_until, args.quiet_budget + 600)
    cfg = Config(**{**asdict(cfg), **overrides})
    command = os.environ.get("BENCH_MAKE_TARGET") or shlex.join(
        [".venv/bin/python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])]
    )
    data = run(cfg, args.out, command)
    failed = [r for r in data["results"] if not r["ok"] and not r["na"]]
    _log(f"bench: wrote {args.out / 'results.md'} in {data['duration_s']:.0f} s")
    if failed:
        _log(f"bench: {len(failed)} runs failed (see results.md)")
    return 0
