"""One-line setup: ``ADDONS = {"crawler.addon.NearDupAddon": 0}``.

Adds the filter middleware, the index pipeline and the summary extension,
and polite defaults; anything the project sets itself wins (the add-on
writes at "addon" priority, below "project").
"""

from __future__ import annotations

from scrapy.settings import BaseSettings

MIDDLEWARE = "crawler.middleware.NearDupMiddleware"
PIPELINE = "crawler.pipelines.IndexPipeline"
EXTENSION = "crawler.summary.SummaryExtension"

#: Close to the spider (high order): it filters the callback's output before
#: other spider middlewares (depth, offsite) see or count it.
MIDDLEWARE_ORDER = 950

DEFAULT_CONTACT_URL = "https://github.com/scrapy-neardup/scrapy-neardup"

POLITE_DEFAULTS = {
    "ROBOTSTXT_OBEY": True,
    "AUTOTHROTTLE_ENABLED": True,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 4,
    # Breadth-first: the shallower (usually canonical) URL of a pair is seen first.
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
}


class NearDupAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        # setdefault: an order the project gave a component wins over ours
        settings.setdefault_in_component_priority_dict("SPIDER_MIDDLEWARES", MIDDLEWARE, MIDDLEWARE_ORDER)
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", PIPELINE, 800)
        settings.setdefault_in_component_priority_dict("EXTENSIONS", EXTENSION, 500)
        contact = settings.get("NEARDUP_CONTACT_URL") or DEFAULT_CONTACT_URL
        settings.set("USER_AGENT", f"scrapy-neardup/0.1 (+{contact})", priority="addon")
        for name, value in POLITE_DEFAULTS.items():
            settings.set(name, value, priority="addon")
