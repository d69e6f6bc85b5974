"""The report's plots: static SVG drawn by matplotlib (the ``[report]`` extra).

Static SVG needs no script in the report, so its Content-Security-Policy
can forbid every script; each plot is an ``<img>`` of a ``data:`` URI, and
an SVG shown as an image runs nothing and fetches nothing. (Vega-Lite
through altair needs its JavaScript inlined, about 1 MB, and, without its
CSP-safe interpreter, ``unsafe-eval``: see BENCHMARKS.md.) Text stays text
(``svg.fonttype = none``: smaller, and crisp at any zoom). Labels that come
from pages (hosts, path prefixes) are drawn as plain text: matplotlib's
math syntax is off, and long labels are cut.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

MISSING = ("the report draws its plots with matplotlib, which is not installed: "
           "pip install 'scrapy-neardup[report]'")

#: Colours: kept, dropped, avoided (colour-blind safe: Okabe-Ito)
KEPT_C, DROPPED_C, AVOIDED_C, BAR_C = "#009E73", "#D55E00", "#0072B2", "#56B4E9"
LABEL_CHARS = 72


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError(MISSING) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "svg.fonttype": "none", "svg.hashsalt": "neardup", "text.parse_math": False, "font.size": 10,
        "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False,
        "axes.titlesize": 11, "axes.titleweight": "bold", "axes.titlelocation": "left",
    })
    return plt


def _cut(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def _counts(axis: Any) -> None:
    """Whole numbers only on an axis of counts."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _svg(fig: Any) -> str:
    """The figure as a ``data:`` URI of its SVG (the figure is closed)."""
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def timeline(kept: Sequence[float], dropped: Sequence[float], avoided: Sequence[float]) -> str:
    """Cumulative pages kept and dropped and requests avoided, over time. O(n log n)."""
    import datetime as dt

    import numpy as np

    plt = _pyplot()
    from matplotlib.dates import DateFormatter

    fig, ax = plt.subplots(figsize=(8.5, 3.2))
    every = [x for times in (kept, dropped, avoided) for x in (min(times, default=None), max(times, default=None))
             if x is not None]
    # (matplotlib's own labels for a crawl of seconds read "45:49.000000": the hour, always)
    ax.xaxis.set_major_formatter(DateFormatter("%H:%M:%S" if every and max(every) - min(every) <= 86_400
                                               else "%Y-%m-%d %H:%M"))
    for times, label, colour in ((kept, "kept", KEPT_C), (dropped, "dropped as near-duplicates", DROPPED_C),
                                 (avoided, "requests avoided", AVOIDED_C)):
        if not len(times):
            continue
        t = np.sort(np.asarray(times, dtype=float))
        # at most 2,000 points a line: the shape, not every event
        step = max(1, len(t) // 2000)
        idx = np.r_[np.arange(0, len(t), step), len(t) - 1]
        when = [dt.datetime.fromtimestamp(x, dt.timezone.utc) for x in t[idx]]
        ax.step(when, idx + 1, where="post", label=f"{label} ({len(t):,})", color=colour, linewidth=1.8)
    _counts(ax.yaxis)
    ax.set_ylabel("count (cumulative)")
    ax.set_xlabel("time (UTC)")
    ax.set_title("Pages kept and dropped over time")
    ax.legend(frameon=False, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.autofmt_xdate()
    return _svg(fig)


def distances(counts: Counter[int], k: int) -> str:
    """Drops by Hamming distance, 0..k."""
    plt = _pyplot()
    top = max([k, *counts])
    xs = list(range(0, top + 1))
    ys = [counts.get(x, 0) for x in xs]
    fig, ax = plt.subplots(figsize=(4.2, 3.0))
    bars = ax.bar(xs, ys, color=DROPPED_C, width=0.7)
    ax.bar_label(bars, labels=[f"{y:,}" for y in ys], fontsize=9, padding=2)
    ax.set_xticks(xs)
    _counts(ax.yaxis)
    ax.set_xlabel("Hamming distance to the kept twin (bits)")
    ax.set_ylabel("drops")
    ax.set_title("Distances of the drops")
    ax.margins(y=0.15)
    return _svg(fig)


def bars(rows: Sequence[tuple[str, int]], title: str, xlabel: str, colour: str = BAR_C) -> str:
    """Horizontal bars, the largest on top, each labelled above its bar: a long label (a URL prefix)
    takes the plot's width, not a margin, so every such plot has the same width and text size."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 0.6 + 0.42 * len(rows)))
    values = [v for _, v in rows]
    drawn = ax.barh(range(len(rows)), values, color=colour, height=0.42)
    ax.bar_label(drawn, labels=[f"{v:,}" for v in values], fontsize=9, padding=3)
    for i, (label, _) in enumerate(rows):
        ax.text(0, i - 0.26, _cut(label), va="bottom", ha="left", fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.9)  # (the largest on top, and room for its label)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    _counts(ax.xaxis)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.margins(x=0.12)
    return _svg(fig)
