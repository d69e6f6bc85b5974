"""A page's outlinks, read from the lexbor tree the fingerprinting already made.

The ready spider (``crawler.spiders.site``) follows the links Scrapy's
``LinkExtractor`` would give it; the worker process that fingerprints the page
holds its parsed tree already, so it reads the links there too, and the
crawl's thread never parses the page a second time (with lxml) for them.

Semantics are ``LinkExtractor``'s defaults (tested against it, ``tests/test_worker_links.py``):

* the ``href`` of every ``<a>`` and ``<area>``, in document order, HTML5
  whitespace stripped, joined to the page's base URL (``<base href>`` in the
  first 4,096 characters, as ``scrapy.utils.response.get_base_url`` finds it),
  made safe (``w3lib.url.safe_url_string``, in the response's encoding as
  Scrapy infers it: ``scrapy_encoding``) and joined to the page's URL;
* kept when its scheme is http, https, file or ftp, ``allow`` matches (if
  given), ``deny`` does not, and its path does not end with one of
  ``deny_extensions``;
* one link per URL (the first), fragment and all, as ``LinkExtractor``
  gives them (its ``unique`` compares the URLs as they are).

This module imports neither scrapy nor lxml (the ``dedup`` layer); it only
repeats the few lines of Scrapy's that decide the above. Where lexbor's tree
(HTML Standard tree construction) and libxml2's differ, for misnested or
invalid markup, the links can differ too: the test names the cases checked.
Cost: O(links) ``urljoin``/``safe_url_string`` calls,
about 10 µs a link, in the worker.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urljoin, urlparse

from selectolax.lexbor import LexborHTMLParser
from w3lib.encoding import (html_body_declared_encoding, html_to_unicode, http_content_type_encoding, read_bom,
                            resolve_encoding)
from w3lib.html import get_base_url, strip_html5_whitespace
from w3lib.url import safe_url_string

from ..text.deep_nesting import bound_nesting

#: URL schemes a link may have (``scrapy.linkextractors._is_valid_url``)
VALID_SCHEMES = frozenset({"http", "https", "file", "ftp"})
#: Bytes of the body decoded to find ``<base href>`` in its first 4,096 characters
BASE_PREFIX_BYTES = 65_536


class LinkSpec(NamedTuple):
    """What a ``LinkExtractor`` keeps: ``allow``/``deny`` regular expressions
    (searched in the absolute URL) and ``deny_extensions`` (with their dot, as
    ``LinkExtractor.deny_extensions`` holds them). Tags ``a``/``area``, attribute
    ``href``, ``unique``, ``strip``, no ``canonicalize``: the defaults."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    deny_extensions: tuple[str, ...] = ()


class LinkJob(NamedTuple):
    """What the worker needs besides the body: the response's URL and Content-Type header, and the spec."""

    url: str
    content_type: str
    spec: LinkSpec


def scrapy_encoding(body: bytes, content_type: str) -> str:
    """The encoding Scrapy's ``TextResponse.encoding`` gives these bytes: a BOM,
    the Content-Type's charset, the body's ``<meta>``, else inferred (ascii,
    utf-8, then charset-normalizer)."""
    declared = read_bom(body)[0] or http_content_type_encoding(content_type) or html_body_declared_encoding(body)
    if declared:
        return declared
    return html_to_unicode(content_type, body, auto_detect_fun=_auto_detect, default_encoding="ascii")[0]


def _auto_detect(text: bytes) -> str | None:
    for enc in ("ascii", "utf-8"):
        try:
            text.decode(enc)
        except UnicodeError:
            continue
        return resolve_encoding(enc)
    from charset_normalizer import from_bytes  # (rare: an undeclared page that is neither)

    match = from_bytes(text).best()
    return resolve_encoding(match.encoding) if match else None


def same_encoding(a: str, b: str) -> bool:
    """Whether two encoding labels name one codec."""
    try:
        return codecs.lookup(a).name == codecs.lookup(b).name
    except LookupError:
        return False


