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

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.misc import load_object

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
