"""Fingerprinting the pages: in worker processes, or in the crawl's thread.

With ``NEARDUP_WORKERS`` > 0 (and the asyncio reactor) a pool of worker
processes fingerprints the pages, so that the spider's own work and the
fingerprinting use two cores. Pages that arrive while the workers start
(importing, loading rjieba's dictionary: a second or two) are fingerprinted
in the crawl's thread rather than waiting for them
(``neardup/fingerprinted_while_workers_start``). A worker that fails to
start or dies (killed, out of memory) is given up on: the filter logs an
error, counts ``neardup/worker_failures`` and fingerprints in the crawl's
thread from then on; the crawl goes on, and a page the dead worker held is
fingerprinted here.

Warm-up: nothing compiles in the crawl's thread. ``FingerprintWorkers()``
marks the compiled kernels not ready (``dedup.jit``) before the store is
opened; ``start()`` then has them warmed elsewhere: the worker process
compiles them all (answering by the reference path meanwhile, the store's
kernels first, into the cache), and a background thread here loads the
store's from the cache once the worker has put them there (without a
worker, that thread compiles both groups). Until then pages are
fingerprinted by the reference path and the store answers by exhaustive
scans, with the same results.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from scrapy.http import Response, TextResponse
from scrapy.statscollectors import StatsCollector
from scrapy.utils.reactor import is_asyncio_reactor_installed

from scrapy_neardup.dedup import jit
from scrapy_neardup.dedup.fingerprint.jobs import JobResult, fingerprint_job, warm_up

from ..config import NearDupConfig
from ..counts import count_unchecked
from .unchecked import declared_encoding

logger = logging.getLogger(__name__)

#: How long this process waits for a worker to put the store's kernels in the cache before compiling them itself
STORE_CACHE_WAIT = 600.0


class FingerprintWorkers:
    """The filter's fingerprinting: see the module docstring."""

    def __init__(self, config: NearDupConfig, stats: StatsCollector) -> None:
        self.min_text = config.min_text
        self.stats = stats
        count = config.workers
        if count and not is_asyncio_reactor_installed():
            logger.warning("NEARDUP_WORKERS needs the asyncio reactor; fingerprinting in the crawl's thread")
            count = 0
        #: worker processes asked for (0: the crawl's thread fingerprints every page)
        self.count = count
        # The crawl's thread never compiles: the reference paths serve until the
        # kernels are warm (this before the store is opened, which may call them).
        jit.defer()
        self._mp = multiprocessing.get_context("spawn")
        self._store_cached = self._mp.Event() if count else None
        self.pool: ProcessPoolExecutor | None = None
        self.ready: Future | None = None  # done once a worker is up

    def start(self) -> None:
        """Start the workers and the warm-up (once the store is open)."""
        if self.count:
            self.pool = ProcessPoolExecutor(self.count, mp_context=self._mp, initializer=warm_up,
                                            initargs=(self.min_text, self._store_cached))
            # Start the workers now (the pool spawns them on the first submit). Pages
            # that arrive before one is ready are fingerprinted here (submit).
            self.ready = self.pool.submit(int)
        jit.warm_in_background(("store",) if self.count else ("store", "fingerprint"), reference_first=True,
                               wait=self._wait_for_store_cache if self.count else None)

    def submit(self, response: TextResponse) -> Future | JobResult:
        """Start fingerprinting ``response``: a worker's Future, or (no worker
        ready) the result, computed here."""
        pool = self._usable_pool()
        if pool is not None:
            try:
                return pool.submit(fingerprint_job, response.body, declared_encoding(response), self.min_text)
            except BrokenProcessPool:  # a worker died (killed, out of memory)
                self._give_up("a worker process died")
        elif self.pool is not None:
            self.stats.inc_value("neardup/fingerprinted_while_workers_start")
        return fingerprint_job(response.body, declared_encoding(response), self.min_text)

    async def result(self, response: Response, pending: Future) -> JobResult | str:
        """The fingerprint a worker was asked for; a page it could not do is
        done here, and one that fails to fingerprint passes unchecked
        (``"unparsable"``): a failing page must not stop the crawl."""
        try:
            return await asyncio.wrap_future(pending)
        except BrokenProcessPool:  # the worker died with this page in hand: do it here
            if self.pool is not None:
                self._give_up("a worker process died")
            try:
                return fingerprint_job(response.body, declared_encoding(response), self.min_text)
            except Exception as exc:
                return self._failed(response, exc)
        except Exception as exc:
            return self._failed(response, exc)

    def close(self) -> None:
        if self.pool is not None:
            # (A worker still compiling does so in a daemon thread: it does not hold up
            # the crawl's end. numba writes each cache file whole, a temporary file then a
            # rename, so what it finished compiling stays cached for the next crawl.)
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _failed(self, response: Response, exc: Exception) -> str:
        logger.warning("fingerprinting failed for %s: %r", response.url, exc)
        count_unchecked(self.stats, "unparsable")
        return "unparsable"

    def _usable_pool(self) -> ProcessPoolExecutor | None:
        """The worker pool once its workers are up; None while they start or without one."""
        ready = self.ready
        if self.pool is None or ready is None or not ready.done():
            return None
        if ready.exception() is not None:
            self._give_up(f"the worker process did not start: {ready.exception()!r}")
            return None
        return self.pool

    def _wait_for_store_cache(self) -> None:
        """Until the worker has the store's kernels in the cache (or is gone, or
        ``STORE_CACHE_WAIT`` has passed: then this process compiles them itself)."""
        assert self._store_cached is not None
        deadline = time.monotonic() + STORE_CACHE_WAIT
        while time.monotonic() < deadline:
            if self._store_cached.wait(1.0) or self.pool is None:
                return

    def _give_up(self, why: str) -> None:
        """Fingerprint in the crawl's thread from now on; the crawl goes on."""
        logger.error("near-duplicate filter: %s; fingerprinting in the crawl's thread from now on", why)
        self.stats.inc_value("neardup/worker_failures")
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = self.ready = None
        jit.warm_in_background(("fingerprint",))  # from the cache the worker filled, if it got that far
