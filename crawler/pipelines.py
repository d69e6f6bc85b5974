"""IndexPipeline: the index of the pages the filter let through, written by the filter.

The index is the filter's, not the spider's: the filter hands it each page
it lets through as itself (``index_page``: kept, kept again, unchanged, or
passed unchecked with its text extracted), with the URL, title, visible
text and language it already extracted, whatever items the spider yields or
does not yield. A user's items pass through untouched.

The writing (segmenting the text into words, SQLite inserts, commits) runs
in a thread of its own, so the crawl's thread only hands the page over. The
writer commits whatever has queued up, up to ``BATCH`` pages a transaction,
as soon as it can (group commit). It is a gate of the durable frontier
(``crawler.frontier.acks``): the filter hands a page over before any of its
output leaves, so its request is acknowledged only after the page is
committed here. The index holds one row per URL, so a page fetched again
after a kill is still there once: the index is the crawl's exactly-once
output. A page dropped as a near-duplicate is handed over too, so that a
kept page's row can take it as its declared canonical URL
(``PageIndex.take_canonical``, counted ``neardup/canonical_taken``).

It sits among the item pipelines (``ITEM_PIPELINES``, order 800) for their
``close_spider``, which Scrapy calls before the scheduler's last commit: the
writer is drained there, so that commit acknowledges the last pages.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import weakref
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from scrapy_neardup.dedup.fingerprint.jobs import JobResult
from scrapy_neardup.dedup.simhash import to_hex

from .clock import utc_now
from .config import NearDupConfig
from .filter.verdict import DROPPED
from .frontier.acks import AckTracker
from .frontier.db import recorded_store_size
from .index import CanonicalFetched, PageIndex, PageRow

logger = logging.getLogger(__name__)

BATCH = 200
_DONE = object()


class IndexPipeline:
    """The crawl's index writer (``IndexPipeline.of(crawler)``); see the module docstring."""

    def __init__(self, crawler: Crawler, path: str, max_distance: int = 3) -> None:
        self.stats = crawler.stats
        self.path = path
        self.max_distance = max_distance  # (a canonical URL is taken only by a near-duplicate)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._handed = 0  # pages handed to the writer (the crawl's thread)
        self._done = 0  # pages the writer has committed (the writer's thread)
        self._total = 0  # pages in the index when the writer stops
        existed = os.path.exists(path)
        PageIndex(path).close()  # here, so that a bad path fails the crawl at start, naming it
        jobdir = crawler.settings.get("JOBDIR")
        if not existed and jobdir and recorded_store_size(jobdir):
            # (removed between runs: the pages kept before are done for the frontier and are not fetched again)
            logger.warning("index %s is new, but the crawl in %s ran before: the pages its earlier runs kept "
                           "are not in it (they are not fetched again)", path, jobdir)
        self._writer = threading.Thread(target=self._write, name="neardup-index", daemon=True)
        self._writer.start()
        AckTracker.of(crawler).add_gate(self)  # (a gate of the durable frontier, if there is one)
        _INDEXES[crawler] = self

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexPipeline:
        config = NearDupConfig.of(crawler)
        if not config.enabled or not config.index:
            # (no message: Scrapy logs a NotConfigured with one as a WARNING, on every run
            # without JOBDIR, where the index is off by default)
            raise NotConfigured
        return cls(crawler, config.index, config.max_distance)

    @classmethod
    def of(cls, crawler: Crawler) -> IndexPipeline | None:
        """The crawl's index writer; None when the index is off."""
        return _INDEXES.get(crawler)

    def add(self, page: PageRow | CanonicalFetched) -> None:
        """Hand ``page`` to the writer (the crawl's thread)."""
        self._handed += 1
        self._queue.put(page)

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
                        taken = index.add_many(batch)
                    except Exception:
                        # Not counted as done: from here on no request is acknowledged, so
                        # a resume fetches these pages (and all later ones) again.
                        logger.exception("index: could not write %d pages to %s; the index takes no more "
                                         "pages in this run (they are fetched again on resume)", len(batch),
                                         self.path)
                        failed = True
                    else:
                        rows = sum(not isinstance(p, CanonicalFetched) for p in batch)
                        if rows:
                            self.stats.inc_value("neardup/indexed", rows)
                        if taken:
                            self.stats.inc_value("neardup/canonical_taken", taken)
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


def index_page(crawler: Crawler, response: Response, verdict: str, result: JobResult | str,
               canonical: str | None = None) -> None:
    """Hand the page to the crawl's index, if there is one, unless the filter
    extracted no text from it (a non-HTML response, an error page: passed
    unchecked before any extraction). ``canonical``: the URL the page declares
    canonical. A dropped page is not indexed: the index may only let a kept
    page's row take it as its canonical URL. Called by the filter once it has
    the page's verdict and before any of the page's output leaves."""
    index = _INDEXES.get(crawler)
    if index is None or isinstance(result, str):
        return
    page = PageRow(
        url=response.url, title=result.title, text=result.text, language=result.language,
        fingerprint="" if result.value is None else to_hex(result.value),
        fetched_at=utc_now(), status=response.status, canonical=canonical)
    index.add(CanonicalFetched(page, index.max_distance) if verdict == DROPPED else page)


_INDEXES: weakref.WeakKeyDictionary[Crawler, IndexPipeline] = weakref.WeakKeyDictionary()
