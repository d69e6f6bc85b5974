"""The ready spider's ``max_pages``: a limit, not a wish.

A spider callback that stops the crawl at its N-th page (``CloseSpider``)
still sees every response already in flight then: up to
``CONCURRENT_REQUESTS`` more pages, each checked by the filter and turned into
an item. ``PageLimitMiddleware`` counts the responses on their way to the
spider instead, after redirects and retries (a downloader middleware of low
order: it sees the final response): the first ``max_pages`` pass, and the
last of them starts closing the spider (finish reason ``max_pages``). From
then on a request is not downloaded, and a response already on its way is
discarded before the spider, the filter or a feed sees it (``IgnoreRequest``;
both counted in the stat ``site/max_pages/discarded``). Either way the request
is kept for a resume: with ``JOBDIR`` the next run fetches it; the links of
the pages that passed are queued as usual.

What counts: every response handed to the spider, an HTTP error page too;
not robots.txt, nor any other download the engine makes for a component
(``NO_CALLBACK``). The limit holds per run: a resumed crawl may fetch
``max_pages`` more.
"""

from __future__ import annotations

import logging

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request, Response
from scrapy.http.request import NO_CALLBACK

from ..frontier.acks import AckTracker, request_id
from ..frontier.stop import stop_crawl

logger = logging.getLogger(__name__)

#: Below RetryMiddleware (550) and RedirectMiddleware (600): their responses are
#: turned into new requests before this one sees them.
PAGE_LIMIT_ORDER = 80
MAX_PAGES_REASON = "max_pages"
DISCARDED_STAT = "site/max_pages/discarded"


class PageLimitMiddleware:
    """Lets at most ``spider.max_pages`` responses reach the spider (no limit
    when it is None or the spider has none). See the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.passed = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageLimitMiddleware:
        return cls(crawler)

    def _limit(self, request: Request) -> int | None:
        """The spider's limit, if ``request`` is one of its own (else None)."""
        return None if request.callback is NO_CALLBACK else getattr(self.crawler.spider, "max_pages", None)

    def _discard(self, request: Request, limit: int) -> None:
        # (never acknowledged, whatever the outermost middleware hears: a resume makes it)
        AckTracker.of(self.crawler).keep_for_resume(request_id(request))
        self.crawler.stats.inc_value(DISCARDED_STAT)
        raise IgnoreRequest(f"max_pages={limit} reached")

    def process_request(self, request: Request) -> None:
        limit = self._limit(request)
        if limit is not None and self.passed >= limit:
            self._discard(request, limit)

    def process_response(self, request: Request, response: Response) -> Response:
        limit = self._limit(request)
        if limit is None:
            return response
        if self.passed >= limit:
            self._discard(request, limit)
        self.passed += 1
        if self.passed == limit:
            logger.info("max_pages=%d reached: closing the spider; responses still in flight are discarded", limit)
            # (soon, not here: closing waits for this very response to be scraped)
            stop_crawl(self.crawler, MAX_PAGES_REASON)
        return response
