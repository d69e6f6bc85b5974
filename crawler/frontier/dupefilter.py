"""``DurableDupeFilter``: the seen set of the durable frontier (``DUPEFILTER_CLASS``).

Request fingerprints (Scrapy's ``REQUEST_FINGERPRINTER``, 20 bytes) in the
frontier's SQLite file, written in the same transactions as the queue, so
that after a crash no URL is seen without being queued or done. Memory does
not grow with the crawl (RFPDupeFilter keeps every fingerprint in a Python
set): a bounded cache (``RECENT_SEEN``, least recently used out) answers most
repeats, the many links to the same pages, without a statement on the file;
the rest cost O(log n).

Its file is opened by ``DurableScheduler``; used with another scheduler it
has nothing to write to, and says so.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.dupefilters import BaseDupeFilter

from .db import FrontierDB

logger = logging.getLogger(__name__)

#: Fingerprints held in memory (about 100 bytes each): a site's navigation links, met on
#: every page, are answered without asking the file. The seen set only grows, so a
#: fingerprint held here is seen in the file too.
RECENT_SEEN = 100_000


class DurableDupeFilter(BaseDupeFilter):
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.fingerprinter = crawler.request_fingerprinter
        self.debug = crawler.settings.getbool("DUPEFILTER_DEBUG")
        self.db: FrontierDB | None = None
        self._logged = False
        self._recent: OrderedDict[bytes, None] = OrderedDict()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DurableDupeFilter:
        return cls(crawler)

    def attach(self, db: FrontierDB) -> None:
        self.db = db

    def request_seen(self, request: Request) -> bool:
        if self.db is None:
            raise RuntimeError("DurableDupeFilter works with crawler.frontier.scheduler.DurableScheduler "
                               "(SCHEDULER), which holds its file")
        fp = self.fingerprinter.fingerprint(request)
        recent = self._recent
        if fp in recent:
            recent.move_to_end(fp)
            return True
        seen = not self.db.seen_add(fp)
        recent[fp] = None
        if len(recent) > RECENT_SEEN:
            recent.popitem(last=False)
        return seen

    def log(self, request: Request, spider: Spider) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request}, extra={"spider": spider})
        elif not self._logged:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown "
                         "(see DUPEFILTER_DEBUG to show all duplicates)", {"request": request}, extra={"spider": spider})
            self._logged = True
        self.crawler.stats.inc_value("dupefilter/filtered")
