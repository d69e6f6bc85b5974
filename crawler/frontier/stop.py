"""Stopping the crawl from within: the frontier, the store, a feed or the page limit
ask it when they cannot go on (a full disk, say); what was committed stays."""

from __future__ import annotations

from scrapy.crawler import Crawler


def stop_crawl(crawler: Crawler, reason: str) -> None:
    """Close the spider soon (from the reactor), with ``reason`` as its finish reason."""
    try:
        engine = crawler.engine
    except RuntimeError:  # not crawling
        return
    from scrapy.utils.asyncio import call_later
    from scrapy.utils.defer import deferred_from_coro

    call_later(0, lambda: deferred_from_coro(engine.close_spider_async(reason=reason)))
