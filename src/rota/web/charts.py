"""Bar charts of processed and failed jobs, drawn on the server as SVG geometry.

The template turns each bar into ``<rect>`` elements; no script is needed to see them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["bar_chart"]

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


def bar_chart(buckets: list[dict[str, Any]], unit: str) -> dict[str, Any]:
    """Stacked bars (processed below, failed above) for buckets of one ``unit``
    ('minute' or 'day'), oldest first."""
    n = max(1, len(buckets))
    top = _nice_max(max((b["processed"] + b["failed"] for b in buckets), default=0))
    slot = WIDTH / n
    gap = slot * 0.15
    fmt = "%H:%M" if unit == "minute" else "%b %d"
    bars = []
    for i, b in enumerate(buckets):
        x = i * slot + gap / 2
        hp = HEIGHT * b["processed"] / top
        hf = HEIGHT * b["failed"] / top
        label = dt.datetime.fromtimestamp(b["start"] / 1000, dt.UTC).strftime(fmt)
        bars.append(
            {
                "x": round(x, 2),
                "w": round(slot - gap, 2),
                "slot_x": round(i * slot, 2),
                "slot_w": round(slot, 2),
                "yp": round(HEIGHT - hp, 2),
                "hp": round(hp, 2),
                "yf": round(HEIGHT - hp - hf, 2),
                "hf": round(hf, 2),
                "title": f"{label} UTC: {b['processed']} processed, {b['failed']} failed",
            }
        )
    labels = []
    if buckets:
        for i in sorted({0, len(buckets) // 2, len(buckets) - 1}):
            stamp = dt.datetime.fromtimestamp(buckets[i]["start"] / 1000, dt.UTC)
            labels.append(stamp.strftime(fmt))
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "max": top,
        "bars": bars,
        "labels": labels,
        "processed": sum(b["processed"] for b in buckets),
        "failed": sum(b["failed"] for b in buckets),
    }
