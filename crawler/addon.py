"""One-line setup: ``ADDONS = {"scrapy_neardup.NearDupAddon": 0}``.

``NearDupAddon`` installs the filter (its spider middleware, the downloader
middleware that leaves out requests a learned URL rule maps onto a fetched
page, the index pipeline and the summary extension; the report extension
when ``NEARDUP_REPORT`` is set) and, when the crawl persists (``JOBDIR``),
the durable frontier (``crawler.frontier``: a scheduler, a dupe filter and
two middlewares that say when a request is done) in place of Scrapy's
``JOBDIR`` queues, which a kill leaves empty. It changes nothing else. With
``NEARDUP_ENABLED = False`` it adds nothing at all, so the crawl is the
crawl without it.

``PoliteCrawlAddon`` is the opt-in crawl profile for sparing the servers:
robots.txt, AutoThrottle, 4 requests per domain and breadth-first order (so
the shallower, usually canonical URL of a pair is met first and kept).
Add it beside the first: ``ADDONS = {"scrapy_neardup.NearDupAddon": 0,
"scrapy_neardup.PoliteCrawlAddon": 0}``. Anything the project sets itself
wins over both (they write at "addon" priority, below "project").
"""

from __future__ import annotations

import logging
import sys

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.misc import load_object

logger = logging.getLogger(__name__)

MIDDLEWARE = "scrapy_neardup.crawler.middleware.NearDupMiddleware"
AVOID_MIDDLEWARE = "scrapy_neardup.crawler.avoid_middleware.AvoidMiddleware"
PIPELINE = "scrapy_neardup.crawler.pipelines.IndexPipeline"
SCHEDULER = "scrapy_neardup.crawler.frontier.scheduler.DurableScheduler"
DUPEFILTER = "scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter"
ACK_SPIDER_MIDDLEWARE = "scrapy_neardup.crawler.frontier.ack_middlewares.AckSpiderMiddleware"
ACK_DOWNLOADER_MIDDLEWARE = "scrapy_neardup.crawler.frontier.ack_middlewares.AckDownloaderMiddleware"
FEED_STORAGE = "scrapy_neardup.crawler.frontier.feeds.DurableFeedStorage"
EXTENSION = "scrapy_neardup.crawler.summary.SummaryExtension"
REPORT_EXTENSION = "scrapy_neardup.crawler.report.extension.ReportExtension"

#: Close to the spider (high order): it filters the callback's output before
#: other spider middlewares (depth, offsite) see or count it.
MIDDLEWARE_ORDER = 950
#: Before RobotsTxtMiddleware (100): a request a rule avoids needs no robots.txt either
AVOID_ORDER = 50
PIPELINE_ORDER = 800
EXTENSION_ORDER = 500
#: Outermost (lowest order) among spider and downloader middlewares: see crawler.frontier.ack_middlewares
ACK_ORDER = 5

POLITE_SETTINGS = {
    "ROBOTSTXT_OBEY": True,
    "AUTOTHROTTLE_ENABLED": True,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
    # Breadth-first: the shallower (usually canonical) URL of a pair is seen first.
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
}


#: Scrapy's commands that fetch a page or two to look at, not a crawl: the filter stays out of them, so
#: that they never write into a crawl's store, index or frontier (a project's JOBDIR): a page looked at
#: with ``scrapy fetch`` was then "unchanged" to the crawl, which emitted no item for it
NOT_A_CRAWL = frozenset({"fetch", "shell", "view", "parse", "check", "bench"})


