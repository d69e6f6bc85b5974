"""Which responses pass through the filter unchecked, and why.

A response passes unchecked (counted as ``neardup/skipped/<reason>``) when
its request asked for it (``meta``), when it is an error page and error
pages are not checked (``error_status``), when it is not HTML
(``non_html``) or when it is too large to fingerprint (``too_large``). The
library adds its own reasons once it has the text (``too_short``,
``binary``, ``empty``, ``unparsable``, ``hostile``), and the verdict one
once the callback has run: ``callback_error`` (a new page on which it
raised is not stored: a near-copy of it is not dropped against a page that
gave nothing).

With ``NEARDUP_WITHHOLD_HOSTILE``, an HTML page the pre-parse scan marks
hostile (``dedup.text.hostile_scan``: an element of 200,000 attributes,
millions of elements) does not reach the spider's callbacks at all
(``HostilePageWithheld``), where lxml could take minutes over it.
"""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, TextResponse
from w3lib.encoding import http_content_type_encoding

from scrapy_neardup.dedup.text.hostile_scan import hostile_reason

from ..config import NearDupConfig

HTML_TYPES = (b"text/html", b"application/xhtml+xml")
#: the reason of a page whose callback raised (other than ``CloseSpider``)
CALLBACK_ERROR = "callback_error"


def unchecked_reason(response: Response, config: NearDupConfig) -> str | None:
    """Why ``response`` passes through unchecked, or None to fingerprint it. O(1)
    (reads the headers and at most 512 bytes of the body)."""
    if response.meta.get(config.skip_meta_key):
        return "meta"
    # An error page (a spider that handles 404s sees them) is no page of the site:
    # one soft-404 template would otherwise make every later 404 a "duplicate", and
    # a 404 stored first would make the real page at another URL one.
    if response.status >= 400 and not config.check_error_pages:
        return "error_status"
    if not isinstance(response, TextResponse) or not is_html(response):
        return "non_html"
    # A 20 MB page takes ~2 s and ~570 MB to fingerprint: past the cap, let it through unchecked.
    if len(response.body) > config.max_page_bytes:
        return "too_large"
    return None


class HostilePageWithheld(IgnoreRequest):
    """A page withheld from the spider's callbacks (``NEARDUP_WITHHOLD_HOSTILE``);
    a request's errback gets it, as it gets Scrapy's ``HttpError``."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url} withheld: {reason}")
        self.url = url
        self.reason = reason


def hostile_to_withhold(response: Response, max_page_bytes: int) -> str | None:
    """Why the pre-parse scan marks this HTML response hostile, or None; a body past ``max_page_bytes``
    is not scanned (150 MB took the scan 4.6 s in the crawl's thread) but withheld. O(len(body)): about
    0.4 ms on a median article page."""
    if not isinstance(response, TextResponse) or not is_html(response):
        return None
    if len(response.body) > max_page_bytes:
        return f"{len(response.body)} bytes, past NEARDUP_MAX_PAGE_BYTES (not scanned)"
    # (before the callback, in the crawl's thread)
    return hostile_reason(response.body, thorough=True, encoding=declared_encoding(response))


def is_html(response: TextResponse) -> bool:
    """Whether the response is HTML: by its Content-Type, or else by how its body starts.

    A body that sniffs as HTML is checked whatever the declared type: Scrapy made
    the response a ``TextResponse`` (an ``.html`` URL, or its own sniffing), so the
    spider parses it as HTML and follows its links (an exact copy served as
    ``application/octet-stream`` would otherwise pass unchecked)."""
    ctype = (response.headers.get("Content-Type") or b"").lower()
    if (ctype and any(t in ctype for t in HTML_TYPES)) or isinstance(response, HtmlResponse):
        return True  # (an HtmlResponse: Scrapy's own sniffing, of 5,000 bytes, took it for HTML)
    head = response.body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head


def declared_encoding(response: Response) -> str | None:
    """The charset the server declared in Content-Type, or None.

    Not ``response.encoding``: without a declaration Scrapy guesses (UTF-8,
    then charset-normalizer, which reads some GBK pages as Cyrillic), and a
    guess passed on would override dedup's own sniffing (BOM, ``<meta>``, then
    detection that knows GBK, Big5, Shift_JIS, EUC-JP and EUC-KR), so the
    same bytes would give another fingerprint in a crawl than from the CLI.
    """
    ctype = response.headers.get(b"Content-Type")
    return http_content_type_encoding(ctype.decode("latin-1")) if ctype else None
