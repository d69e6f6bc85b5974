"""Stopping the crawl from within: the frontier, the store, the duplicates file, a feed
or the page limit ask it when they cannot go on (a full disk, say); what was committed stays."""

from __future__ import annotations

import logging

from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def stop_crawl(crawler: Crawler, reason: str) -> None:
    """Close the spider soon (from the reactor), with ``reason`` as its finish reason."""
    try:
        engine = crawler.engine
    except RuntimeError:  # not crawling
        return
    from scrapy.utils.asyncio import call_later
    from scrapy.utils.defer import deferred_from_coro

    call_later(0, lambda: deferred_from_coro(engine.close_spider_async(reason=reason)))


def stop_for_failed_write(crawler: Crawler, who: str, what: str, exc: BaseException, reason: str,
                          shown: str | None = None) -> None:
    """``what`` (a store, the duplicates file, a feed) cannot be written (a full or read-only
    disk): say so once, as the error, keep it in the stat ``neardup/<reason>`` and stop the crawl
    with ``reason``. What was committed stays: the resume goes on from there. ``shown``: the
    error as the log gives it (default: its message)."""
    stat = f"neardup/{reason}"
    if crawler.stats.get_value(stat):  # (said once: more than one gate or page may meet it)
        return
    logger.error("%s: %s cannot be written (%s); stopping the crawl. What was committed is kept: fix the cause "
                 "and resume with the same JOBDIR", who, what, exc if shown is None else shown)
    crawler.stats.set_value(stat, f"{type(exc).__name__}: {exc}"[:200])
    stop_crawl(crawler, reason)
