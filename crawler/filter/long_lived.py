"""The filter's long-lived objects kept out of Python's full garbage collections.

The filter loads into the crawl's process what plain Scrapy does not: numpy,
numba's type system and the compiled kernels the store calls, the reference
path's tables (about 95,000 objects on a crawl of sqlite3-doc, which doubles
what the collector tracks). They live as long as the process, but every full
collection walks them all again, in the crawl's thread, and a crawl makes one
every ~100 responses (Scrapy's requests and responses keep the collector busy):
the user-style spider's crawl of sqlite3-doc spent 1.16-1.20 s of its thread
in full collections with the filter and 0.61-0.69 s without it
(``bench/crawl_bench.py``: ``bench/gc_gen2_s``).

``gc.freeze()`` moves every object the collector tracks into its permanent
generation, which collections skip; a frozen object is still freed when its
last reference goes (reference counting), and only a reference cycle among
objects frozen cannot be collected. So the filter freezes what exists once its
start-up is done: at the engine's start, after a collection (nothing
collectable is frozen; the crawl has not begun), and once the background
warm-up has loaded the kernels (no collection there: it would hold the crawl's
thread for tens of ms; what is frozen then is the warm-up's objects and at most
the few requests and responses in flight at that moment).
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger(__name__)


def freeze(collect: bool = False) -> int:
    """Move every object the collector tracks into its permanent generation
    (after a collection when ``collect``); the number frozen in all so far.
    O(1) without ``collect`` (the generations' lists are spliced).

    >>> freeze() >= 0
    True
    """
    if collect:
        gc.collect()
    gc.freeze()
    count = gc.get_freeze_count()
    logger.debug("near-duplicate filter: %d long-lived objects left out of full garbage collections", count)
    return count
