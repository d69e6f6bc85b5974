"""The filter's long-lived objects kept out of Python's full garbage collections
while a crawl runs.

The filter loads into the crawl's process what plain Scrapy does not: numpy,
numba's type system and the compiled kernels the store calls, the reference
path's tables (about 95,000 objects on a crawl of sqlite3-doc, which doubles
what the collector tracks). They live as long as the crawl, but every full
collection walks them all again, in the crawl's thread, and a crawl makes one
every ~100 responses (Scrapy's requests and responses keep the collector busy):
the user-style spider's crawl of sqlite3-doc spent 1.16-1.20 s of its thread
in full collections with the filter and 0.61-0.69 s without it
(``bench/crawl_bench.py``: ``bench/gc_gen2_s``).

``gc.freeze()`` moves every object the collector tracks into its permanent
generation, which collections skip; a frozen object is still freed when its
last reference goes (reference counting), and only a reference cycle among
frozen objects cannot be collected until ``gc.unfreeze()``. So, in the crawl's
thread:

- ``hold`` at the engine's start, before the crawl has begun, after a
  collection: of the youngest generation only in a process's first crawl (a
  full one there walked ~125,000 objects for ~60 ms of the crawl's thread,
  the largest part of the freeze's cost on a short crawl, and found nothing
  to free: 0 objects on crawls of sqlite3-doc), so an older cycle that is
  garbage then is kept until the crawl ends, no longer; a full one once a
  crawl of the process has ended, whose objects, unfrozen, may be garbage in
  the oldest generation that a young collection would freeze again;
- ``refreeze`` once the background warm-up has loaded the kernels (the
  store's, once the crawl's store holds ``workers.STORE_KERNELS_FROM``
  fingerprints: a smaller crawl never does), after a full
  collection (~25 ms; it frees the warm-up's ~2,000-3,000 objects of garbage):
  the crawl has begun, and what is alive then, the requests queued and in
  flight among it, stays out of collections until the crawl ends;
- ``release`` when the crawl closes: everything frozen goes back to the
  collector, so a process that runs crawl after crawl (``CrawlerRunner``, a
  service, tests) keeps nothing of an ended crawl. With several crawls in one
  process the last to close unfreezes. A process that had frozen objects of
  its own before the first crawl held the freeze (a server that freezes
  before it forks its workers, say) keeps them frozen: ``gc.unfreeze``
  cannot give back only the crawl's, so nothing is given back then.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger(__name__)

_holders = 0  # (crawls of this process that hold the freeze)
_released = False  # (a crawl of this process has given the freeze back: its objects may be old garbage)
_theirs = False  # (the process had frozen objects of its own when the first crawl held the freeze)
#: ``gc.collect``'s generations: the youngest only (on every version: 3.14's incremental
#: collector has no generation 1 of its own), or all of them
YOUNG, FULL = 0, 2


def hold() -> None:
    """A crawl starts: collect (the youngest generation in the process's first
    crawl, else all), then freeze what exists (O(the objects collected), once)."""
    global _holders, _theirs
    if not _holders:
        _theirs = gc.get_freeze_count() > 0
    _holders += 1
    _freeze(FULL if _released else YOUNG)


def refreeze() -> None:
    """Collect, then freeze what exists now, if a crawl still holds the freeze
    (for what a crawl loads after it started: the warm-up's kernels)."""
    if _holders:
        _freeze()


def release() -> None:
    """A crawl that held the freeze ends: the last one gives every frozen object back to the collector."""
    global _holders, _released
    _holders = max(0, _holders - 1)
    if not _holders and not _theirs:  # (unfrozen, the process's own freeze would be undone with the crawl's)
        gc.unfreeze()
        _released = True


def _freeze(generation: int = FULL) -> None:
    gc.collect(generation)
    gc.freeze()
    if logger.isEnabledFor(logging.DEBUG):  # (counting walks the frozen list)
        logger.debug("near-duplicate filter: %d long-lived objects left out of full garbage collections",
                     gc.get_freeze_count())
