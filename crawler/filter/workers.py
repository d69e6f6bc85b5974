"""Fingerprinting the pages: in worker processes, or in the crawl's thread.

With ``NEARDUP_WORKERS`` > 0 (and the asyncio reactor) worker processes
fingerprint the pages, so that the spider's own work and the fingerprinting
use two cores. Each worker is a fresh interpreter running the package's own
entry point (``dedup.fingerprint.worker``), never the user's ``__main__``: a
script that runs a crawl at its top level without an ``if __name__ ==
"__main__":`` guard runs once. Each has a thread here that hands it one page
at a time from a shared queue.

Pages that arrive while the workers first start (importing, loading rjieba's
dictionary: 1-2 s on a quiet machine, 4-8 s on a busy one) are fingerprinted
in the crawl's thread by the reference path, rather than waiting for them
(``neardup/fingerprinted_while_workers_start``), if their body is at most
``START_PATH_MAX_BYTES``; a bigger one waits in the queue for the first
worker, answered by a Future like every later page
(``neardup/waited_for_worker``). The bound is on the body's bytes, decided
before any parse, and measured (``bench/start_path.py``, the reference path's
thread CPU time): within 128 KiB the shared data's 1,016 real pages (aeb,
zh-cwced, sqlite3-doc) cost at most ~18 ms each (99% under 13 ms; one
first-use load of ~50 ms aside) and the slowest markup the pre-parse scan
lets through ~46 ms, against ~0.1 s a MB of ordinary text (1.2 s for 8 MB
of Chinese) and ~0.36 s a MB of that markup past it; 10% of the real pages
wait. Why not have every page wait (no fingerprinting in the crawl's thread
at all)? A crawl starts from one page and its outlinks come from verdicts:
held until the worker is up, the whole crawl stands still for the worker's
start, every crawl (measured, ``bench/start_path.py --crawl``: one page
done by the time the worker was up, 1.1-1.7 s in, against 42-45 in the
crawl's thread and 3 waiting with the bound), while a few big pages waiting
cost only their own latency. A page waiting when the workers never come up
(they fail to start ``MAX_WORKER_RESTARTS`` times: the filter stops
checking) or at close passes unchecked (``neardup/skipped/no_worker``).
Once a worker is up the crawl's thread never fingerprints:

* a page that takes a worker longer than ``NEARDUP_WORKER_TIMEOUT`` seconds
  passes unchecked (``neardup/skipped/timeout``, a warning naming its URL),
  and that worker is killed and replaced;
* a worker that dies (killed, out of memory) is replaced; the page it held
  passes unchecked (``neardup/skipped/worker_died``, a warning naming its URL)
  and is never tried again here: it may be what killed the worker;
* while a worker restarts (a second or two), pages wait in the queue for it (or
  go to another worker, with several);
* past ``MAX_WORKER_RESTARTS`` restarts of one worker in a row, with no page
  answered between them (workers that die whatever the page: the machine,
  not the pages), or as many workers that did not start in the crawl, the
  filter stops checking: an error in the
  log, ``neardup/workers_stopped``, and every later page passes unchecked
  (``neardup/skipped/no_worker``). A page a worker answers starts the count
  again, and so does the replacement of a worker that ran out of time or
  memory over its page, once it answers a small probe page (``PROBE_PAGE``):
  a site's hostile pages, even many in a row, each costing one restart,
  never switch the filter off. ``neardup/worker_restarts`` counts all the
  restarts.

Warm-up: nothing compiles in the crawl's thread. ``FingerprintWorkers()``
marks the compiled kernels not ready (``dedup.jit``) before the store is
opened; ``start()`` then has them warmed elsewhere: the worker process
compiles them all (answering by the reference path meanwhile, the store's
kernels first, into the cache), and a background thread here loads the
store's from the cache once the worker has put them there and the store
holds ``STORE_KERNELS_FROM`` fingerprints: a crawl whose store stays
smaller never loads them, as the load costs more than the scans do there
(without a worker, that thread compiles both groups at the start). Until
then pages are fingerprinted by the reference path and the store answers
by exhaustive scans, with the same results.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from scrapy.http import Response, TextResponse
from scrapy.statscollectors import StatsCollector
from scrapy.utils.reactor import is_asyncio_reactor_installed

from scrapy_neardup.dedup import jit
from scrapy_neardup.dedup.fingerprint.jobs import (JobFailed, JobResult, WorkerDied, WorkerOutOfMemory, WorkerProcess,
                                                   WorkerTimeout, fingerprint_job)
from scrapy_neardup.dedup.fingerprint.links import LinkJob, LinkSpec

from ..config import NearDupConfig
from ..counts import count_unchecked
from . import long_lived
from .unchecked import declared_encoding

logger = logging.getLogger(__name__)

#: How long this process waits for a worker to put the store's kernels in the cache before compiling them itself
STORE_CACHE_WAIT = 600.0
#: Fingerprints in the crawl's store from which this process loads the store's compiled kernels. Loading
#: them from the cache costs ~0.17 s of CPU alone (0.2-0.4 s sampled in a crawl), in a thread that holds
#: the GIL beside the crawl's thread; until the store holds this many, its exhaustive scans (numpy) have
#: cost less than that in all: 9 us a look-up at 1,000 fingerprints, 14 at 10,000, 21 at 20,000, against
#: 5-6 us with the kernels, ~0.13 s more in all by 15,000 (``bench/store_kernels_from.py``).
STORE_KERNELS_FROM = 15_000
#: Seconds between two looks at the store's size while it is smaller (the crawl's close ends the wait at once)
STORE_SIZE_POLL = 1.0
#: Worker restarts (after a death, a timeout or a failed start) in a row, with no page answered between them, past
#: which the filter stops checking
MAX_WORKER_RESTARTS = 5
#: Pages in a row a worker ran out of time or memory over, none answered between (probes aside), past which the
#: filter stops checking: a budget too small for the site's pages, where each page cost a timeout and a restart
MAX_PAGES_LOST = 20
#: Seconds a replacement worker has for the probe page at least (``_answers_the_probe``)
PROBE_TIMEOUT = 10.0
#: What a replacement worker is given first (``_answers_the_probe``): a page any working process fingerprints
PROBE_PAGE = b"<html><body><p>" + b" ".join(b"probe%d text" % i for i in range(20)) + b"</p></body></html>"
#: Body bytes past which a page that arrives before the first worker is up waits for it rather than
#: being fingerprinted in the crawl's thread (measured: see the module docstring)
START_PATH_MAX_BYTES = 128 * 1024

# why a page passes unchecked
TIMEOUT, WORKER_DIED, OUT_OF_MEMORY, NO_WORKER = "timeout", "worker_died", "out_of_memory", "no_worker"

_Job = tuple[Future, bytes, "str | None", "LinkJob | None"]  # (its answer, the body, the declared encoding, links?)


async def answer(pending: Future) -> Any:
    """``pending``'s result (or its exception), at once when a worker has answered
    already. (``asyncio.wrap_future`` always costs a turn of the event loop, even
    for a Future that is done: while the filter waits for a page's fingerprint,
    Scrapy's item workers for that page's output, ``CONCURRENT_ITEMS`` tasks,
    start and each waits on an empty queue, and each is woken again later: that
    costs the crawl's thread more than the rest of the filter's work on a page.
    The filter waits only for an answer that is not there yet.)"""
    if pending.done():
        return pending.result()
    return await asyncio.wrap_future(pending)


class FingerprintWorkers:
    """The filter's fingerprinting: see the module docstring."""

    def __init__(self, config: NearDupConfig, stats: StatsCollector) -> None:
        self.min_text = config.min_text
        self.timeout = config.worker_timeout
        self.memory_mib = config.worker_memory
        #: bytes of the window a page's head keeps, for the learned rules' ranged GETs (0: none kept)
        self.window = config.url_rules_confirm_bytes if config.url_rules else 0
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
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # over what the serving threads share: the counts, the live workers
        self._live: set[WorkerProcess] = set()
        #: set once a worker is up (or the workers stopped): pages go to the queue from then on
        self.up = threading.Event()
        self._store_cached = threading.Event()
        self._threads: list[threading.Thread] = []
        self.restarts = 0
        self.probes_answered = 0  # (replacements that answered the probe page: a test waits on it)
        self._failed_starts = 0  # (a worker that did not start: the machine's doing, whatever the pages)
        self._thread = threading.local()  # each serving thread's ``in_a_row``: restarts since its worker answered
        self._started = time.monotonic()  # (start()'s time, for the log)
        self.stopped = False  # past MAX_WORKER_RESTARTS: no more checking
        #: set at the crawl's close (an Event: the warm-up's wait for the store wakes at once, rather
        #: than at its next poll, which held up the process's exit by up to a second)
        self._closing = threading.Event()
        self._restarts_counted = 0  # (the stats are written in the crawl's thread only)
        self._store_size: Callable[[], int] | None = None  # (``start``)

    def start(self, store_size: Callable[[], int] | None = None) -> None:
        """Start the workers and the warm-up (once the store is open). ``store_size``:
        the fingerprints in the crawl's store, when its kernels run in this process
        (a local store; None: a shared one, whose look-ups run on Redis). With workers,
        this process loads the store's kernels only once it holds ``STORE_KERNELS_FROM``:
        a crawl that stays smaller never loads them (the workers compile them either way)."""
        self._started = time.monotonic()
        self._store_size = store_size
        for i in range(self.count):
            thread = threading.Thread(target=self._serve, name=f"neardup-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        jit.warm_in_background(("store",) if self.count else ("store", "fingerprint"), reference_first=True,
                               wait=self._wait_for_store_kernels if self.count else None, done=self._warm)

    def _warm(self) -> None:
        """The warm-up has loaded the kernels (in its own thread): the crawl's thread
        freezes them with the rest (``long_lived.refreeze``), unless the crawl is ending."""
        if not self._closing.is_set():
            from twisted.internet import reactor

            reactor.callFromThread(long_lived.refreeze)

    def submit(self, response: TextResponse, links: LinkSpec | None = None) -> Future | JobResult:
        """Start fingerprinting ``response``: a Future a worker will answer
        (a ``JobResult``, or why the page passes unchecked), or, before the
        workers are first up, the result, computed here, for a body of at most
        ``START_PATH_MAX_BYTES`` (a bigger one waits for the worker: a Future).
        ``links``: the worker reads the page's outlinks too (``JobResult.links``; not here)."""
        encoding = declared_encoding(response)
        if not self.count:
            return fingerprint_job(response.body, encoding, self.min_text, no_budget=True, window=self.window)
        if not self.up.is_set():
            if len(response.body) <= START_PATH_MAX_BYTES:
                self.stats.inc_value("neardup/fingerprinted_while_workers_start")
                return fingerprint_job(response.body, encoding, self.min_text, no_budget=True, window=self.window)
            # too big for the crawl's thread: it waits in the queue for the first worker
            self.stats.inc_value("neardup/waited_for_worker")
            logger.debug("near-duplicate filter: %s (%d bytes) waits for the worker process to start",
                         response.url, len(response.body))
        pending: Future = Future()
        job = None if links is None else LinkJob(
            response.url, (response.headers.get(b"Content-Type") or b"").decode("latin-1"), links)
        with self._lock:
            if self.stopped:
                pending.set_result(NO_WORKER)
            else:
                self._jobs.put((pending, response.body, encoding, job))
        return pending

    async def result(self, response: Response, pending: Future) -> JobResult | str:
        """The fingerprint a worker was asked for, or why the page passes
        unchecked (counted): a page that fails to fingerprint passes as
        ``"unparsable"``, one the worker ran out of time on or died with as
        ``"timeout"`` or ``"worker_died"``. A failing page must not stop the crawl."""
        try:
            outcome = await answer(pending)
        except JobFailed as exc:
            return self._failed(response, exc)
        finally:
            self._count_restarts()
        if isinstance(outcome, JobResult):
            return outcome
        if outcome == TIMEOUT:
            logger.warning("near-duplicate filter: %s took the worker process more than %g s "
                           "(NEARDUP_WORKER_TIMEOUT); the worker was replaced and the page passes unchecked",
                           response.url, self.timeout)
        elif outcome == OUT_OF_MEMORY:
            logger.warning("near-duplicate filter: the worker process ran out of memory (NEARDUP_WORKER_MEMORY=%d "
                           "MiB) over %s; it was replaced and the page passes unchecked", self.memory_mib, response.url)
        elif outcome == WORKER_DIED:
            logger.warning("near-duplicate filter: the worker process died with %s in hand; it was replaced "
                           "and the page passes unchecked", response.url)
        count_unchecked(self.stats, outcome)
        return outcome

    def worker_pids(self) -> list[int]:
        """The live workers' process ids."""
        with self._lock:
            return [w.pid for w in self._live]

    def close(self) -> None:
        """Stop the workers (at the crawl's end: no page is in their hands)."""
        self._closing.set()
        for _ in self._threads:
            self._jobs.put(None)
        with self._lock:
            live = list(self._live)
        for worker in live:
            # (a worker still compiling does so in a daemon thread: it does not hold up the
            # crawl's end. numba writes each cache file whole, a temporary file then a
            # rename, so what it finished compiling stays cached for the next crawl.)
            worker.close()
        for thread in self._threads:
            thread.join(10)
        # (a page still queued, one that waited for a worker that never came up: answered, never left hanging)
        with self._lock:
            left = self._answer_the_queued()
        if left:
            logger.warning("near-duplicate filter: %d page(s) still waiting for a worker process at the close "
                           "pass unchecked (neardup/skipped/no_worker)", left)
        self._count_restarts()

    def _failed(self, response: Response, exc: Exception) -> str:
        logger.warning("fingerprinting failed for %s: %s", response.url, exc)
        count_unchecked(self.stats, "unparsable")
        return "unparsable"

    def _count_restarts(self) -> None:
        """Bring the restart stats up to date (here, in the crawl's thread: the
        stats collector is not shared with the serving threads)."""
        if self.restarts != self._restarts_counted:
            self._restarts_counted = self.restarts
            self.stats.set_value("neardup/worker_restarts", self.restarts)
        if self.stopped:
            self.stats.set_value("neardup/workers_stopped", 1)

    # -- in the serving threads, one per worker -----------------------------------

    def _serve(self) -> None:
        """Hand pages from the queue to one worker, replacing it as needed."""
        worker: WorkerProcess | None = None
        first = True
        self._thread.in_a_row = 0
        self._thread.pages_lost = 0  # (pages run out of time or memory in a row, probes answered or not)
        probe = False  # (the last worker ran out of time or memory over its page: its replacement is probed)
        while True:
            if worker is None:
                worker = self._start_worker(first)
                first = False
                if worker is None:  # stopped, or closing
                    return
                if probe and not self._answers_the_probe(worker):
                    self._retire(worker, kill=True)
                    worker = None
                    continue
                probe = False
            job = self._jobs.get()
            if job is None or self._closing.is_set():
                if job is not None and job[0].set_running_or_notify_cancel():
                    job[0].set_result(NO_WORKER)
                self._retire(worker, kill=False)
                return
            pending, body, encoding, links = job
            if not pending.set_running_or_notify_cancel():
                continue
            if self.stopped:
                pending.set_result(NO_WORKER)
                self._retire(worker, kill=False)
                return
            try:
                result = worker.run(body, encoding, self.min_text, self.timeout, links, self.window)
            except JobFailed as exc:
                self._thread.in_a_row = self._thread.pages_lost = 0  # (the worker answered: the page was bad)
                pending.set_exception(exc)
                continue
            except (WorkerTimeout, WorkerOutOfMemory, WorkerDied) as exc:
                outcome = TIMEOUT if isinstance(exc, WorkerTimeout) else \
                    OUT_OF_MEMORY if isinstance(exc, WorkerOutOfMemory) else WORKER_DIED
                probe = outcome != WORKER_DIED  # (a death unexplained may be the machine's: not probed)
                self._thread.pages_lost += 1
            else:
                self._thread.in_a_row = self._thread.pages_lost = 0
                pending.set_result(result)
                continue
            # (killed before the page's answer, so that its replacement is counted first,
            # and the filter stopped first when it may not be replaced: whoever has the
            # answer sees ``stopped`` already set)
            self._retire(worker, kill=True)
            worker = None
            with self._lock:
                if (self._thread.in_a_row >= MAX_WORKER_RESTARTS or self._thread.pages_lost >= MAX_PAGES_LOST) \
                        and not self.stopped and not self._closing.is_set():
                    self._stop()
            pending.set_result(outcome)

    def _answers_the_probe(self, worker: WorkerProcess) -> bool:
        """Whether the replacement of a worker that ran out of time or memory over its page fingerprints a
        small page of ordinary text in its time budget: then the machine works, and the page was what
        stopped the one before (a site's hostile pages in a row, each a timeout, once switched the filter
        off): the count of restarts in a row starts again. A worker that cannot is replaced, and counted.
        (A worker that died unexplained is not probed: the machine may kill workers whatever the page.)
        O(1 small page)."""
        try:
            # (its own budget: a fresh worker's first page may wait on a busy machine's CPU)
            worker.run(PROBE_PAGE, "utf-8", 1, max(self.timeout, PROBE_TIMEOUT), None)
        except (WorkerTimeout, WorkerOutOfMemory, WorkerDied, JobFailed):
            return False
        self._thread.in_a_row = 0
        with self._lock:
            self.probes_answered += 1
        return True

    def _start_worker(self, first: bool) -> WorkerProcess | None:
        """A new worker, this thread's first or a replacement; None once the
        workers have stopped (past ``MAX_WORKER_RESTARTS`` in a row) or are closing."""
        while True:
            with self._lock:
                if self.stopped or self._closing.is_set():
                    return None
                if not first:
                    if self._thread.in_a_row >= MAX_WORKER_RESTARTS or self._failed_starts > MAX_WORKER_RESTARTS:
                        self._stop()
                        return None
                    self.restarts += 1
                    self._thread.in_a_row += 1
            first = False
            try:
                worker = WorkerProcess(on_store_cached=self._store_cached.set, memory_mib=self.memory_mib)
            except (WorkerDied, OSError) as exc:
                logger.warning("near-duplicate filter: a worker process did not start: %s", exc)
                with self._lock:
                    self._failed_starts += 1  # (counted for the whole crawl: no answered page makes up for it)
                continue
            with self._lock:
                self._live.add(worker)
            if self._closing.is_set():  # (close() may have missed it)
                self._retire(worker, kill=False)
                return None
            with self._lock:
                first_up = not self.up.is_set()
                self.up.set()
            if first_up:  # (says when the pages stop being fingerprinted in the crawl's thread)
                logger.info("near-duplicate filter: the worker process is up (%.1f s after the start): pages are "
                            "fingerprinted there from now on", time.monotonic() - self._started)
            return worker

    def _stop(self) -> None:
        """Stop checking (with ``self._lock`` held): every page waiting or to come passes unchecked."""
        self.stopped = True
        logger.error("near-duplicate filter: the worker process was replaced %d times in a row with no page "
                     "answered between, or failed to start as often (MAX_WORKER_RESTARTS): the machine, not a page, "
                     "stops it; or it ran out of time or memory over %d pages in a row (MAX_PAGES_LOST: "
                     "NEARDUP_WORKER_TIMEOUT or NEARDUP_WORKER_MEMORY too small for the site's pages?); the filter "
                     "STOPS CHECKING: every page from now on passes unchecked (neardup/skipped/no_worker), none is "
                     "fingerprinted in the crawl's thread", MAX_WORKER_RESTARTS, MAX_PAGES_LOST)
        self._answer_the_queued()
        for _ in self._threads:  # (the other threads retire their workers)
            self._jobs.put(None)
        self.up.set()

    def _answer_the_queued(self) -> int:
        """Answer every page in the queue ``NO_WORKER`` (with ``self._lock`` held), up to a
        ``None`` of close()'s, which is left for the threads: nothing follows it. How many."""
        answered = 0
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:
                self._jobs.put(None)
                break
            if job[0].set_running_or_notify_cancel():
                job[0].set_result(NO_WORKER)
                answered += 1
        return answered

    def _retire(self, worker: WorkerProcess, kill: bool) -> None:
        with self._lock:
            self._live.discard(worker)
        if kill:
            worker.kill()
        else:
            worker.close()

    def _wait_for_store_kernels(self) -> bool:
        """Until the store holds ``STORE_KERNELS_FROM`` fingerprints and a worker has
        put its kernels in the cache (``_wait_for_store_cache``); False if the crawl
        ends first (or the store is shared): the kernels are not loaded."""
        size = self._store_size
        while True:
            if size is None or self._closing.is_set() or jit.exiting():
                return False
            if size() >= STORE_KERNELS_FROM:
                break
            self._closing.wait(STORE_SIZE_POLL)
        self._wait_for_store_cache()
        return True

    def _wait_for_store_cache(self) -> None:
        """Until a worker has the store's kernels in the cache (or the workers
        stopped, or ``STORE_CACHE_WAIT`` has passed: then this process compiles
        them itself), or the interpreter is exiting."""
        deadline = time.monotonic() + STORE_CACHE_WAIT
        while time.monotonic() < deadline:
            if self._store_cached.wait(1.0) or self.stopped or self._closing.is_set() or jit.exiting():
                return
