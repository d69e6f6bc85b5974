"""``NEARDUP_SCOPE``: which stored pages a page is compared with.

``"all"`` (the default): every page of the crawl. ``"host"``: pages of the
same host only. ``"domain"``: of the same registered domain (``a.example.co.uk``
and ``b.example.co.uk`` share ``example.co.uk``), by the Public Suffix List
snapshot that ships with tldextract (no download, no cache file).

Why not always "all": store poisoning. Whoever can get copies of a page
crawled before the original (a scraper site, a mirror that the crawl meets
first) makes the original the duplicate, and it is dropped. Within a host
or domain only the site itself can do that.

>>> scope_of("host")("https://Docs.Example.com:8443/a?b")
'docs.example.com'
>>> scope_of("domain")("https://docs.example.co.uk/a")
'example.co.uk'
>>> scope_of("all") is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from urllib.parse import urlsplit


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


@lru_cache(maxsize=1)
def _extractor():  # noqa: ANN202 - tldextract's type
    import tldextract

    # no suffix-list download and no cache directory: the snapshot in the package;
    # private suffixes too (user.github.io is its user's own domain)
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


@lru_cache(maxsize=65536)
def _domain(host: str) -> str:
    if not host or host.replace(".", "").isdigit() or ":" in host:  # IPv4 / IPv6: the address itself
        return host
    parts = _extractor()(host)
    return parts.top_domain_under_public_suffix or host


def scope_of(name: str) -> Callable[[str], str] | None:
    """A URL -> scope key function, or None for "all"."""
    if name == "all":
        return None
    if name == "host":
        return _host
    if name == "domain":
        return lambda url: _domain(_host(url))
    raise ValueError(f"unknown scope {name!r}")
