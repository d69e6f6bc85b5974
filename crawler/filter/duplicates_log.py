"""Every drop explained: a JSON line in the duplicates file and a DEBUG log line.

Two kinds of line: a page dropped as a near-duplicate (``url``,
``duplicate_of``, ``distance``, both fingerprints, ``referer``, ``time``)
and a request a learned URL rule left out (``avoided: true``, ``rule``).
The file is written in blocks: flushed at least every second, before a
request whose drop it holds is acknowledged (it is a gate of the durable
frontier, ``crawler.frontier.acks``) and at the end; a flush per drop would
be a syscall per page on a mirror.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from scrapy.crawler import Crawler

from scrapy_neardup.dedup.simhash import to_hex
from scrapy_neardup.dedup.store.backends import private_file

from ..frontier.acks import AckTracker

logger = logging.getLogger(__name__)

#: Seconds a written line may wait in the buffer
FLUSH_EVERY = 1.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class DuplicatesLog:
    """The duplicates file (``path``; None: log lines only)."""

    def __init__(self, crawler: Crawler, path: str | None) -> None:
        self._fh: IO[str] | None = None
        self._flushed = time.monotonic()
        self._written = self._synced = 0
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            private_file(path)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115
            AckTracker.of(crawler).add_gate(self)  # a drop is acknowledged only once its line is written

    def dropped(self, url: str, duplicate_of: str, distance: int, fingerprint: int, duplicate_of_fingerprint: int,
                referer: str | None) -> None:
        """``url`` was dropped as a near-duplicate of ``duplicate_of``."""
        self._write({
            "url": url,
            "duplicate_of": duplicate_of,
            "distance": distance,
            "fingerprint": to_hex(fingerprint),
            "duplicate_of_fingerprint": to_hex(duplicate_of_fingerprint),
            "referer": referer,
            "time": _now(),
        })
        logger.debug("near-duplicate dropped: %s duplicates %s (distance %d)", url, duplicate_of, distance)

    def avoided(self, url: str, duplicate_of: str, rule: str, referer: str | None) -> None:
        """``url`` is not requested: URL rule ``rule`` says ``duplicate_of`` has its content."""
        self._write({"url": url, "duplicate_of": duplicate_of, "avoided": True, "rule": rule, "referer": referer,
                     "time": _now()})
        logger.debug("not requested: %s (rule %s: %s has its content)", url, rule, duplicate_of)

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()

    # the duplicates file as a gate of the durable frontier (crawler.frontier.acks)
    def mark(self) -> int:
        return self._written

    def settled(self, token: int) -> bool:
        if self._synced < token:
            self._flush()
        return True

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._written += 1
            if time.monotonic() - self._flushed >= FLUSH_EVERY:
                self._flush()

    def _flush(self) -> None:
        if self._fh and self._synced < self._written:
            self._fh.flush()
            self._synced = self._written
        self._flushed = time.monotonic()
