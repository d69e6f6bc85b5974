"""IndexPipeline: writes kept pages (items with url/text) into the FTS5 index."""

from __future__ import annotations

import logging
from typing import Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from .config import NearDupConfig
from .index import PageIndex

logger = logging.getLogger(__name__)


class IndexPipeline:
    def __init__(self, crawler: Crawler, path: str) -> None:
        self.stats = crawler.stats
        self.index = PageIndex(path)
        self.path = path
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexPipeline:
        config = NearDupConfig.from_settings(crawler.settings)
        if not config.enabled or not config.index:
            raise NotConfigured("NEARDUP_INDEX is off")
        return cls(crawler, config.index)

    def process_item(self, item: Any) -> Any:
        a = ItemAdapter(item)
        if a.get("url") and a.get("text") is not None:
            self.index.add(a["url"], a.get("title") or "", a["text"], a.get("fingerprint") or "",
                           a.get("fetched_at") or "", int(a.get("status") or 0))
            self.stats.inc_value("neardup/indexed")
        return item

    def spider_closed(self, reason: str) -> None:
        logger.info("index: %d pages in %s", len(self.index), self.path)
        self.index.close()
