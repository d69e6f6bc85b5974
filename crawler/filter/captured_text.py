"""The visible text of dropped pages, kept for the report's differences (opt-in).

``neardup report`` shows what differs between a dropped page and its kept
twin: the changed lines of their visible text. The twin's text is in the
index; a dropped page's is recorded nowhere, unless ``NEARDUP_DROPPED_TEXT_BYTES``
is set (0, the default: off). Then each new drop's text (the text the filter
fingerprinted, its first ``MAX_CHARS`` characters) goes, zlib-compressed, to
``dropped_text.sqlite3`` beside the duplicates file, until the file's texts
reach that many bytes; later drops are counted (``neardup/dropped_text/over_cap``)
and not kept.

The capture is a record for people, not crawl state: rows are committed
every second (``COMMIT_EVERY``) and at the end, so a kill may lose the
last second's texts (their drops are still in the duplicates file). An
insert of a few kilobytes into SQLite in WAL mode without a sync per row
costs the crawl's thread some tens of microseconds.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import zlib
from pathlib import Path

from scrapy.statscollectors import StatsCollector

from scrapy_neardup.dedup.store.backends import private_file

logger = logging.getLogger(__name__)

FILENAME = "dropped_text.sqlite3"
#: Characters of a page's text kept (the differences of a page longer than this are of its start)
MAX_CHARS = 20_000
COMMIT_EVERY = 1.0  # seconds
CAPTURED, OVER_CAP = "neardup/dropped_text/captured", "neardup/dropped_text/over_cap"

_SCHEMA = "CREATE TABLE IF NOT EXISTS dropped_text (url TEXT PRIMARY KEY, text BLOB NOT NULL)"


def capture_path(duplicates_file: str | Path) -> Path:
    """Where the texts of the drops in ``duplicates_file`` are kept."""
    return Path(duplicates_file).parent / FILENAME


class CapturedText:
    """Keeps dropped pages' text in ``path``, up to ``cap`` bytes (compressed) in all."""

    def __init__(self, path: str | Path, cap: int, stats: StatsCollector) -> None:
        self.path = Path(path)
        self.cap = cap
        self.stats = stats
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_file(self.path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)  # (as the rule book's)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(_SCHEMA)
        # (a resumed crawl goes on filling the same budget)
        self.size = self.db.execute("SELECT COALESCE(SUM(LENGTH(text)), 0) FROM dropped_text").fetchone()[0]
        self._full_said = False
        self.db.execute("BEGIN")
        self._committed = time.monotonic()

    def add(self, url: str, text: str) -> None:
        """Keep ``url``'s text unless it is kept already or the cap is reached. O(len(text))."""
        blob = zlib.compress(text[:MAX_CHARS].encode("utf-8", "replace"), 6)
        if self.size + len(blob) > self.cap:
            self.stats.inc_value(OVER_CAP)
            if not self._full_said:
                self._full_said = True
                logger.info("dropped pages' text: %s holds %d bytes, NEARDUP_DROPPED_TEXT_BYTES is %d; later "
                            "drops' text is not kept", self.path, self.size, self.cap)
            return
        if self.db.execute("INSERT OR IGNORE INTO dropped_text VALUES (?, ?)", (url, blob)).rowcount:
            self.size += len(blob)
            self.stats.inc_value(CAPTURED)
        if time.monotonic() - self._committed >= COMMIT_EVERY:
            self.db.execute("COMMIT")
            self.db.execute("BEGIN")
            self._committed = time.monotonic()

    def close(self) -> None:
        if self.db is not None:
            self.db.execute("COMMIT")
            self.db.close()
            self.db = None  # type: ignore[assignment]


def read_texts(path: str | Path, urls: set[str]) -> dict[str, str]:
    """The kept texts of ``urls`` in the capture file ``path``, read-only
    (``{}`` if there is no such file). Raises ``sqlite3.DatabaseError`` for a
    damaged file. O(len(urls) log n)."""
    p = Path(path)
    if not p.is_file() or not urls:
        return {}
    db = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        out = {}
        wanted = sorted(urls)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            for url, blob in db.execute(f"SELECT url, text FROM dropped_text WHERE url IN "
                                        f"({','.join('?' * len(chunk))})", chunk):
                out[url] = zlib.decompress(blob).decode("utf-8", "replace")
        return out
    finally:
        db.close()
