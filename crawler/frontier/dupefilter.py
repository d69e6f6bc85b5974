"""``DurableDupeFilter``: the seen set of the durable frontier (``DUPEFILTER_CLASS``).

Request fingerprints (Scrapy's ``REQUEST_FINGERPRINTER``, 20 bytes) in the
frontier's SQLite file, written in the same transactions as the queue, so
that after a crash no URL is seen without being queued or done. Memory does
not grow with the crawl (RFPDupeFilter keeps every fingerprint in a Python
set): a bounded cache (``RECENT_SEEN``, least recently used out) answers most
repeats, the many links to the same pages, without a statement on the file;
the rest cost O(log n).

Its file is opened by ``DurableScheduler``. Used with another scheduler (an
add-on loaded after this project's that sets its own ``SCHEDULER``, say) it
has no file: Scrapy's ``RFPDupeFilter`` does its work (its ``JOBDIR`` file
included), and it says so, rather than failing at every request.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.dupefilters import BaseDupeFilter, RFPDupeFilter

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
        self._plain: RFPDupeFilter | None = None  # (no durable frontier: Scrapy's own does the work)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DurableDupeFilter:
        return cls(crawler)

    def attach(self, db: FrontierDB) -> None:
        self.db = db

    def open(self) -> None:
        """Opened by the scheduler, after ``attach`` if it is the durable frontier's."""
        if self.db is None and self._plain is None:
            logger.warning("DUPEFILTER_CLASS %s without the durable frontier (SCHEDULER %s): Scrapy's "
                           "RFPDupeFilter takes its place", type(self).__name__, self.crawler.settings["SCHEDULER"])
            self._plain = RFPDupeFilter.from_crawler(self.crawler)
            self._plain.open()

    def close(self, reason: str) -> None:
        if self._plain is not None:
            self._plain.close(reason)

    def request_seen(self, request: Request) -> bool:
        if self._plain is not None:
            return self._plain.request_seen(request)
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
        if self._plain is not None:
            self._plain.log(request, spider)
            return
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request}, extra={"spider": spider})
        elif not self._logged:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown "
                         "(see DUPEFILTER_DEBUG to show all duplicates)", {"request": request}, extra={"spider": spider})
            self._logged = True
        self.crawler.stats.inc_value("dupefilter/filtered")
