"""Bar charts of processed and failed jobs, drawn on the server as SVG geometry.

The template turns each bar into ``<rect>`` elements; no script is needed to see them.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

__all__ = ["bar_chart", "duration_chart"]

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


def _labels(buckets: list[dict[str, Any]], fmt: str) -> list[str]:
    """The times under a chart: its first, middle and last buckets'."""
    out = []
    if buckets:
        for i in sorted({0, len(buckets) // 2, len(buckets) - 1}):
            stamp = dt.datetime.fromtimestamp(buckets[i]["start"] / 1000, dt.UTC)
            out.append(stamp.strftime(fmt))
    return out


def _slot(i: int, n: int) -> dict[str, float]:
    """The place of bar ``i`` of ``n``: its slot (hovered for its title) and the bar
    inside it."""
    slot = WIDTH / n
    gap = slot * 0.15
    return {
        "x": round(i * slot + gap / 2, 2),
        "w": round(slot - gap, 2),
        "slot_x": round(i * slot, 2),
        "slot_w": round(slot, 2),
    }


def _ms_text(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def duration_chart(minutes: list[dict[str, Any]]) -> dict[str, Any]:
    """Bars of the mean run time of a name's complete jobs per minute (``mean_ms``, None
    for a minute without any), oldest first."""
    n = max(1, len(minutes))
    means = [m["mean_ms"] for m in minutes if m["mean_ms"] is not None]
    top = _nice_max(math.ceil(max(means, default=0)))
    bars = []
    for i, m in enumerate(minutes):
        label = dt.datetime.fromtimestamp(m["start"] / 1000, dt.UTC).strftime("%H:%M")
        mean = m["mean_ms"]
        h = HEIGHT * mean / top if mean is not None else 0.0
        title = (
            f"{label} UTC: mean {_ms_text(mean)} over {m['processed']} jobs"
            if mean is not None
            else f"{label} UTC: no job completed"
        )
        bars.append(
            {
                **_slot(i, n),
                "y": round(HEIGHT - h, 2),
                "h": round(h, 2),
                "title": title,
            }
        )
    done = sum(m["processed"] for m in minutes)
    ran = sum(m["ran_ms"] for m in minutes)
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "max": _ms_text(top),
        "bars": bars,
        "labels": _labels(minutes, "%H:%M"),
        "mean": _ms_text(ran / done) if done else None,
        "slowest": _ms_text(max(means)) if means else None,
    }


def bar_chart(buckets: list[dict[str, Any]], unit: str) -> dict[str, Any]:
    """Stacked bars (processed below, failed above) for buckets of one ``unit``
    ('minute' or 'day'), oldest first."""
    n = max(1, len(buckets))
    top = _nice_max(max((b["processed"] + b["failed"] for b in buckets), default=0))
    fmt = "%H:%M" if unit == "minute" else "%b %d"
    bars = []
    for i, b in enumerate(buckets):
        hp = HEIGHT * b["processed"] / top
        hf = HEIGHT * b["failed"] / top
        label = dt.datetime.fromtimestamp(b["start"] / 1000, dt.UTC).strftime(fmt)
        bars.append(
            {
                **_slot(i, n),
                "yp": round(HEIGHT - hp, 2),
                "hp": round(hp, 2),
                "yf": round(HEIGHT - hp - hf, 2),
                "hf": round(hf, 2),
                "title": f"{label} UTC: {b['processed']} processed, {b['failed']} failed",
            }
        )
    labels = _labels(buckets, fmt)
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "max": top,
        "bars": bars,
        "labels": labels,
        "processed": sum(b["processed"] for b in buckets),
        "failed": sum(b["failed"] for b in buckets),
    }