def decodes_alike(body: bytes, a: str, b: str) -> bool:
    """Whether ``body`` decoded as ``a`` and as ``b`` gives one text: one codec,
    or an ASCII body that both decode alike (Scrapy infers ``ascii`` for such a
    page where the fingerprint reads ``utf-8``; a stateful codec such as
    ISO-2022-JP may still read its escapes otherwise). O(len(body))."""
    if same_encoding(a, b):
        return True
    if not body.isascii():
        return False
    try:
        return body.decode(a, "replace") == body.decode(b, "replace")
    except LookupError:
        return False


def unicode_body(body: bytes, encoding: str) -> str:
    """The body as Scrapy's ``TextResponse.text`` decodes it."""
    return html_to_unicode(f"charset={encoding}", body)[1]


def hrefs(doc: LexborHTMLParser) -> list[str]:
    """The ``href`` values of every ``<a>`` and ``<area>``, in document order
    (entities decoded by the parser). O(elements)."""
    return [href for node in doc.css("a[href], area[href]") if (href := node.attributes.get("href")) is not None]


def page_links(doc: LexborHTMLParser | None, body: bytes, job: LinkJob, tree_encoding: str | None) -> list[str]:
    """The URLs ``LinkExtractor`` would extract from the page (module
    docstring). ``doc``: the page's tree as the fingerprinting parsed it, from
    the body decoded as ``tree_encoding``; when Scrapy would decode the body
    otherwise (or ``doc`` is None), the page is parsed again here from
    Scrapy's decoding, so that the links are the same."""
    encoding = scrapy_encoding(body, job.content_type)
    head = html_to_unicode(f"charset={encoding}", body[:BASE_PREFIX_BYTES])[1][:4096]
    base = get_base_url(head, job.url, encoding)
    if doc is None or tree_encoding is None or not decodes_alike(body, encoding, tree_encoding):
        text = unicode_body(body, encoding).strip().replace("\x00", "")
        # (bounded as the fingerprint's parse is: tree construction is quadratic in nesting depth)
        doc = LexborHTMLParser(bound_nesting(text.encode("utf-8", "surrogatepass")))
    return resolve(hrefs(doc), base, job.url, encoding, job.spec)


def resolve(values: list[str], base: str, url: str, encoding: str, spec: LinkSpec) -> list[str]:
    """``LinkExtractor``'s steps from attribute values to the URLs it keeps (module docstring)."""
    allow, deny = _patterns(spec.allow), _patterns(spec.deny)
    exts = spec.deny_extensions
    out: list[str] = []
    seen: set[str] = set()
    for value in dict.fromkeys(values):  # (the same value, the same link: once)
        link = _absolute(value, base, url, encoding)
        # (one link per URL, the first, as LinkExtractor's unique; its filters depend on the URL only)
        if link is None or link in seen:
            continue
        seen.add(link)
        if link.split("://", 1)[0] not in VALID_SCHEMES:
            continue
        if allow and not any(r.search(link) for r in allow):
            continue
        if deny and any(r.search(link) for r in deny):
            continue
        if exts:
            try:
                path = urlparse(link).path.lower()
            except ValueError:  # (an invalid IPv6 host)
                continue
            if path.endswith(exts):
                continue
        out.append(link)
    return out


def _absolute(value: str, base: str, url: str, encoding: str) -> str | None:
    """An attribute value as the absolute URL ``LinkExtractor`` makes of it (None: bogus)."""
    try:
        # (the last join fixes a link made relative again by a base URL without a scheme)
        return urljoin(url, _safe(value, base, encoding))
    except ValueError:  # (a bogus link: LinkExtractor skips it too)
        return None


@lru_cache(maxsize=65_536)
def _safe(value: str, base: str, encoding: str) -> str:
    """``value`` joined to ``base`` and made safe. Cached: a site's navigation links
    come again on every page of a folder (raises ValueError, uncached, on a bogus one)."""
    return safe_url_string(urljoin(base, strip_html5_whitespace(value)), encoding=encoding)


@lru_cache(maxsize=64)
def _patterns(patterns: tuple[str, ...]) -> list[re.Pattern[str]]:
    return [re.compile(p) for p in patterns]
