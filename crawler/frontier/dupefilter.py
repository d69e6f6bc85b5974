"""``DurableDupeFilter``: the seen set of the durable frontier (``DUPEFILTER_CLASS``).

Request fingerprints (Scrapy's ``REQUEST_FINGERPRINTER``, 20 bytes) in the
frontier's SQLite file, written in the same transactions as the queue, so
that after a crash no URL is seen without being queued or done. Memory does
not grow with the crawl (RFPDupeFilter keeps every fingerprint in a Python
set). O(log n) per request.

Its file is opened by ``DurableScheduler``; used with another scheduler it
has nothing to write to, and says so.
"""

from __future__ import annotations

import logging

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.dupefilters import BaseDupeFilter

from .db import FrontierDB

logger = logging.getLogger(__name__)


class DurableDupeFilter(BaseDupeFilter):
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.fingerprinter = crawler.request_fingerprinter
        self.debug = crawler.settings.getbool("DUPEFILTER_DEBUG")
        self.db: FrontierDB | None = None
        self._logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DurableDupeFilter:
        return cls(crawler)

    def attach(self, db: FrontierDB) -> None:
        self.db = db

    def request_seen(self, request: Request) -> bool:
        if self.db is None:
            raise RuntimeError("DurableDupeFilter works with crawler.frontier.scheduler.DurableScheduler "
                               "(SCHEDULER), which holds its file")
        return not self.db.seen_add(self.fingerprinter.fingerprint(request))

    def log(self, request: Request, spider: Spider) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request}, extra={"spider": spider})
        elif not self._logged:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown "
                         "(see DUPEFILTER_DEBUG to show all duplicates)", {"request": request}, extra={"spider": spider})
            self._logged = True
        self.crawler.stats.inc_value("dupefilter/filtered")
