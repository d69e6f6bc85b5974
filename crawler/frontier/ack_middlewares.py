"""The two hooks that tell the frontier a request is done (see ``acks``).

``AckSpiderMiddleware`` sits outermost among spider middlewares (order
``crawler.addon.ACK_ORDER``, below HttpErrorMiddleware's 50, so that it also sees the
empty output of an error page that middleware swallowed): it counts the
items each response lets out and sees its output end. ``AckDownloaderMiddleware``
sits outermost among downloader middlewares: the exceptions it sees are
downloads that failed for good (after retries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.http import Response
from scrapy.utils.misc import load_object

from ..in_use import refuse_a_jobdir_in_use
from .acks import AckTracker, request_id, response_id
from .db import refuse_a_damaged_frontier


def _frontier_tracker(crawler: Crawler) -> AckTracker:
    from .scheduler import DurableScheduler  # (the scheduler imports this package)

    if not issubclass(load_object(crawler.settings["SCHEDULER"]), DurableScheduler):
        raise NotConfigured("the durable frontier is not the scheduler")
    jobdir = crawler.settings.get("JOBDIR")
    if jobdir:  # (here, before the engine exists: one clear error rather than the engine's failing start)
        refuse_a_jobdir_in_use(jobdir)
        # (the spider instance's name: ``-a name=...`` or its __init__ may rename it; made before the engine)
        spider = getattr(crawler, "spider", None)
        refuse_a_damaged_frontier(jobdir, getattr(spider, "name", None))
    return AckTracker.of(crawler)


class AckSpiderMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.tracker = _frontier_tracker(crawler)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(self._item_done, signal=signal)
        crawler.signals.connect(self._responded, signal=signals.response_received)
        crawler.signals.connect(self._reached, signal=signals.headers_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AckSpiderMiddleware:
        return cls(crawler)

    def _item_done(self, response: Any = None) -> None:
        self.tracker.item_done(response_id(response))

    def _responded(self, request: Request) -> None:
        self.tracker.responded(request_id(request))

    def _reached(self, request: Request) -> None:
        self.tracker.reached(request_id(request))

    async def process_spider_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        rid = response_id(response)
        try:
            async for out in result:
                if not isinstance(out, Request):
                    self.tracker.item_out(rid)
                yield out
        except CloseSpider:
            self.tracker.keep_for_resume(rid)
            raise
        finally:
            self.tracker.output_done(rid)

    def process_spider_exception(self, response: Response, exception: BaseException) -> None:
        if isinstance(exception, CloseSpider):
            # The callback stopped the crawl part-way through this page (a page limit, say):
            # what it would have yielded after is lost, so a resume fetches the page again.
            self.tracker.keep_for_resume(response_id(response))
        else:  # (a bug in a callback: logged by Scrapy; fetching the page again would not fix it)
            self.tracker.output_done(response_id(response))


class AckDownloaderMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.tracker = _frontier_tracker(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AckDownloaderMiddleware:
        return cls(crawler)

    def process_exception(self, request: Request, exception: BaseException) -> None:
        self.tracker.failed(request_id(request))
