"""IndexPipeline: writes kept pages (items with url/text) into the FTS5 index.

The writing (segmenting the text into words, SQLite inserts, commits) runs
in a thread of its own, in transactions of up to ``BATCH`` pages or every
``INTERVAL`` seconds, so the crawl's thread only hands the item over.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from .config import NearDupConfig
from .index import PageIndex

logger = logging.getLogger(__name__)

BATCH = 200
INTERVAL = 1.0
_DONE = object()


class IndexPipeline:
    def __init__(self, crawler: Crawler, path: str) -> None:
        self.stats = crawler.stats
        self.path = path
        self._queue: queue.Queue[Any] = queue.Queue()
        self._total = 0  # pages in the index when the writer stops
        PageIndex(path).close()  # here, so that a bad path fails the crawl at start, naming it
        self._writer = threading.Thread(target=self._write, name="neardup-index", daemon=True)
        self._writer.start()
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexPipeline:
        config = NearDupConfig.of(crawler)
        if not config.enabled or not config.index:
            raise NotConfigured("NEARDUP_INDEX is off")
        return cls(crawler, config.index)

    def process_item(self, item: Any) -> Any:
        a = ItemAdapter(item)
        if a.get("url") and a.get("text") is not None:
            self._queue.put((a["url"], a.get("title") or "", a["text"], a.get("fingerprint") or "",
                             a.get("fetched_at") or "", int(a.get("status") or 0)))
        return item

    def _write(self) -> None:
        index = PageIndex(self.path)  # (an SQLite connection stays in the thread that made it)
        try:
            done = False
            while not done:
                batch = []
                item = self._queue.get()
                while True:
                    if item is _DONE:
                        done = True
                        break
                    batch.append(item)
                    if len(batch) >= BATCH:
                        break
                    try:
                        item = self._queue.get(timeout=INTERVAL)
                    except queue.Empty:
                        break
                if batch:
                    try:
                        index.add_many(batch)
                    except Exception:  # a failing write must not stop the crawl
                        logger.exception("index: could not write %d pages to %s", len(batch), self.path)
                        self.stats.inc_value("neardup/index_errors", len(batch))
                        continue
                    self.stats.inc_value("neardup/indexed", len(batch))
        finally:
            self._total = len(index)
            index.close()

    def spider_closed(self, reason: str) -> None:
        self._queue.put(_DONE)
        self._writer.join()
        logger.info("index: %d pages in %s", self._total, self.path)