def scrapy_command() -> str | None:
    """The command of Scrapy's command line this crawl runs under (``scrapy fetch URL``: ``"fetch"``);
    None in any other program (a script with ``CrawlerProcess``, ``neardup crawl``). Read from the frame
    of ``scrapy.cmdline.execute`` up the stack (Scrapy takes the command's name out of ``sys.argv``
    before it runs it). O(stack depth).

    >>> scrapy_command() is None  # (a doctest is no Scrapy command)
    True
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "execute" and frame.f_globals.get("__name__") == "scrapy.cmdline":
            name = frame.f_locals.get("cmdname")
            return name if isinstance(name, str) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _setdefault(settings: BaseSettings, name: str, component: str, order: int) -> None:
    """Add ``component`` to the component dict ``name`` at ``order`` unless the
    project lists it already (by class or by any import path): its order wins.
    Scrapy matches entries by the loaded class, so the class is passed, not the path."""
    settings.setdefault_in_component_priority_dict(name, load_object(component), order)


class NearDupAddon:
    """Installs the near-duplicate filter; nothing else."""

    def update_settings(self, settings: BaseSettings) -> None:
        from .switches import setting_bool  # (a bad value: an error that names the setting; imports no library)

        if not setting_bool(settings, "NEARDUP_ENABLED", True):
            return
        command = scrapy_command()
        if command in NOT_A_CRAWL:
            logger.info("neardup: off for `scrapy %s`, which looks at pages rather than crawls (a crawl's "
                        "store, index and frontier are left as they are)", command)
            return
        # setdefault: an order the project gave a component wins over ours
        _setdefault(settings, "SPIDER_MIDDLEWARES", MIDDLEWARE, MIDDLEWARE_ORDER)
        if setting_bool(settings, "NEARDUP_URL_RULES", True):
            _setdefault(settings, "DOWNLOADER_MIDDLEWARES", AVOID_MIDDLEWARE, AVOID_ORDER)
        _setdefault(settings, "ITEM_PIPELINES", PIPELINE, PIPELINE_ORDER)
        _setdefault(settings, "EXTENSIONS", EXTENSION, EXTENSION_ORDER)
        if settings.get("NEARDUP_REPORT"):  # (opt-in: the HTML report when the crawl closes)
            _setdefault(settings, "EXTENSIONS", REPORT_EXTENSION, EXTENSION_ORDER)
        if settings.get("JOBDIR") and setting_bool(settings, "NEARDUP_FRONTIER", True):
            self._durable_frontier(settings)

    @staticmethod
    def _durable_frontier(settings: BaseSettings) -> None:
        """A crawl that persists (JOBDIR) gets the durable frontier, unless the
        project chose its own scheduler (scrapy-redis, say)."""
        if (settings.getpriority("SCHEDULER") or 0) > SETTINGS_PRIORITIES["default"]:
            return
        settings.set("SCHEDULER", SCHEDULER, priority="addon")
        if (settings.getpriority("DUPEFILTER_CLASS") or 0) <= SETTINGS_PRIORITIES["default"]:
            settings.set("DUPEFILTER_CLASS", DUPEFILTER, priority="addon")
        _setdefault(settings, "SPIDER_MIDDLEWARES", ACK_SPIDER_MIDDLEWARE, ACK_ORDER)
        _setdefault(settings, "DOWNLOADER_MIDDLEWARES", ACK_DOWNLOADER_MIDDLEWARE, ACK_ORDER)
        # local feed files written exactly once across kills (crawler.frontier.feeds), unless the
        # project chose its own storage for them
        storages = settings.getdict("FEED_STORAGES")
        missing = [scheme for scheme in ("", "file") if scheme not in storages]
        value = settings["FEED_STORAGES"]
        if isinstance(value, BaseSettings):
            for scheme in missing:
                value.set(scheme, FEED_STORAGE, priority="addon")
        elif missing:  # (a JSON string from the command line: -s FEED_STORAGES='{...}')
            settings.set("FEED_STORAGES", {**storages, **dict.fromkeys(missing, FEED_STORAGE)},
                         priority=settings.getpriority("FEED_STORAGES") or "addon")


REDIS_SCHEDULER = "scrapy_neardup.crawler.frontier.redis_scheduler.ReliableRedisScheduler"
REDIS_SETTINGS = {
    "SCHEDULER": REDIS_SCHEDULER,
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    # the queue outlives each process: the last one to finish must not clear it for the others
    "SCHEDULER_PERSIST": True,
    # one hash tag per spider: every step on the queue touches one Redis Cluster slot
    "SCHEDULER_QUEUE_KEY": "{%(spider)s}:requests",
    "SCHEDULER_DUPEFILTER_KEY": "{%(spider)s}:dupefilter",
}


class SharedCrawlAddon:
    """The scale-out profile: N processes on N machines share one frontier
    (scrapy-redis's queue and dupe filter, with reliable acknowledgements:
    ``scrapy_neardup.crawler.frontier.redis_scheduler``) and one near-duplicate store, all on
    the Redis at ``REDIS_URL``. Add it beside the filter:
    ``ADDONS = {"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.SharedCrawlAddon": 0}``.
    ``NEARDUP_STORE`` defaults to ``REDIS_URL`` with ``?prefix=neardup``."""

    def update_settings(self, settings: BaseSettings) -> None:
        for name, value in REDIS_SETTINGS.items():
            settings.set(name, value, priority="addon")  # (over the durable frontier; a project's own wins)
        url = settings.get("REDIS_URL") or f"redis://{settings.get('REDIS_HOST', 'localhost')}:" \
                                           f"{settings.get('REDIS_PORT', 6379)}/0"

        if settings.getpriority("NEARDUP_STORE") is None:
            settings.set("NEARDUP_STORE", url + ("&" if "?" in url else "?") + "prefix=neardup", priority="addon")
        _setdefault(settings, "SPIDER_MIDDLEWARES", ACK_SPIDER_MIDDLEWARE, ACK_ORDER)
        _setdefault(settings, "DOWNLOADER_MIDDLEWARES", ACK_DOWNLOADER_MIDDLEWARE, ACK_ORDER)


class PoliteCrawlAddon:
    """The polite crawl profile (``POLITE_SETTINGS``), for those who ask for it."""

    def update_settings(self, settings: BaseSettings) -> None:
        for name, value in POLITE_SETTINGS.items():
            settings.set(name, value, priority="addon")
