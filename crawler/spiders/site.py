"""``scrapy crawl site -a start_url=URL[,URL...]``: a focused crawl of chosen sites.

Arguments (``SiteArguments``, checked before the crawl starts, each error
naming its argument): ``start_url`` (http or https, comma-separated),
``allow``/``deny`` (regular expressions on URLs), ``max_depth`` (links
followed from a start page: 0 or more), ``max_pages`` (at most this many
pages reach the spider in a run, 1 or more: ``page_limit``),
``stay_on_host`` (true, the default: only the start URLs' hosts; false).
Every HTML page becomes an item ``{url, title, text, fingerprint,
language, fetched_at, status}``; the near-duplicate filter removes the items
and links of duplicates.

A page the pre-parse scan marks hostile (``dedup.text.hostile_scan``: an
element of 200,000 attributes, millions of elements) still gives its item,
but neither its links nor (filter off) its text: parsing it would hold up
the crawl's thread for minutes. A warning names it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from scrapy_neardup.dedup import jit
from scrapy_neardup.dedup.fingerprint.links import LinkSpec
from scrapy_neardup.dedup.text import extract
from scrapy_neardup.dedup.text.hostile_scan import hostile_reason

from ..clock import utc_now
from ..config import NearDupConfig
from ..filter.unchecked import is_html
from ..middleware import NearDupMiddleware, declared_encoding
from .page_limit import PAGE_LIMIT_ORDER, PageLimitMiddleware

logger = logging.getLogger(__name__)

PAGE_LIMIT_PATH = f"{PageLimitMiddleware.__module__}.{PageLimitMiddleware.__qualname__}"

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class SpiderArgumentError(ValueError):
    """A spider argument (``-a NAME=VALUE``) has a bad value; the message names it."""


def http_url_problem(url: str) -> str | None:
    """Why ``url`` cannot start a crawl (None: it can)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        hint = f" (http://{url}?)" if "://" not in url else ""
        return f"{url!r}: a URL needs http:// or https://{hint}"
    if not parts.hostname:
        return f"{url!r}: a URL needs a host after {parts.scheme}://"
    return None


@dataclass(frozen=True)
class SiteArguments:
    """The spider's arguments, parsed and checked (``parse``)."""

    start_urls: tuple[str, ...]
    allow: str = ""
    deny: str = ""
    max_depth: int | None = None
    max_pages: int | None = None
    stay_on_host: bool = True

    @classmethod
    def parse(cls, start_url: str | Sequence[str] = "", allow: str = "", deny: str = "", max_depth: str | int = "",
              max_pages: str | int = "", stay_on_host: str | bool = "true") -> SiteArguments:
        """From the ``-a`` strings (or Python values: ``start_url`` a list of URLs too);
        ``SpiderArgumentError`` names a bad one. Several URLs in one string are separated by
        commas before ``http://`` or ``https://``: a comma inside a URL (``?a=1,2``) is its own."""
        parts = _URL_SEPARATOR.split(start_url) if isinstance(start_url, str) else [str(u) for u in start_url]
        urls = tuple(u.strip() for u in parts if u.strip())
        if not urls:
            raise SpiderArgumentError(
                "start_url: give at least one start URL: scrapy crawl site -a start_url=https://example.com/")
        for u in urls:
            if (problem := http_url_problem(u)) is not None:
                raise SpiderArgumentError(f"start_url {problem}")
        for name, pattern in (("allow", allow), ("deny", deny)):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SpiderArgumentError(f"{name} must be a regular expression, got {pattern!r} ({exc})") from None
        return cls(urls, allow, deny, _whole("max_depth", max_depth, 0), _whole("max_pages", max_pages, 1),
                   _flag("stay_on_host", stay_on_host))


#: A comma that starts another URL (one a URL holds, ``?a=1,2``, does not)
_URL_SEPARATOR = re.compile(r",(?=\s*https?://)", re.IGNORECASE)


def _whole(name: str, value: str | int, lo: int) -> int | None:
    if value == "" or value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SpiderArgumentError(f"{name} must be a whole number >= {lo}, got {value!r}") from None
    if number < lo:
        raise SpiderArgumentError(f"{name} must be a whole number >= {lo}, got {value!r}")
    return number


