"""Bar charts of processed and failed jobs and of run times, drawn on the server as SVG
geometry.

The template turns each bar into ``<rect>`` elements; no script is needed to see them.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

from rota.protocol.run_times import BOUNDS

__all__ = ["bar_chart", "duration_chart", "histogram_chart", "run_time_text"]

WIDTH = 600
HEIGHT = 150


def _nice_max(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m >= value:
                return step * m
        step *= 10


def _label(bucket: dict[str, Any], fmt: str) -> str:
    return dt.datetime.fromtimestamp(bucket["start"] / 1000, dt.UTC).strftime(fmt)


def _chart(
    buckets: list[dict[str, Any]],
    fmt: str,
    bars: list[dict[str, Any]],
    label: Callable[[dict[str, Any]], str] | None = None,
) -> dict[str, Any]:
    """A chart of ``bars``, each given its slot (hovered for its title) and the place of
    the bar inside it, and the labels under it: its first, middle and last buckets'
    times in ``fmt`` (or their ``label``)."""
    slot = WIDTH / max(1, len(buckets))
    for i, bar in enumerate(bars):
        x, gap = i * slot, slot * 0.15
        bar.update(x=round(x + gap / 2, 2), w=round(slot - gap, 2))
        bar.update(slot_x=round(x, 2), slot_w=round(slot, 2))
    ends = sorted({0, len(buckets) // 2, len(buckets) - 1}) if buckets else []
    labels = [label(buckets[i]) if label else _label(buckets[i], fmt) for i in ends]
    return {"width": WIDTH, "height": HEIGHT, "bars": bars, "labels": labels}


def _ms_text(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def duration_chart(minutes: list[dict[str, Any]]) -> dict[str, Any]:
    """Bars of the mean run time of a name's complete jobs per minute (``mean_ms``, None
    for a minute without any), oldest first."""
    means = [m["mean_ms"] for m in minutes if m["mean_ms"] is not None]
    top = _nice_max(math.ceil(max(means, default=0)))
    bars = []
    for m in minutes:
        mean, label = m["mean_ms"], _label(m, "%H:%M")
        h = HEIGHT * mean / top if mean is not None else 0.0
        title = (
            f"{label} UTC: mean {_ms_text(mean)} over {m['processed']} jobs"
            if mean is not None
            else f"{label} UTC: no job completed"
        )
        bars.append({"y": round(HEIGHT - h, 2), "h": round(h, 2), "title": title})
    done = sum(m["processed"] for m in minutes)
    ran = sum(m["ran_ms"] for m in minutes)
    return {
        **_chart(minutes, "%H:%M", bars),
        "max": _ms_text(top),
        "mean": _ms_text(ran / done) if done else None,
        "slowest": _ms_text(max(means)) if means else None,
    }


def bar_chart(buckets: list[dict[str, Any]], unit: str) -> dict[str, Any]:
    """Stacked bars (processed below, failed above) for buckets of one ``unit``
    ('minute' or 'day'), oldest first."""
    top = _nice_max(max((b["processed"] + b["failed"] for b in buckets), default=0))
    fmt = "%H:%M" if unit == "minute" else "%b %d"
    bars = []
    for b in buckets:
        hp, hf = HEIGHT * b["processed"] / top, HEIGHT * b["failed"] / top
        bars.append(
            {
                "yp": round(HEIGHT - hp, 2),
                "hp": round(hp, 2),
                "yf": round(HEIGHT - hp - hf, 2),
                "hf": round(hf, 2),
                "title": f"{_label(b, fmt)} UTC: {b['processed']} processed, {b['failed']} failed",
            }
        )
    return {
        **_chart(buckets, fmt, bars),
        "max": top,
        "processed": sum(b["processed"] for b in buckets),
        "failed": sum(b["failed"] for b in buckets),
    }


def _bound_text(ms: int | None) -> str:
    """A bucket's upper bound as a page shows it (None: the open bucket)."""
    if ms is None:
        return "longer"
    if ms >= 60_000:
        return f"{ms / 60_000:.1f} min"
    return _ms_text(ms)


def run_time_text(ms: int | None, count: int) -> str:
    """A percentile of run times as a page shows it: "≤ 58 ms"; none counted: "–"."""
    if not count:
        return "–"
    if ms is None:
        return f"> {_bound_text(BOUNDS[-1])}"
    return f"≤ {_bound_text(ms)}"


def histogram_chart(buckets: list[dict[str, Any]]) -> dict[str, Any]:
    """Bars of a run-time histogram (``le_ms``, ``count`` per bucket), from its first
    bucket that counted an attempt to its last (all of them when none did), labelled by
    their upper bounds."""
    used = [i for i, b in enumerate(buckets) if b["count"]]
    shown = buckets[used[0] : used[-1] + 1] if used else buckets
    top = _nice_max(max((b["count"] for b in shown), default=0))
    bars = []
    for b in shown:
        h = HEIGHT * b["count"] / top
        title = f"{run_time_text(b['le_ms'], 1)}: {b['count']} attempts"
        bars.append({"y": round(HEIGHT - h, 2), "h": round(h, 2), "title": title})
    chart = _chart(shown, "", bars, lambda b: run_time_text(b["le_ms"], 1))
    return {**chart, "max": top, "count": sum(b["count"] for b in shown)}
