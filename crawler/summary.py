"""SummaryExtension: one line at the end of a crawl, with the crawl's counts.

``neardup summary: 22 pages fetched, 15 kept, 5 dropped as near-duplicates,
0 unchanged, 2 passed through unchecked, 33 outlinks not requested, 0
requests avoided by learned URL rules, 48668 bytes downloaded``: each count
as ``crawler.counts`` defines it and words it.
"""

from __future__ import annotations

import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from .config import NearDupConfig
from .counts import CrawlCounts

logger = logging.getLogger(__name__)

class SummaryExtension:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SummaryExtension:
        if not NearDupConfig.of(crawler).enabled:
            raise NotConfigured("NEARDUP_ENABLED is off")
        return cls(crawler)

    def counts(self) -> CrawlCounts:
        return CrawlCounts.from_stats(self.stats.get_stats())

    def line(self) -> str:
        return f"neardup summary: {self.counts().sentence()}"

    def spider_closed(self, reason: str) -> None:
        logger.info(self.line())