def _flag(name: str, value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in TRUE or word in FALSE:
        return word in TRUE
    raise SpiderArgumentError(f"{name} must be true or false (or yes/no, on/off, 1/0), got {value!r}")


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, start_url: str | Sequence[str] = "", allow: str = "", deny: str = "", max_depth: str = "",
                 max_pages: str = "", stay_on_host: str = "true", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        args = SiteArguments.parse(start_url, allow, deny, max_depth, max_pages, stay_on_host)
        self.start_urls = list(args.start_urls)
        hosts = sorted({urlsplit(u).hostname or "" for u in args.start_urls})
        self.allowed_domains = hosts if args.stay_on_host else []
        self.link_extractor = LinkExtractor(allow=args.allow or (), deny=args.deny or ())
        extractor = self.link_extractor  # (the same, for the filter's worker: links_from_worker)
        self.link_spec = LinkSpec(tuple(r.pattern for r in extractor.allow_res),
                                  tuple(r.pattern for r in extractor.deny_res), tuple(sorted(extractor.deny_extensions)))
        self.max_depth = args.max_depth
        self.max_pages = args.max_pages  # enforced by page_limit.PageLimitMiddleware
        self.extract_text = False  # set by from_crawler when the near-duplicate filter is off

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        """Adds ``PageLimitMiddleware`` (``max_pages``) to the downloader
        middlewares, unless the project lists it already: at "spider" priority
        (or the setting's own, if higher), for the crawler process merges its
        settings over a crawler's where they have the same priority."""
        super().update_settings(settings)
        name = "DOWNLOADER_MIDDLEWARES"
        listed = settings.getdict(name)
        if any(component in (PageLimitMiddleware, PAGE_LIMIT_PATH) for component in listed):
            return
        priority = max(settings.getpriority(name) or 0, SETTINGS_PRIORITIES["spider"])
        settings.set(name, {**listed, PageLimitMiddleware: PAGE_LIMIT_ORDER}, priority=priority)

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

    def links_from_worker(self, response: Response) -> LinkSpec | None:
        """What the near-duplicate filter's worker should extract of this page's
        links (its ``LinkExtractor``'s settings), or None: past ``max_depth``
        none are followed."""
        if self.max_depth is not None and response.meta.get("depth", 0) >= self.max_depth:
            return None
        return self.link_spec

    async def parse(self, response: Response) -> AsyncIterator[Any]:
        if not isinstance(response, TextResponse):
            return
        # the page's links as the filter's worker read them from its own parse (the same
        # as the LinkExtractor's: dedup.fingerprint.links), or None: then extracted here
        neardup = NearDupMiddleware.of(self.crawler)  # (made after the spider, with the engine)
        links = await neardup.worker_links(response) \
            if neardup is not None and self.links_from_worker(response) is not None else None
        # (a page the worker parsed is not hostile; one it could not, in time or memory, or past
        # NEARDUP_MAX_PAGE_BYTES, is not parsed here either: in the crawl's thread it stalled the crawl)
        hostile = None
        if links is None and neardup is not None and (costly := await neardup.too_costly_to_parse(response)):
            hostile = {"too_large": "past NEARDUP_MAX_PAGE_BYTES"}.get(costly, f"the filter's worker: {costly}")
        elif links is None and neardup is not None and len(response.body) > neardup.config.max_page_bytes:
            hostile = "past NEARDUP_MAX_PAGE_BYTES"  # (not even scanned: 150 MB of text took the scan 4.6 s)
        elif links is None:
            # (the crawl's thread: ~0.4 ms a median page)
            hostile = hostile_reason(response.body, thorough=True, encoding=declared_encoding(response))
        if hostile is not None:
            logger.warning("%s is not parsed for its links or text: %s", response.url, hostile)
        if is_html(response):  # (as the filter tells HTML: a page it checks has its item)
            # title, text and fingerprint are filled in by the near-duplicate
            # filter, which extracts them anyway (see crawler.middleware)
            page = extract(response.body, declared_encoding(response)) if self.extract_text and not hostile else None
            yield {
                "url": response.url,
                "title": page.title if page else None,
                "text": page.text if page else None,
                "fingerprint": None,
                "language": None,
                "fetched_at": utc_now(),
                "status": response.status,
            }
        if hostile is not None or (self.max_depth is not None and response.meta.get("depth", 0) >= self.max_depth):
            return
        if links is not None:
            self.crawler.stats.inc_value("neardup/links/from_worker")
            for url in links:  # (absolute already: response.follow would decode the page for its base URL)
                yield scrapy.Request(url, callback=self.parse)
            return
        if not isinstance(response, (HtmlResponse, XmlResponse)):  # (a JSON or plain-text answer has no links
            return  # a LinkExtractor can read: it raised on JSON)
        if neardup is not None:
            self.crawler.stats.inc_value("neardup/links/in_thread")
        for link in self.link_extractor.extract_links(response):
            yield response.follow(link, callback=self.parse)
