"""A line per run of a persistent crawl (``JOBDIR``): when it started, whether
it resumed an earlier run, and how it ended, with its counts.

``JOBDIR/neardup/runs.jsonl`` gets a ``start`` line when the spider opens
(``resume``: an earlier run of the job is in the file; the fingerprints in
the store and the requests the frontier hands out again) and a ``close``
line when it closes (the reason and ``crawler.counts``' counts, and under
``ranged`` those of ``RANGED_GET_STATS`` it counted, by their last part). A run that
was killed has a ``start`` line and no ``close``: ``neardup report`` shows
it as killed. Each line is flushed when written; a last line a kill cut short
is skipped by the reader (``read_runs``). Nothing is written without ``JOBDIR``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from scrapy.statscollectors import StatsCollector

from scrapy_neardup.dedup.store.backends import private_file

from ..clock import utc_now
from ..counts import RANGED_GET_STATS, CrawlCounts

logger = logging.getLogger(__name__)

FILENAME = "runs.jsonl"


def runs_path(jobdir: str | Path) -> Path:
    return Path(jobdir) / "neardup" / FILENAME


def read_runs(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The lines of a runs file (``[]`` if there is none) and how many could
    not be read (skipped). O(file size)."""
    p = Path(path)
    if not p.is_file():
        return [], 0
    lines, bad = [], 0
    for raw in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            bad += 1
            continue
        if isinstance(line, dict) and line.get("event") in ("start", "close"):
            lines.append(line)
        else:
            bad += 1
    return lines, bad


class RunsLog:
    """Appends this run's lines to ``JOBDIR/neardup/runs.jsonl``."""

    def __init__(self, jobdir: str | Path, stats: StatsCollector) -> None:
        self.path = runs_path(jobdir)
        self.stats = stats
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_file(self.path)
        earlier, _ = read_runs(self.path)
        self.resume = any(line["event"] == "start" for line in earlier)

    def _write(self, line: dict[str, Any]) -> None:
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        except OSError as exc:  # (a record for people: the crawl goes on without it)
            logger.warning("could not write %s: %s", self.path, exc)

    def started(self, fingerprints: int) -> None:
        self._write({"event": "start", "time": utc_now(), "resume": self.resume, "fingerprints": fingerprints,
                     "redelivered": int(self.stats.get_value("neardup/frontier/redelivered", 0))})

    def closed(self, reason: str) -> None:
        stats = self.stats.get_stats()
        counts = CrawlCounts.from_stats(stats)
        ranged = {key.rsplit("/", 1)[1]: int(stats[key]) for key in RANGED_GET_STATS if stats.get(key)}
        self._write({"event": "close", "time": utc_now(), "reason": reason, **asdict(counts),
                     **({"ranged": ranged} if ranged else {})})
