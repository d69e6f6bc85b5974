"""``scrapy crawl site -a start_url=URL[,URL...]``: a focused crawl of chosen sites.

Arguments: ``allow``/``deny`` (regexes on URLs), ``max_depth``, ``max_pages``,
``stay_on_host`` (default true: only the start URLs' hosts). Every HTML page
becomes an item ``{url, title, text, fingerprint, fetched_at, status}``; the
near-duplicate filter removes the items and links of duplicates.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlparse

import scrapy
from scrapy.exceptions import CloseSpider
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor

from scrapy_neardup.dedup import jit
from scrapy_neardup.dedup.text import extract

from ..config import NearDupConfig
from ..middleware import declared_encoding


def _bool(value: str | bool) -> bool:
    return value if isinstance(value, bool) else value.strip().lower() in ("1", "true", "yes", "on")


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, start_url: str = "", allow: str = "", deny: str = "", max_depth: str = "",
                 max_pages: str = "", stay_on_host: str = "true", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        urls = [u.strip() for u in start_url.split(",") if u.strip()]
        if not urls:
            raise ValueError("give at least one start URL: scrapy crawl site -a start_url=https://example.com/")
        for u in urls:
            if urlparse(u).scheme not in ("http", "https"):
                raise ValueError(f"start_url must be http(s): {u!r}")
        self.start_urls = urls
        hosts = sorted({urlparse(u).hostname or "" for u in urls})
        self.allowed_domains = hosts if _bool(stay_on_host) else []
        self.link_extractor = LinkExtractor(allow=allow or (), deny=deny or ())
        self.max_depth = int(max_depth) if max_depth else None
        self.max_pages = int(max_pages) if max_pages else None
        self.pages_seen = 0
        self.extract_text = False  # set by from_crawler when the near-duplicate filter is off

    @classmethod
    def from_crawler(cls, crawler, *args: Any, **kwargs: Any):  # noqa: ANN001, ANN206 - Scrapy's signature
        spider = super().from_crawler(crawler, *args, **kwargs)
        # Without the filter nobody fills title/text in: do it here.
        spider.extract_text = not NearDupConfig.of(crawler).enabled
        if spider.extract_text:  # the reference path until the compiled scan is warm: no stall
            jit.defer("fingerprint")
            jit.warm_in_background(("fingerprint",))
        return spider

    async def start(self) -> AsyncIterator[Any]:
        # Filtered like any link (Scrapy's default start requests are dont_filter):
        # a link back to the start page does not fetch it again, nor does a
        # resumed crawl (JOBDIR) that has seen it.
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    async def parse(self, response: Response) -> AsyncIterator[Any]:
        if not isinstance(response, TextResponse):
            return
        self.pages_seen += 1
        if b"html" in response.headers.get("Content-Type", b"text/html").lower():
            # title, text and fingerprint are filled in by the near-duplicate
            # filter, which extracts them anyway (see crawler.middleware)
            page = extract(response.body, declared_encoding(response)) if self.extract_text else None
            yield {
                "url": response.url,
                "title": page.title if page else None,
                "text": page.text if page else None,
                "fingerprint": None,
                "language": None,
                "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "status": response.status,
            }
        if self.max_pages is not None and self.pages_seen >= self.max_pages:
            # after the item: a page the filter admitted must reach the feed
            raise CloseSpider(f"max_pages={self.max_pages} reached")
        if self.max_depth is not None and response.meta.get("depth", 0) >= self.max_depth:
            return
        for link in self.link_extractor.extract_links(response):
            yield response.follow(link, callback=self.parse)
