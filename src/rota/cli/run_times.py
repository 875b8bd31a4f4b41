"""``rota queue run-times``: a job name's run-time percentiles and histogram over the
last hour or day, as ``client.admin.run_times`` reads them (see
:mod:`rota.client.run_times`). A command of the ``queue`` group, in its own module."""

from __future__ import annotations

import click
import msgspec

from rota.cli.common import connection_options, json_option, with_client
from rota.cli.operate import name_argument, queue
from rota.cli.output import echo_json, print_table
from rota.client import Client
from rota.config import Settings
from rota.protocol.run_times import BOUNDS

__all__ = ["run_times"]

#: Width of the longest bar of the histogram, in characters.
BAR = 40


def _text(ms: int | None, count: int) -> str:
    """A bucket's upper bound as "<= 58 ms"; the open bucket's as "> 4914370 ms"."""
    if not count:
        return "-"
    return f"> {BOUNDS[-1]} ms" if ms is None else f"<= {ms} ms"


@queue.command("run-times")
@name_argument
@click.option("--day", is_flag=True, help="The last day (24 h) instead of the last hour.")
@json_option
@connection_options
@with_client
async def run_times(
    client: Client, settings: Settings, name: str, day: bool, as_json: bool
) -> None:
    """Show p50, p95, p99 and the histogram of NAME's run times over the last hour (60
    to 70 minutes) or --day, over every shard.

    Counted: every attempt that ran to an outcome (complete, retried, dead), from its
    lease's start to its finish. Each figure is the upper bound of a bucket: never below
    the true value, and less than 1.5 times it."""
    got = await client.admin.run_times.of(name, "day" if day else "hour")
    if as_json:
        echo_json(msgspec.to_builtins(got))
        return
    n = got.count
    print_table(
        f"Run times of {name}, last {got.window}",
        ["attempts", "p50", "p95", "p99", "slowest"],
        [[n, *(_text(v, n) for v in (got.p50_ms, got.p95_ms, got.p99_ms, got.max_ms))]],
    )
    if not n:
        return
    top = max(b.count for b in got.buckets)
    used = [i for i, b in enumerate(got.buckets) if b.count]
    shown = got.buckets[used[0] : used[-1] + 1]
    print_table(
        "Histogram",
        ["up to", "attempts", ""],
        [[_text(b.le_ms, 1), b.count, "#" * -(-b.count * BAR // top)] for b in shown],
    )
