"""scrapy-neardup: a Scrapy add-on that drops near-duplicate pages (64-bit simhash,
Manku-Jain-Das Sarma permuted tables), and the library behind it.

One line in a Scrapy project's settings turns the filter on::

    ADDONS = {"scrapy_neardup.NearDupAddon": 0}

The package has two parts: ``scrapy_neardup.dedup``, the library (visible
text, features, simhash, the store; it never imports scrapy or twisted), and
``scrapy_neardup.crawler``, the Scrapy side (add-ons, middlewares, pipeline,
frontier, the ``neardup`` command). The names below are loaded on first use,
so ``from scrapy_neardup import Fingerprinter`` loads neither scrapy nor twisted.

>>> from scrapy_neardup import Fingerprinter, hamming
>>> page = b"<p>" + b"near duplicate detection for web crawling " * 5 + b"</p>"
>>> hamming(Fingerprinter().fingerprint_html(page).value, Fingerprinter().fingerprint_html(page).value)
0
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it (relative to this package)
_EXPORTS = {
    # the Scrapy add-ons (crawler side: importing them imports scrapy)
    "NearDupAddon": ".crawler.addon",
    "PoliteCrawlAddon": ".crawler.addon",
    "SharedCrawlAddon": ".crawler.addon",
    # the library (never imports scrapy or twisted)
    "Fingerprint": ".dedup.fingerprint",
    "Fingerprinter": ".dedup.fingerprint",
    "SCHEME_VERSION": ".dedup.fingerprint",
    "read_document": ".dedup.fingerprint",
    "SimhashStore": ".dedup.store",
    "RedisSimhashStore": ".dedup.store",
    "Match": ".dedup.store",
    "StoreError": ".dedup.store",
    "StoreMismatchError": ".dedup.store",
    "StoreUnavailable": ".dedup.store",
    "Page": ".dedup.text",
    "extract": ".dedup.text",
    "simhash": ".dedup.simhash",
    "hamming": ".dedup.simhash",
    "to_hex": ".dedup.simhash",
    "from_hex": ".dedup.simhash",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from .crawler.addon import NearDupAddon, PoliteCrawlAddon, SharedCrawlAddon
    from .dedup.fingerprint import SCHEME_VERSION, Fingerprint, Fingerprinter, read_document
    from .dedup.simhash import from_hex, hamming, simhash, to_hex
    from .dedup.store import Match, RedisSimhashStore, SimhashStore, StoreError, StoreMismatchError, StoreUnavailable
    from .dedup.text import Page, extract


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562). O(1) after the first call."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
