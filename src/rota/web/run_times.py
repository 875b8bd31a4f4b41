"""A job name's run times: p50, p95, p99 and the histogram of its finished attempts over
the last hour or day (``client.admin.run_times``, see :mod:`rota.client.run_times`), as
JSON and as the queue page's section."""

from __future__ import annotations

from typing import Any, Final, get_args

import msgspec
from starlette.requests import Request

from rota.client import Client
from rota.client.run_times import RunTimes
from rota.protocol.run_times import Window
from rota.web.base import client_of, known_queue
from rota.web.charts import histogram_chart, run_time_text
from rota.web.declare import Choice, Routes, plain

__all__ = ["page_figures", "routes"]

routes = Routes()
WINDOWS: Final[tuple[Window, ...]] = get_args(Window)
_WINDOW: Final = Choice("window", WINDOWS, lenient=False)


class QueueRunTimes(RunTimes, frozen=True):
    """A job name's run times over the last hour (60-70 minutes) or day (24 h-24 h 10
    min): its finished attempts (complete, retried, dead, dropped; not those an abort,
    a shutdown or a lost lease cut short), counted in 40 log-spaced buckets. Each
    percentile is the upper bound in ms of the bucket holding it: never below the true
    value, less than 1.5 times it (exact to 4 ms); null when none counted or over the
    last bound (4914370 ms, the open bucket, whose ``le_ms`` is null)."""


@routes.api("/api/queues/{name}/run-times", "queue_run_times", QueueRunTimes, params=(_WINDOW,))
async def run_times(request: Request) -> QueueRunTimes:
    """A job name's run-time percentiles and histogram over the last hour or day."""
    name = await known_queue(request)
    window = _WINDOW.read(request)
    got = await client_of(request).admin.run_times.of(name, window)
    return QueueRunTimes(**msgspec.structs.asdict(got))


async def page_figures(client: Client, name: str) -> dict[str, Any]:
    """The queue page's run times: each window's figures as text, and the hour's
    histogram as a chart."""
    out: dict[str, Any] = {"windows": []}
    for got in plain(await client.admin.run_times.windows(name)):
        n = got["count"]
        texts = {f: run_time_text(got[f], n) for f in ("p50_ms", "p95_ms", "p99_ms", "max_ms")}
        out["windows"].append({"window": got["window"], "count": n, **texts})
        if got["window"] == "hour":
            out["chart"] = histogram_chart(got["buckets"])
    return out
