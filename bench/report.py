"""Turn the runner's raw results into tables (markdown) and read py-spy's stacks.

Standard library only: the chart (``bench/chart.py``, in the peers' environment) uses the
same aggregation.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["Stat", "aggregate", "hot_spots", "markdown"]

MAIN = ("rota", "arq", "saq", "streaq", "taskiq", "dramatiq")
PEERS = MAIN[1:]


class Stat:
    """Median and range of one metric over the repetitions."""

    def __init__(self, values: list[float]) -> None:
        self.values = values
        self.median = statistics.median(values)
        self.lo = min(values)
        self.hi = max(values)

    def fmt(self, digits: int = 0, suffix: str = "") -> str:
        def f(x: float) -> str:
            return f"{x:,.{digits}f}"

        if len(self.values) == 1 or f(self.lo) == f(self.hi):
            return f(self.median) + suffix
        return f"{f(self.median)}{suffix} ({f(self.lo)}–{f(self.hi)})"


Table = dict[tuple[str, str], list[dict[str, Any]]]


def aggregate(data: dict[str, Any]) -> tuple[Table, dict[tuple[str, str], str]]:
    """Results grouped by (workload, system): the metrics of the runs that worked, and
    why a cell is missing (n/a, failed)."""
    ok: Table = {}
    why: dict[tuple[str, str], str] = {}
    for r in data["results"]:
        key = (r["workload"], r["system"])
        if r["ok"]:
            ok.setdefault(key, []).append(r["metrics"])
        elif r["na"]:
            why[key] = "n/a: " + r["na"]
        else:
            why.setdefault(key, "failed: " + (r["error"].splitlines() or ["?"])[0][:120])
    return ok, why


def stat(ok: Table, workload: str, system: str, metric: str) -> Stat | None:
    values = [m[metric] for m in ok.get((workload, system), []) if metric in m]
    return Stat(values) if values else None


def _systems(data: dict[str, Any]) -> list[str]:
    present = {r["system"] for r in data["results"]}
    return [s for s in MAIN if s in present]


def _cell(
    ok: Table,
    why: dict[tuple[str, str], str],
    workload: str,
    system: str,
    metric: str,
    digits: int = 0,
    suffix: str = "",
) -> str:
    s = stat(ok, workload, system, metric)
    if s is None:
        return why.get((workload, system), "–")
    text = s.fmt(digits, suffix)
    if any("partial" in m for m in ok[(workload, system)]):
        text += " †"
    return text


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _best_peer(
    ok: Table, workload: str, metric: str, pick: Callable[[list[float]], float] = max
) -> tuple[str, float] | None:
    found = []
    for peer in PEERS:
        s = stat(ok, workload, peer, metric)
        if s is not None:
            found.append((s.median, peer))
    if not found:
        return None
    value = pick([v for v, _ in found])
    return next(p for v, p in found if v == value), value


def targets(data: dict[str, Any]) -> list[list[str]]:
    """Each target: what it asks, the figures, met or not."""
    ok, _ = aggregate(data)
    rows: list[list[str]] = []

    def add(name: str, figures: str, met: bool | None) -> None:
        verdict = "not measured" if met is None else ("met" if met else "not yet")
        rows.append([name, figures, verdict])

    def ratio_row(name: str, workload: str, metric: str, factor: float, system: str) -> None:
        mine = stat(ok, workload, system, metric)
        best = _best_peer(ok, workload, metric)
        if mine is None or best is None:
            add(name, "no peer measured" if mine else "rota not measured", None)
            return
        peer, value = best
        r = mine.median / value
        add(name, f"rota {mine.median:,.0f} vs {peer} {value:,.0f} jobs/s: {r:.2f}×", r >= factor)

    ratio_row("noop c=100, one process ≥ 4× best peer", "noop c=100", "rate", 4, "rota")
    one = stat(ok, "noop c=100", "rota", "rate")
    two = stat(ok, "noop c=100", "rota --processes 2", "rate")
    if one and two:
        r = two.median / one.median
        add(
            "--processes 2 ≥ 1.6× one process",
            f"{two.median:,.0f} vs {one.median:,.0f} jobs/s: {r:.2f}×",
            r >= 1.6,
        )
    else:
        add("--processes 2 ≥ 1.6× one process", "–", None)
    sleep = stat(ok, "sleep c=100", "rota", "pct_of_ideal")
    add(
        "sleep 10 ms, c=100 ≥ 80 % of ideal",
        f"{sleep.median:.0f} % of ideal" if sleep else "–",
        None if sleep is None else sleep.median >= 80,
    )
    ratio_row("enqueue one at a time ≥ 1.5× best peer", "enqueue one", "rate", 1.5, "rota")
    ratio_row("enqueue_many ≥ 5× best batch API", "enqueue batch", "rate", 5, "rota")
    p50 = stat(ok, "latency", "rota", "p50_ms")
    p99 = stat(ok, "latency", "rota", "p99_ms")
    add(
        "latency p50 ≤ 1 ms, p99 ≤ 2 ms",
        f"p50 {p50.median:.2f} ms, p99 {p99.median:.2f} ms" if p50 and p99 else "–",
        None if not (p50 and p99) else p50.median <= 1 and p99.median <= 2,
    )
    mine_cpu = _redis_cpu(ok, "rota")
    peer_cpu = [(c, p) for p in PEERS if (c := _redis_cpu(ok, p)) is not None]
    if mine_cpu is not None and peer_cpu:
        best_cpu, best_peer = min(peer_cpu)
        add(
            "Redis CPU per job ≤ best peer's",
            f"rota {mine_cpu:.1f} µs vs {best_peer} {best_cpu:.1f} µs (enqueue + run)",
            mine_cpu <= best_cpu,
        )
    else:
        add("Redis CPU per job ≤ best peer's", "no peer measured", None)
    trips = stat(ok, "noop c=100", "rota", "reads_per_job")
    add(
        "≤ 2 round trips per job at c=100 (worker side)",
        f"{trips.median:.3f} per job" if trips else "–",
        None if trips is None else trips.median <= 2,
    )
    idle = stat(ok, "latency", "rota", "idle_client_cmds_per_s")
    add(
        "idle pool ≤ 1 command/s",
        f"{idle.median:.2f} commands/s" if idle else "–",
        None if idle is None else idle.median <= 1,
    )
    return rows


def _shard_table(ok: Table, systems: list[str]) -> list[str]:
    """What one Redis shard can carry: a namespace (a queue, for the peers) lives on one
    shard, which runs one command at a time, so 1 s over the Redis CPU a whole job costs
    (its enqueue one at a time plus its run) is the most jobs a second it can take."""

    def median(workload: str, system: str, metric: str) -> float | None:
        st = stat(ok, workload, system, metric)
        return None if st is None else st.median

    def fmt(x: float | None, digits: int) -> str:
        return "–" if x is None else f"{x:,.{digits}f}"

    rows = []
    for system in systems:
        enq = median("enqueue one", system, "redis_cpu_us")
        run = median("noop c=100", system, "redis_cpu_us")
        whole = None if enq is None or run is None else enq + run
        slow = [
            x
            for w in ("enqueue one", "enqueue batch", "noop c=100")
            if (x := median(w, system, "slowest_ms")) is not None
        ]
        rows.append(
            [
                system,
                fmt(enq, 1),
                fmt(run, 1),
                fmt(whole, 1),
                fmt(None if not whole else 1e6 / whole, 0),
                fmt(median("enqueue one", system, "memory_per_job"), 0),
                fmt(max(slow) if slow else None, 2),
            ]
        )
    head = [
        "",
        "## One Redis shard",
        "",
        "Redis CPU per job (medians of the cost table), their sum, and the jobs a second"
        " one single-threaded shard could carry at that cost (1 s divided by the sum). The"
        " slowest call: the longest command or script call Redis ran in the enqueue one,"
        " enqueue batch and noop c=100 runs (median over repetitions of each run's"
        " slowest, the largest of the three; SLOWLOG, calls under 0.1 ms show as 0).",
        "",
    ]
    return head + _table(
        [
            "system",
            "Redis CPU µs/job enqueue",
            "Redis CPU µs/job run",
            "enqueue + run µs",
            "jobs/s per shard",
            "Redis bytes/queued job",
            "slowest call ms",
        ],
        rows,
    )


def _redis_cpu(ok: Table, system: str) -> float | None:
    enq = stat(ok, "enqueue one", system, "redis_cpu_us")
    run = stat(ok, "noop c=100", system, "redis_cpu_us")
    if enq is None or run is None:
        return None
    return enq.median + run.median


def markdown(data: dict[str, Any]) -> str:
    ok, why = aggregate(data)
    systems = _systems(data)
    cfg = data["config"]
    m = data["machine"]
    c = _cell_factory(ok, why)
    reps = cfg["reps"]
    lines = [
        "# rota and its peers: benchmark results",
        "",
        f"Reproduce: `{data['command']}` (run {data['started']}, took {data['duration_s']:.0f} s).",
        "",
        f"Machine: {m['cpus']} CPUs ({m['cpu']}), Linux {m['kernel']}, Python {m['python']},"
        f" one private redis-server {m['redis']} on loopback (no persistence), shared by"
        " the worker, the producer and Redis itself.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(data["versions"].items())) + ".",
        "",
        *_provenance(data),
        (f"Each cell: median of {reps} runs (min–max); runs" if reps > 1 else "One run each;")
        + " interleaved (every system once, then again). Every run has a flushed Redis and a"
        " fresh worker process. n/a: the system has no such API.",
        "",
        f"## Throughput ({cfg['noop_n']:,} no-op jobs, {cfg['sleep_n']:,} sleep jobs,"
        " enqueued first; one worker process; first start to last finish)",
        "",
    ]
    lines += _table(
        ["system", "noop c=10 (jobs/s)", "noop c=100 (jobs/s)", "sleep 10 ms c=100 (% of ideal)"],
        [
            [
                s,
                c("noop c=10", s, "rate"),
                c("noop c=100", s, "rate"),
                c("sleep c=100", s, "pct_of_ideal", 0, " %"),
            ]
            for s in systems
        ],
    )
    partial = [
        f"{r['system']} {r['workload']} run {r['rep'] + 1}: {r['metrics']['partial']}"
        for r in data["results"]
        if r["ok"] and "partial" in r["metrics"] and not r["workload"].startswith("latency")
    ]
    if partial:
        lines += [
            "",
            f"† Some runs were stopped after {cfg['drain_cap']:g} s; their rate is over the"
            " jobs done by then: " + "; ".join(partial) + ".",
        ]
    lines += [
        "",
        f"## Enqueue ({cfg['enqueue_n']:,} jobs, no worker running)",
        "",
    ]
    lines += _table(
        ["system", "one at a time (jobs/s)", "64 in flight (jobs/s)", "batch API (jobs/s)"],
        [
            [
                s,
                c("enqueue one", s, "rate"),
                c("enqueue 64", s, "rate"),
                c("enqueue batch", s, "rate"),
            ]
            for s in systems
        ],
    )
    lines += [
        "",
        f"## Latency (idle worker, c={10}, {cfg['latency_n']} jobs paced at"
        f" {cfg['latency_rate']:.0f}/s; enqueue to start)",
        "",
    ]
    lines += _table(
        ["system", "p50 (ms)", "p99 (ms)", "max (ms)"],
        [
            [
                s,
                c("latency", s, "p50_ms", 2),
                c("latency", s, "p99_ms", 2),
                c("latency", s, "max_ms", 1),
            ]
            for s in systems
        ],
    )
    lines += [
        "",
        "## Cost per job",
        "",
        "Redis commands count every command Redis ran, those inside Lua scripts and"
        " functions included (INFO commandstats). Round trips: socket reads Redis served"
        " (INFO total_reads_processed), about one per request or pipeline. Enqueue: one at a"
        " time. Run: the worker's side of the noop c=100 runs. Worker CPU and RSS: the"
        " worker's whole process tree (supervisor processes included), CPU from the first"
        " job's start to the last one's finish. Idle: an idle worker"
        f" (c=10) over {cfg['idle_seconds']:g} s; client commands counted with MONITOR"
        " (not those run inside scripts).",
        "",
    ]
    lines += _table(
        [
            "system",
            "Redis cmds/job enqueue",
            "Redis cmds/job run",
            "round trips/job run",
            "Redis CPU µs/job enqueue",
            "Redis CPU µs/job run",
            "worker CPU µs/job",
            "worker RSS MiB",
            "Redis bytes/queued job",
            "idle client cmds/s",
            "idle cmds/s incl. scripts",
        ],
        [
            [
                s,
                c("enqueue one", s, "cmds_per_job", 1),
                c("noop c=100", s, "cmds_per_job", 1),
                c("noop c=100", s, "reads_per_job", 2),
                c("enqueue one", s, "redis_cpu_us", 1),
                c("noop c=100", s, "redis_cpu_us", 1),
                c("noop c=100", s, "worker_cpu_us", 0),
                c("noop c=100", s, "worker_rss_mib", 0),
                c("enqueue one", s, "memory_per_job", 0),
                c("latency", s, "idle_client_cmds_per_s", 2),
                c("latency", s, "idle_cmds_per_s", 2),
            ]
            for s in systems
        ],
    )
    lines += _shard_table(ok, systems)
    if cfg["scale"] and "rota" in systems:
        lines += ["", "## Scale (rota only, noop c=100 per process)", ""]
        lines += _table(
            [
                "variant",
                "jobs/s",
                "jobs/s while all processes ran",
                "worker CPU µs/job",
                "Redis CPU µs/job run",
            ],
            [
                [
                    v,
                    c("noop c=100", v, "rate"),
                    c("noop c=100", v, "steady_rate") if "2" in v else "–",
                    c("noop c=100", v, "worker_cpu_us"),
                    c("noop c=100", v, "redis_cpu_us", 1),
                ]
                for v in ("rota", "rota --processes 2", "rota priorities")
            ],
        )
        shares = [mm["shares"] for mm in ok.get(("noop c=100", "rota priorities"), [])]
        if shares:
            expected = {"p8": 8 / 15, "p4": 4 / 15, "p2": 2 / 15, "p1": 1 / 15}
            parts = []
            for name, want in expected.items():
                got = statistics.median(sh.get(name, 0.0) for sh in shares)
                parts.append(f"{name} {100 * got:.1f} % (expected {100 * want:.1f} %)")
            lines += [
                "",
                "rota priorities: four job names with priorities 8, 4, 2 and 1, as many jobs"
                " each; shares of the first 40 % of jobs started: " + "; ".join(parts) + ".",
            ]
    lines += _workflows(data, ok, why)
    lines += ["", "## Targets", ""]
    lines += _table(["target", "measured", "verdict"], targets(data))
    failures = [
        f"- {r['workload']}, {r['system']}, run {r['rep'] + 1}: {r['error'][:300]}"
        for r in data["results"]
        if not r["ok"] and not r["na"]
    ]
    if failures:
        lines += ["", "## Failed runs", "", *failures]
    prof = data.get("profile") or {}
    if prof:
        lines += ["", "## Profile of the rota worker (noop c=100, py-spy)", ""]
        if "error" in prof:
            lines.append(f"Not profiled: {prof['error']}")
        else:
            lines += [
                f"Flame graph: `{prof['svg']}`; {prof['samples']:,} samples on CPU.",
                "",
                "Time by library (self time of the leaf frame):",
                "",
            ]
            lines += _table(
                ["library", "share"], [[k, f"{v:.1f} %"] for k, v in prof["by_library"]]
            )
            lines += ["", "Hottest functions, self time:", ""]
            lines += _table(
                ["function", "share"], [[f"`{k}`", f"{v:.1f} %"] for k, v in prof["self"]]
            )
            lines += ["", "Hottest functions, inclusive time:", ""]
            lines += _table(
                ["function", "share"], [[f"`{k}`", f"{v:.1f} %"] for k, v in prof["inclusive"]]
            )
    lines += ["", f"Chart: {data.get('chart', '–')}", ""]
    return "\n".join(lines)


def _workflows(data: dict[str, Any], ok: Table, why: dict[tuple[str, str], str]) -> list[str]:
    """The group workload (rota only): plain jobs next to a group of as many members
    with a callback, and what the group adds per member."""
    key = ("group", "rota")
    if key not in ok and key not in why:
        return []
    n = data["config"].get("group_n", 0)
    lines = [
        "",
        f"## Workflows (rota only: {n:,} no-op jobs, then a group of {n:,} members and a callback)",
        "",
        "`python -m bench.workflow_cost` on the same Redis, an in-process pool of"
        " concurrency 50. Enqueue: one `enqueue_many` call, one `group` call. Run: from"
        " the first fetch to the last outcome recorded; a group's figures are per member,"
        " its callback's cost included.",
        "",
    ]
    c = _cell_factory(ok, why)
    rows = []
    for label, prefix in (("plain jobs", "plain"), ("group + callback", "group")):
        rows.append(
            [
                label,
                c("group", "rota", f"{prefix}_enqueue_seconds", 3),
                c("group", "rota", f"{prefix}_enqueue_commands", 2),
                c("group", "rota", f"{prefix}_enqueue_cpu_us", 1),
                c("group", "rota", f"{prefix}_run_seconds", 3),
                c("group", "rota", f"{prefix}_run_commands", 2),
                c("group", "rota", f"{prefix}_run_cpu_us", 1),
            ]
        )
    rows.append(
        [
            "added per member",
            "–",
            c("group", "rota", "added_enqueue_commands", 2),
            c("group", "rota", "added_enqueue_cpu_us", 1),
            "–",
            c("group", "rota", "added_run_commands", 2),
            c("group", "rota", "added_run_cpu_us", 1),
        ]
    )
    lines += _table(
        [
            "jobs",
            "enqueue (s, one call)",
            "Redis cmds/job enqueue",
            "Redis CPU µs/job enqueue",
            "run (s)",
            "Redis cmds/job run",
            "Redis CPU µs/job run",
        ],
        rows,
    )
    runs = [r["metrics"].get("callback_runs") for r in data["results"] if r["workload"] == "group"]
    if runs and all(r is not None for r in runs):
        counts = sorted({n for r in runs for n in r})
        lines += ["", f"Callback runs per group: {', '.join(map(str, counts))}."]
    return lines


def _provenance(data: dict[str, Any]) -> list[str]:
    """Which sources ran, and how busy the machine was with other work meanwhile."""
    out: list[str] = []
    git = data.get("git") or {}
    if git:
        out += [
            f"rota ran from a copy of src/ taken when the benchmark started: {git['start']}.",
            "",
        ]
    runs = [r for r in data["results"] if r["ok"]]
    loads = [r.get("foreign_cores", 0.0) for r in runs]
    if loads:
        noisy = [r for r in runs if r.get("foreign_cores", 0.0) > 0.3]
        repeated = sum(bool(r.get("repeated")) for r in runs)
        steal = max(r.get("steal_cores", 0.0) for r in runs)
        text = (
            "Other work on the machine during the runs (CPU used by processes that are not"
            f" part of the benchmark): median {100 * statistics.median(loads):.0f} % of one"
            f" CPU, max {100 * max(loads):.0f} %; hypervisor steal at most"
            f" {100 * steal:.0f} %."
        )
        if repeated:
            text += f" {repeated} runs were repeated once because of it (the quieter kept)."
        if noisy:
            text += (
                " Runs still above 30 % of a CPU: "
                + "; ".join(
                    f"{r['system']} {r['workload']} run {r['rep'] + 1}"
                    f" ({100 * r['foreign_cores']:.0f} %)"
                    for r in noisy
                )
                + "."
            )
        out += [text, ""]
    return out


def _cell_factory(ok: Table, why: dict[tuple[str, str], str]) -> Callable[..., str]:
    def c(workload: str, system: str, metric: str, digits: int = 0, suffix: str = "") -> str:
        return _cell(ok, why, workload, system, metric, digits, suffix)

    return c


# -- py-spy -----------------------------------------------------------------------------

_LIBRARIES = (
    ("/rota/", "rota"),
    ("/bench/", "bench job bodies"),
    ("/redis/", "redis-py"),
    ("hiredis", "hiredis"),
    ("/anyio/", "anyio"),
    ("/structlog/", "structlog"),
    ("/msgspec/", "msgspec"),
    ("/asyncio/", "asyncio"),
    ("uvloop", "uvloop"),
    ("/logging/", "logging"),
)


def _frame(raw: str) -> tuple[str, str]:
    """('function (file)', file) of a py-spy frame 'function (path:line)'."""
    name, _, rest = raw.rpartition(" (")
    if not name:
        return raw, ""
    path = rest.rstrip(")").rsplit(":", 1)[0]
    short = path
    for marker in ("/site-packages/", "/src/", "/lib/python3.11/", "/main/"):
        if marker in path:
            short = path.split(marker, 1)[1]
            break
    return f"{name} ({short})", "/" + short.lstrip("/")


def _library(path: str) -> str:
    if path.endswith("/asyncio/runners.py"):
        # With uvloop the loop itself is C code: its time shows in the frame that runs it.
        return "event loop (uvloop, C: sockets, scheduling)"
    for marker, lib in _LIBRARIES:
        if marker in path:
            if lib == "rota":
                return "rota: " + path.split("/rota/", 1)[1]
            return lib
    return "other: " + (path.rsplit("/", 1)[-1] or "?")


def hot_spots(collapsed: str, top: int = 15) -> dict[str, Any]:
    """Self and inclusive shares per function, and self time per library, from py-spy's
    raw (collapsed stacks) output."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    libraries: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        if "_find_and_load" in stack:
            continue  # start-up imports, not the steady state
        frames = [_frame(f) for f in stack.split(";") if " (" in f]
        if not frames:
            continue
        total += count
        leaf, path = frames[-1]
        self_time[leaf] += count
        libraries[_library(path)] += count
        for name in {f for f, _ in frames}:
            inclusive[name] += count
    if not total:
        return {"samples": 0, "self": [], "inclusive": [], "by_library": []}

    def pct(items: list[tuple[str, int]]) -> list[tuple[str, float]]:
        return [(k, 100 * v / total) for k, v in items]

    # Frames on (nearly) every stack, entry points and the loop, say nothing.
    inner = [(k, v) for k, v in inclusive.most_common() if v < 0.9 * total]
    return {
        "samples": total,
        "self": pct(self_time.most_common(top)),
        "inclusive": pct(inner[:top]),
        "by_library": pct(libraries.most_common(12)),
    }
