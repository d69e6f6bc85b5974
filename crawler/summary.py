"""SummaryExtension: one line at the end of a crawl."""

from __future__ import annotations

import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from .config import NearDupConfig

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

    def line(self) -> str:
        g = self.stats.get_value
        return (f"neardup summary: {g('response_received_count', 0)} pages fetched, "
                f"{g('neardup/kept', 0)} kept, {g('neardup/dropped', 0)} dropped as near-duplicates, "
                f"{g('neardup/unchanged', 0)} unchanged, {g('neardup/outlinks_dropped', 0)} outlinks not requested, "
                f"{g('neardup/requests_avoided', 0)} requests avoided by learned URL rules, "
                f"{g('downloader/response_bytes', 0)} bytes downloaded")

    def spider_closed(self, reason: str) -> None:
        logger.info(self.line())
