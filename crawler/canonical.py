"""The canonical URL a page declares: ``<link rel="canonical" href="...">`` in
its head, or an HTTP ``Link: <...>; rel="canonical"`` header.

A hint, never proof: the filter records it (the index's ``canonical``
column, the duplicates file's ``canonical`` field) and lets the index row of
a kept page take its declared canonical URL only when that URL is fetched
later, on the same host, and is a near-duplicate of it
(``crawler.index.PageIndex.take_canonical``). With
``NEARDUP_CANONICAL_FIRST`` a kept page's declared canonical URL is
requested ahead of the other links (``CANONICAL_PRIORITY``).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING
from urllib.parse import urldefrag, urljoin, urlsplit

if TYPE_CHECKING:  # (the index uses ``same_host`` without loading Scrapy: ``neardup search``)
    from scrapy.http import Response

#: Added to the priority of the page's request for its canonical URL's (NEARDUP_CANONICAL_FIRST)
CANONICAL_PRIORITY = 100
#: How much of the body is searched for the <link> (it belongs in the head)
HEAD_BYTES = 65536

_LINK_TAG = re.compile(rb"<link\b[^>]*>", re.IGNORECASE)
_REL_CANONICAL = re.compile(rb"""\brel\s*=\s*(?:"[^"]*\bcanonical\b[^"]*"|'[^']*\bcanonical\b[^']*'|canonical\b)""",
                            re.IGNORECASE)
_HREF = re.compile(rb"""\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
_HEADER_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]*)*)")
_HEADER_REL = re.compile(r"""\brel\s*=\s*(?:"[^"]*\bcanonical\b[^"]*"|canonical\b)""", re.IGNORECASE)


def declared_canonical(response: Response) -> str | None:
    """The absolute http(s) URL ``response`` declares canonical (the Link header
    first, then the first ``<link rel=canonical>`` in the first 64 KB of the
    body), without its #fragment; None if it declares none. O(64 KB)."""
    for value in response.headers.getlist(b"Link"):
        for target, params in _HEADER_LINK.findall(value.decode("latin-1")):
            if _HEADER_REL.search(params):
                if (url := _absolute(response.url, target.strip())) is not None:
                    return url
    from scrapy.http import TextResponse

    if not isinstance(response, TextResponse):
        return None
    head = response.body[:HEAD_BYTES]
    end = head.lower().find(b"</head")
    for tag in _LINK_TAG.finditer(head if end < 0 else head[:end]):
        if _REL_CANONICAL.search(tag.group()) and (m := _HREF.search(tag.group())) is not None:
            raw = next(g for g in m.groups() if g is not None)
            try:
                href = raw.decode(response.encoding, errors="replace")
            except LookupError:
                href = raw.decode("utf-8", errors="replace")
            if (url := _absolute(response.url, html.unescape(href).strip())) is not None:
                return url
    return None


def _absolute(base: str, href: str) -> str | None:
    if not href:
        return None
    url = urldefrag(urljoin(base, href))[0]
    return url if urlsplit(url).scheme in ("http", "https") else None


def same_host(a: str, b: str) -> bool:
    """Whether URLs ``a`` and ``b`` name the same host (a canonical URL on
    another host changes nothing)."""
    return (urlsplit(a).hostname or "") == (urlsplit(b).hostname or "") != ""
