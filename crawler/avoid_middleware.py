"""Requests a learned URL rule says need not be made: a downloader middleware.

The filter (``crawler.middleware``) already leaves out a kept page's outlinks
that an active rule maps onto a page already fetched. Requests queued before
the rule was learned are still in the frontier; this middleware asks the
filter's rule book again as each enters the downloader (before it waits in its
host's queue for the download delay: those already waiting when a rule is
learned are made) and drops those
(``IgnoreRequest``: the durable frontier acknowledges them as done once the
rule book has committed them, ``AckTracker.left_out``), with the same
stat and the same line in the duplicates file. A request a sub-tree rule
predicts, or a parameter rule on a value its pairs showed
(``NEARDUP_URL_RULES_CONFIRM_BYTES``, on by default), is made as a
ranged GET instead, and its answer (``process_response``) either confirms the copy (it
goes no further, its body never downloaded) or makes the request whole. Off
with the filter or with ``NEARDUP_URL_RULES = False``.

Before it asks, a checked page's outlink (marked ``QUEUED_KEY`` by the filter)
waits for the verdicts of the pages in its directory or above it, on a host
with a rule (``filter.verdicts_due``): a rule one of them makes may act on it.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response

from .config import NearDupConfig
from .filter.learned_rules import CONFIRM_KEY, QUEUED_KEY
from .frontier.acks import AckTracker, request_id
from .middleware import NearDupMiddleware

logger = logging.getLogger(__name__)


class AvoidMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AvoidMiddleware:
        config = NearDupConfig.of(crawler)
        if not config.enabled:
            raise NotConfigured("NEARDUP_ENABLED is off")
        if not config.url_rules:
            raise NotConfigured("NEARDUP_URL_RULES is off")
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        queued = request.meta.pop(QUEUED_KEY, False)  # (not left in the response's meta, which outputs copy)
        neardup = NearDupMiddleware.of(self.crawler)
        if neardup is None:
            return
        if neardup.rules is not None and queued and neardup.rules.could_avoid(request):
            await neardup.rules.due.wait(request.url)  # (first the verdicts of the pages above it: their rules may act)
        referer = request.headers.get("Referer")
        if neardup.avoided([request], referer.decode("latin-1") if referer else None, scheduled=True):
            # (noted in the rule book behind its gate: the frontier acknowledges it once that is committed)
            AckTracker.of(self.crawler).left_out(request_id(request), request.errback is not None)
            raise IgnoreRequest(f"a learned URL rule says a fetched page has the content of {request.url}")

    def process_response(self, request: Request, response: Response) -> Request | Response:
        """A ranged GET confirming a predicted copy (``NEARDUP_URL_RULES_CONFIRM_BYTES``):
        confirmed, it goes no further; else the request is made whole."""
        if CONFIRM_KEY not in request.meta:
            return response
        neardup = NearDupMiddleware.of(self.crawler)
        rules = neardup.rules if neardup is not None else None
        if rules is None:
            return response
        out = rules.confirmation(request, response)
        if out is None:
            # (done at once, behind the rule book's gate, whether or not the request has an errback: Scrapy hands
            # an exception raised here to the errback, in the same turn, but to no middleware's process_exception,
            # so with an errback the frontier never heard of it, and a CrawlSpider's confirmed copies, whose
            # requests all have one, were made again at each resume and given up "in flight, answered, at 4
            # kills". Taken a checkpoint later instead, as a failed download is, a helper's crawl killed six times
            # still asked for 212 of them four times: a hundred ranged GETs go out in those two seconds)
            AckTracker.of(self.crawler).left_out(request_id(request), False)
            raise IgnoreRequest(f"a ranged GET confirmed {request.url} is a copy of a fetched page")
        return out
