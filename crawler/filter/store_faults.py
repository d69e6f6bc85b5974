"""What the filter does when its stores fail.

* A shared store that cannot be reached (``StoreUnavailable``: its Redis is
  down or failing over) is ridden out as ``NEARDUP_STORE_UNAVAILABLE`` says:
  ``"pause"`` holds the pages, asking again with backoff (0.5 s doubling
  up to 30 s), ``"pass"`` lets them through unchecked
  (``neardup/skipped/store_unavailable``) until it is back. Each outage is
  counted (``neardup/store_outages``) and logged, and so is its end.
* Any other failure of the store (``FILE_ERRORS``: a full or read-only disk,
  a removed file) stops the crawl (``stop_the_crawl``): what was committed
  stays, and a resume with the same JOBDIR goes on from there. (The rule
  book's failures cost only the learning: ``learned_rules``.)
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable

from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.reactor import is_asyncio_reactor_installed

from scrapy_neardup.dedup.store import StoreUnavailable
from scrapy_neardup.dedup.store.backends import StoreError

from ..config import NearDupConfig
from ..counts import count_unchecked
from ..frontier.stop import stop_for_failed_write
from .verdict import SKIPPED

logger = logging.getLogger(__name__)

#: What the filter's stores can fail with (a store or rule book on disk or on Redis): the crawl goes on or stops cleanly
FILE_ERRORS = (StoreError, sqlite3.Error, OSError)
#: Seconds between attempts to reach a shared store that is down: the first, and the most
MIN_BACKOFF, MAX_BACKOFF = 0.5, 30.0


async def sleep(seconds: float) -> None:
    """Sleep without holding up the reactor, whichever reactor it is."""
    if is_asyncio_reactor_installed():
        await asyncio.sleep(seconds)
    else:
        from twisted.internet import reactor, task

        await maybe_deferred_to_future(task.deferLater(reactor, seconds, lambda: None))


class StoreOutage:
    """Rides out a shared store's outages; see the module docstring."""

    def __init__(self, config: NearDupConfig, stats: StatsCollector) -> None:
        self.config = config
        self.stats = stats
        self._down_since: float | None = None
        self._down_until = 0.0  # not asked again before this (time.monotonic())
        self._backoff = MIN_BACKOFF

    async def decide(self, needs_store: bool, decide: Callable[[bool], str]) -> str:
        """``decide(retried)`` once the store answers. ``needs_store``: the page
        has a fingerprint to check (others are decided at once). ``retried``:
        an earlier attempt failed, so the page's record may be half-written."""
        retried = False
        while True:
            wait = self._down_until - time.monotonic()
            if wait > 0 and needs_store:
                if self.config.store_unavailable == "pass":
                    count_unchecked(self.stats, "store_unavailable")
                    return SKIPPED
                await sleep(wait)
                continue
            try:
                verdict = decide(retried)
            except StoreUnavailable as exc:
                self._down(exc)
                retried = True
                continue
            if self._down_since is not None:
                logger.warning("near-duplicate filter: the store %s is back after %.0f s", self.config.store_shown,
                               time.monotonic() - self._down_since)
                self._down_since, self._backoff = None, MIN_BACKOFF
            return verdict

    def _down(self, exc: Exception) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            self.stats.inc_value("neardup/store_outages")
            logger.warning("near-duplicate filter: %s; %s until it is back (NEARDUP_STORE_UNAVAILABLE=%r)", exc,
                           "pausing pages" if self.config.store_unavailable == "pause" else
                           "letting pages through unchecked", self.config.store_unavailable)
        self._down_until = now + self._backoff
        self._backoff = min(self._backoff * 2, MAX_BACKOFF)


def stop_the_crawl(crawler: Crawler, config: NearDupConfig, exc: BaseException) -> None:
    """The store cannot be written (disk full, read-only, removed): stop the
    crawl; every record committed so far stays, and a resume goes on from there."""
    stop_for_failed_write(crawler, "near-duplicate filter", f"its files (store {config.store_shown})", exc,
                          "store_error", shown=f"{type(exc).__name__}: {exc}")
