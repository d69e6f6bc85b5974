"""IndexPipeline: writes kept pages (items with url/text) into the FTS5 index.

The writing (segmenting the text into words, SQLite inserts, commits) runs
in a thread of its own, so the crawl's thread only hands the item over. The
writer commits whatever has queued up, up to ``BATCH`` pages a transaction,
as soon as it can (group commit). It is a gate of the durable frontier
(``crawler.frontier.acks``): a request is acknowledged only after its page
is committed here. The index holds one row per URL, so a page fetched again
after a kill is still there once: the index is the crawl's exactly-once output.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from .config import NearDupConfig
from .frontier.acks import AckTracker
from .index import PageIndex

logger = logging.getLogger(__name__)

BATCH = 200
_DONE = object()


class IndexPipeline:
    def __init__(self, crawler: Crawler, path: str) -> None:
        self.stats = crawler.stats
        self.path = path
        self._queue: queue.Queue[Any] = queue.Queue()
        self._handed = 0  # items handed to the writer (the crawl's thread)
        self._done = 0  # items the writer has committed (the writer's thread)
        self._total = 0  # pages in the index when the writer stops
        PageIndex(path).close()  # here, so that a bad path fails the crawl at start, naming it
        self._writer = threading.Thread(target=self._write, name="neardup-index", daemon=True)
        self._writer.start()
        AckTracker.of(crawler).add_gate(self)  # (a gate of the durable frontier, if there is one)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexPipeline:
        config = NearDupConfig.of(crawler)
        if not config.enabled or not config.index:
            raise NotConfigured("NEARDUP_INDEX is off")
        return cls(crawler, config.index)

    def process_item(self, item: Any) -> Any:
        a = ItemAdapter(item)
        if a.get("url") and a.get("text") is not None:
            self._handed += 1
            self._queue.put((a["url"], a.get("title") or "", a["text"], a.get("fingerprint") or "",
                             a.get("fetched_at") or "", int(a.get("status") or 0)))
        return item

    # the durable frontier's gate
    def mark(self) -> int:
        return self._handed

    def settled(self, token: int) -> bool:
        return self._done >= token

    def _write(self) -> None:
        index = PageIndex(self.path)  # (an SQLite connection stays in the thread that made it)
        try:
            done = failed = False
            while not done:
                batch = [self._queue.get()]
                while len(batch) < BATCH:  # whatever else is waiting: one transaction
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if batch[-1] is _DONE:
                    done = True
                    batch.pop()
                if batch and not failed:
                    try:
                        index.add_many(batch)
                    except Exception:
                        # Not counted as done: from here on no request is acknowledged, so
                        # a resume fetches these pages (and all later ones) again.
                        logger.exception("index: could not write %d pages to %s; the index takes no more "
                                         "pages in this run (they are fetched again on resume)", len(batch),
                                         self.path)
                        failed = True
                    else:
                        self.stats.inc_value("neardup/indexed", len(batch))
                        self._done += len(batch)
                if failed and batch:
                    self.stats.inc_value("neardup/index_errors", len(batch))
        finally:
            self._total = len(index)
            index.close()

    def close_spider(self) -> None:
        # (here, before the scheduler closes: its last commit acknowledges these pages)
        self._queue.put(_DONE)
        self._writer.join()
        logger.info("index: %d pages in %s", self._total, self.path)
