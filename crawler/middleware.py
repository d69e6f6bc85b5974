"""The near-duplicate filter: a spider middleware, Scrapy's face of ``crawler.filter``.

Spider middlewares see responses after the downloader middlewares, so after
``HttpCompressionMiddleware`` has decompressed them. For each response:

1. ``process_spider_input`` (before the callback) counts it as fetched and
   notes why it passes through unchecked (``filter.unchecked``), or starts
   fingerprinting its visible text (``filter.workers``: in a worker process
   when ``NEARDUP_WORKERS`` > 0, so that the spider's own work and the
   fingerprinting use two cores);
2. ``process_spider_output`` (an async generator) runs the callback, waits
   for the fingerprint before it lets anything through, asks the store for
   the page's verdict (``filter.verdict``; a shared store's outage is ridden
   out by ``filter.store_faults``), then lets through what the verdict
   allows, less the requests a learned URL rule says need not be made
   (``filter.learned_rules``), its items filled in (``filter.items``). Every
   drop is explained (``filter.duplicates_log``), once. A page let through
   goes to the index (``crawler.pipelines.index_page``), whatever the spider
   yields.

At start the filter refuses a JOBDIR or store directory that another
running crawl is using (``crawler.in_use``), before it opens anything. A
store that cannot be written later stops the crawl: nothing more of any
page leaves, and the pages in hand stay in the frontier for the resume.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.http import Response, TextResponse
from scrapy.utils.misc import load_object

from scrapy_neardup.dedup.fingerprint import Fingerprinter
from scrapy_neardup.dedup.fingerprint.jobs import JobResult
from scrapy_neardup.dedup.store import SimhashStore
from scrapy_neardup.dedup.store.backends import StoreError
from scrapy_neardup.dedup.store.meta import StoreMismatchError

from . import counts
from .canonical import CANONICAL_PRIORITY, declared_canonical, same_host
from .config import NearDupConfig
from .filter import long_lived
from .filter.captured_text import CapturedText, capture_path
from .filter.duplicates_log import DuplicatesLog
from .filter.items import fill
from .filter.learned_rules import QUEUED_KEY, LearnedRules
from .filter.runs_log import RunsLog
from .filter.store_faults import FILE_ERRORS, StoreOutage, stop_the_crawl
from .filter.unchecked import HostilePageWithheld, declared_encoding, hostile_to_withhold, unchecked_reason
from .filter.verdict import DROPPED, KEPT, NotRecorded, Verdicts
from .filter.workers import OUT_OF_MEMORY, TIMEOUT, WORKER_DIED, FingerprintWorkers, answer
from .frontier.acks import AckTracker, response_id
from .frontier.db import recorded_store_size
from .in_use import CrawlInUse, refuse_a_jobdir_in_use, store_in_use, store_is_in_use
from .pipelines import index_page

__all__ = ["NearDupMiddleware", "declared_encoding"]  # (the ready spider decodes as the filter does)

logger = logging.getLogger(__name__)

#: The reasons a page passed unchecked that make it too costly for the crawl's thread to parse
TOO_COSTLY = frozenset({TIMEOUT, OUT_OF_MEMORY, WORKER_DIED, "too_large"})
#: Outlinks of an unchecked page looked up at once in a shared rule book (a Redis round trip a batch)
SHARED_RULES_BATCH = 100

_FILTERS: weakref.WeakKeyDictionary[Crawler, NearDupMiddleware] = weakref.WeakKeyDictionary()


def _blind_resume(crawler: Crawler, config: NearDupConfig) -> bool:
    """Whether the crawl persists (``JOBDIR``) with a scheduler that does not mark the requests it hands
    out again after a kill (the project's own, or ``NEARDUP_FRONTIER = False``): then the store remembers
    pages whose items a kill may have lost, and a page fetched again is emitted again (``Verdicts``)."""
    if not crawler.settings.get("JOBDIR"):
        return False
    try:
        scheduler = load_object(crawler.settings["SCHEDULER"])
    except (ImportError, ValueError, NameError, AttributeError):
        return True
    if getattr(scheduler, "marks_redeliveries", False):
        return False
    logger.warning("near-duplicate filter: JOBDIR without the durable frontier (SCHEDULER %s%s): after a "
                   "resume, a page fetched again is emitted again, as nothing says whether its items were "
                   "committed before the kill", crawler.settings["SCHEDULER"],
                   ", NEARDUP_FRONTIER = False" if not config.frontier else "")
    return True


def _scheduler_refuses_at_start(crawler: Crawler) -> None:
    """The project's frontier's own checks before the engine starts (``refuse_at_start``: the shared
    frontier's), so that a misconfiguration is one error, not a failing engine's cascade."""
    try:
        scheduler = load_object(crawler.settings["SCHEDULER"])
    except (ImportError, ValueError, NameError, AttributeError):
        return
    if callable(refuse := getattr(scheduler, "refuse_at_start", None)):
        refuse(crawler.settings)


class NearDupMiddleware:
    """Drops near-duplicate pages and their outlinks. See the module docstring."""

    def __init__(self, crawler: Crawler, config: NearDupConfig) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        refuse_a_jobdir_in_use(crawler.settings.get("JOBDIR"))  # (before the engine exists: see crawler.in_use)
        _scheduler_refuses_at_start(crawler)
        self.scheme = Fingerprinter(min_tokens=config.min_text).scheme
        self.workers = FingerprintWorkers(config, self.stats)  # (first: nothing compiles in the crawl's thread)
        self.store = self._open_store()
        if not config.shared_store:
            self._refuse_a_store_that_lost_fingerprints(crawler.settings.get("JOBDIR"))
        self.duplicates = DuplicatesLog(crawler, config.duplicates_file)
        # for the report (crawler.report): dropped pages' text (opt-in), a line per run of a JOBDIR
        self.captured = CapturedText(capture_path(config.duplicates_file), config.dropped_text_bytes, self.stats) \
            if config.dropped_text_bytes and config.duplicates_file else None
        jobdir = crawler.settings.get("JOBDIR")
        self.runs = RunsLog(jobdir, self.stats) if jobdir else None
        # learned URL rules (crawler.url_rules): outlinks whose content a fetched page already has are not requested
        self.rules = LearnedRules(crawler, config, self.duplicates) if config.url_rules else None
        tracker = AckTracker.of(crawler)
        if not config.shared_store:
            tracker.store_size = self._committed_store_size
        self.verdicts = Verdicts(config, self.stats, self.store, self.duplicates,
                                 self.rules.learn if self.rules is not None else None,
                                 blind_resume=_blind_resume(crawler, config),
                                 storing=lambda response: tracker.storing(response_id(response)),
                                 stored_nothing=lambda response: tracker.stored_nothing(response_id(response)),
                                 notes=tracker)
        if self.rules is not None:
            self.rules.kept_twin = self.verdicts.kept_twin
            self.rules.twins = self.verdicts.twins
        self.outage = StoreOutage(config, self.stats)
        self._store_failure: BaseException | None = None
        # response -> pending fingerprint (a worker's Future), the fingerprint, or why it passes unchecked
        self._pending: weakref.WeakKeyDictionary[Response, Future | JobResult | str] = weakref.WeakKeyDictionary()
        self._holds_freeze = False  # (``long_lived``: from the engine's start to the spider's close)
        # response -> the end of its wait for a verdict, which requests below it wait for (``filter.verdicts_due``)
        self._due: weakref.WeakKeyDictionary[Response, weakref.finalize] = weakref.WeakKeyDictionary()
        # (a local store's size, for when this process loads its kernels: ``FingerprintWorkers.start``)
        self.workers.start(None if config.shared_store else (lambda: len(self.store)))
        _FILTERS[crawler] = self
        # (the filter's start-up done: its long-lived objects out of full collections, ``long_lived``)
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        if self.runs is not None:
            crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        logger.info("near-duplicate filter on: k=%d, store %s (%d fingerprints), %s, %d worker process(es)",
                    config.max_distance, config.store_shown, len(self.store),
                    self.store.layout.describe(), self.workers.count)

    @classmethod
    def of(cls, crawler: Crawler) -> NearDupMiddleware | None:
        """The crawl's filter, once made (for ``crawler.avoid_middleware``)."""
        return _FILTERS.get(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupMiddleware:
        config = NearDupConfig.of(crawler)
        if not config.enabled:
            raise NotConfigured("NEARDUP_ENABLED is off")
        return cls(crawler, config)

    def _open_store(self) -> SimhashStore:
        config = self.config
        try:
            # commit_every=1: a kept page's fingerprint is committed before its item goes
            # anywhere (the index, a feed), so the index never holds a page the store lost
            return SimhashStore.open(config.store, max_distance=config.max_distance, capacity=config.capacity,
                                     scheme=self.scheme, commit_every=1)
        except StoreMismatchError as exc:
            if exc.field != "max_distance":
                raise
            raise StoreMismatchError(f"NEARDUP_MAX_DISTANCE = {config.max_distance}: {exc}; a store keeps the "
                                     "k it was made with: give it that k, or another NEARDUP_STORE",
                                     exc.field) from None
        except StoreError:
            if config.store and not config.shared_store and store_is_in_use(config.store):
                raise CrawlInUse(store_in_use(config.store)) from None
            raise

    def _committed_store_size(self) -> int | None:
        """The local store's fingerprints, all committed (``commit_every=1``), for the frontier to record;
        None once a write to it failed (the tables may count a fingerprint whose commit raised)."""
        return None if self._store_failure is not None else len(self.store)

    def _refuse_a_store_that_lost_fingerprints(self, jobdir: str | None) -> None:
        """``StoreError`` when the durable frontier recorded more fingerprints in the store than it holds
        now: replaced, restored from an older copy, its ``-wal`` file lost. Resumed from it, the crawl would
        keep the near-copies of every page it lost again, and not fetch those pages (done, for the frontier)."""
        if not jobdir:
            return
        recorded = recorded_store_size(jobdir)
        held = len(self.store)
        if recorded is not None and held < recorded:
            self.store.abandon()  # (left as it was found: its -wal file may yet be restored)
            raise StoreError(f"the store {self.config.store} holds {held} fingerprints, and the frontier in {jobdir} "
                             f"recorded {recorded} committed there: it was replaced, restored from an older copy, or "
                             "lost its -wal file; restore it, or start a new JOBDIR")

    # -- 1. start fingerprinting ------------------------------------------------

    def process_spider_input(self, response: Response) -> None:
        self.stats.inc_value(counts.FETCHED)
        if self.config.withhold_hostile and (why := hostile_to_withhold(response, self.config.max_page_bytes)) is not None:
            # (raised here, the page never reaches the callback; see process_spider_exception)
            counts.count_unchecked(self.stats, "hostile")
            self.stats.inc_value("neardup/withheld_hostile")
            # (said here: a request with an errback takes the exception there, not through
            # process_spider_exception)
            logger.warning("near-duplicate filter: %s withheld from the spider (NEARDUP_WITHHOLD_HOSTILE): %s",
                           response.url, why)
            raise HostilePageWithheld(response.url, why)
        reason = unchecked_reason(response, self.config)
        if reason:
            counts.count_unchecked(self.stats, reason)
            self._pending[response] = reason
            return
        assert isinstance(response, TextResponse)
        # a spider that follows a LinkExtractor's links (the ready spider) may have the
        # worker read them from the tree it parses anyway: see worker_links
        wants = getattr(self.crawler.spider, "links_from_worker", None)
        self._pending[response] = self.workers.submit(response, wants(response) if wants is not None else None)
        if self.rules is not None:  # (requests below it wait for its verdict: ``filter.verdicts_due``)
            # (ended when its verdict is in, or when the response is gone: a callback that raised)
            self._due[response] = weakref.finalize(response, self.rules.due.end, self.rules.due.begin(response.url))

    # -- 2. decide and filter ---------------------------------------------------

    async def process_spider_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        if isinstance(self._pending.get(response), str) and self._store_failure is None:
            # passes unchecked (not HTML, an error page, neardup_skip...): nothing to wait for, so its output
            # leaves as the callback yields it, as without the filter (a sitemap's or an API's long output,
            # a callback that awaits a request it yielded)
            async for item in self._unchecked_output(response, result):
                yield item
            return
        # Run the callback (link extraction, item building) while the worker
        # fingerprints; nothing leaves before the verdict.
        outputs: list[Any] = []
        error: BaseException | None = None
        try:
            async for item in result:
                outputs.append(item)
        except Exception as exc:  # e.g. CloseSpider after the page's item: deliver what came first
            error = exc
        try:
            fp_result = await self._fingerprint(response)
            # The callback failed on the page (CloseSpider aside): checked, but not stored, so that a near-copy of
            # it, whose callback may not fail, is kept rather than dropped against a page that gave nothing
            store = error is None or isinstance(error, CloseSpider)
            held = False
            if self._store_failure is None:
                try:
                    verdict = await self.outage.decide(
                        not isinstance(fp_result, str) and fp_result.value is not None,
                        lambda retried: self.verdicts.decide(response, fp_result, retried, store=store))
                except FILE_ERRORS as exc:
                    self._store_failure = exc
                    stop_the_crawl(self.crawler, self.config, exc)
                except NotRecorded:  # (the frontier failed, and stops the crawl; or its Redis is away)
                    held = True
        finally:  # (also when deciding raised: the requests waiting for its verdict go on)
            self._verdict_in(response)  # (the rules this verdict makes are in the book)
        if self._store_failure is not None or held:
            # Nothing of this page leaves: it goes back to the frontier for the resume.
            AckTracker.of(self.crawler).keep_for_resume(response_id(response))
            self.stats.inc_value("neardup/held_for_resume")
            return
        canonical = declared_canonical(response) if not isinstance(fp_result, str) else None
        # the index is the filter's: the page goes to it whatever the spider yields, and
        # before any of its output leaves (a gate of its request's acknowledgement)
        index_page(self.crawler, response, verdict, fp_result, canonical)
        if verdict == DROPPED and self.captured is not None and not isinstance(fp_result, str):
            self.captured.add(urldefrag(response.url)[0], fp_result.text)  # (the duplicates file's URL)
        # (per output, the least work: a page's output is mostly its outlinks, tens to hundreds)
        kept = self.verdicts.let_through(verdict, outputs, response)
        if verdict == KEPT and canonical is not None and self.config.canonical_first:
            kept.extend(self._canonical_request(response, canonical))
        if self.rules is not None and self.rules.acting():
            skip = self.avoided([r for r in kept if isinstance(r, Request)], response.url)
            if skip:  # (a request is its own key: identity)
                kept = [item for item in kept if not (isinstance(item, Request) and item in skip)]
        mark = self.rules is not None
        for item in kept:
            if mark and isinstance(item, Request):  # (an outlink waits for the verdicts above it: AvoidMiddleware)
                item.meta[QUEUED_KEY] = True
            fill(item, fp_result)  # (items only: a request or an unchecked page's reason is passed over at once)
            yield item
        if error is not None:
            raise error

    async def _unchecked_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """A page that passes unchecked (its reason counted at input): its output as it comes, each outlink
        left out if a learned URL rule says a fetched page has its content. O(1) an output; while a rule
        acts, a local rule book's look-up an outlink, and a shared one's (a Redis round trip) a batch of up
        to ``SHARED_RULES_BATCH`` outlinks, sent on before the page's next item, at its end, and when its
        callback raises (what it yielded before goes on, as without the filter)."""
        batch: list[Request] = []
        try:
            async for item in result:
                if not isinstance(item, Request) or self.rules is None or not self.rules.acting():
                    if batch:
                        for request in self._not_avoided(batch, response.url):
                            yield request
                        batch = []
                    yield item
                elif self.rules.shared:
                    batch.append(item)
                    if len(batch) >= SHARED_RULES_BATCH:
                        for request in self._not_avoided(batch, response.url):
                            yield request
                        batch = []
                elif not self.avoided([item], response.url):
                    yield item
        except Exception:
            for request in self._not_avoided(batch, response.url):
                yield request
            raise
        else:
            for request in self._not_avoided(batch, response.url):
                yield request
        finally:  # (not before: the callback may ask why, ``too_costly_to_parse``)
            self._pending.pop(response, None)

    def _verdict_in(self, response: Response) -> None:
        """The requests waiting for ``response``'s verdict go on (``filter.verdicts_due``). O(1)."""
        if (due := self._due.pop(response, None)) is not None:
            due()

    def _not_avoided(self, requests: list[Request], referer: str) -> list[Request]:
        """Those of ``requests`` no learned URL rule leaves out, in order (one look-up round for all)."""
        skip = self.avoided(requests, referer) if requests else set()
        return [r for r in requests if r not in skip] if skip else requests

    def process_spider_exception(self, response: Response, exception: BaseException) -> list[Any] | None:
        """A page withheld from the callbacks (``NEARDUP_WITHHOLD_HOSTILE``)
        ends here, with no output, as Scrapy's ``HttpErrorMiddleware`` ends
        an error page; any other exception goes on. A callback that raised before ``process_spider_output``
        took its output leaves its page with no verdict: the requests waiting for one go on."""
        self._verdict_in(response)
        if isinstance(exception, HostilePageWithheld):  # (the warning is said as it is raised)
            return []
        return None

    def _canonical_request(self, response: Response, canonical: str) -> list[Request]:
        """NEARDUP_CANONICAL_FIRST: the request for the canonical URL a kept page
        declares (on its host, another URL), ahead of the page's other links, so
        that the canonical URL is usually the one fetched first. Once it is
        fetched, as a near-duplicate, the index row takes it."""
        request = response.request
        if request is None or urldefrag(response.url)[0] == canonical or not same_host(response.url, canonical):
            return []
        self.stats.inc_value("neardup/canonical_requested")
        # (a new request, not a copy: the page's headers, Referer included, are not the canonical URL's)
        return [Request(canonical, callback=request.callback, errback=request.errback,
                        cb_kwargs=dict(request.cb_kwargs), priority=request.priority + CANONICAL_PRIORITY)]

    async def worker_links(self, response: Response) -> list[str] | None:
        """The page's outlinks as the worker read them, for a spider whose
        ``links_from_worker(response)`` gave a ``LinkSpec`` (the ready spider's
        ``LinkExtractor``, as ``dedup.fingerprint.links``); None when the worker
        did not read them (a page fingerprinted while the workers start, one
        passed unchecked, hostile or failed): the spider extracts them itself.
        Awaited in the callback; the verdict waits for the same answer."""
        pending = await self._answered(response)
        return pending.links if isinstance(pending, JobResult) else None

    async def _answered(self, response: Response) -> JobResult | str | None:
        """The page's fingerprint, or why it passes unchecked, once there; None for a page the
        worker could not read (counted and logged where the verdict takes it) or not seen."""
        pending = self._pending.get(response)
        if isinstance(pending, Future):
            try:
                return await answer(pending)
            except Exception:
                return None
        return pending

    async def too_costly_to_parse(self, response: Response) -> str | None:
        """Why the crawl's thread should not parse this page either (the ready spider's text
        and links), or None: a worker ran out of time or memory over it or died with it, or it
        is past ``NEARDUP_MAX_PAGE_BYTES``. Parsed in the crawl's thread instead, such a page
        stalled the crawl for minutes. Awaited in the callback, like ``worker_links``."""
        pending = await self._answered(response)
        return pending if isinstance(pending, str) and pending in TOO_COSTLY else None

    async def _fingerprint(self, response: Response) -> JobResult | str:
        """The page's fingerprint, once it is there, or why it passes unchecked."""
        pending = self._pending.pop(response, "unchecked")
        if isinstance(pending, Future):
            return await self.workers.result(response, pending)
        return pending

    def avoided(self, requests: list[Request], referer: str | None, scheduled: bool = False) -> set[Request]:
        """Those of ``requests`` a learned URL rule says need not be made
        (``LearnedRules.avoided``; ``scheduled``: past the dupe filter); none without learned rules."""
        return set() if self.rules is None else self.rules.avoided(requests, referer, scheduled)

    # -- the end ----------------------------------------------------------------

    def engine_started(self) -> None:
        long_lived.hold()
        self._holds_freeze = True

    def spider_opened(self) -> None:
        assert self.runs is not None  # (connected only then; after the frontier counted its redeliveries)
        self.runs.started(len(self.store))

    def spider_closed(self, reason: str) -> None:
        self.workers.close()
        if self.rules is not None:
            self.rules.due.release_all()
        if self._holds_freeze:  # (what the crawl froze goes back to the collector)
            self._holds_freeze = False
            long_lived.release()
        try:
            self.store.close()  # (what is committed stays, whatever fails here)
            if self.rules is not None:
                self.rules.close()
            self.duplicates.close()
            if self.captured is not None:
                self.captured.close()
        except FILE_ERRORS as exc:
            logger.error("near-duplicate filter: could not close its files cleanly (%s: %s); the committed "
                         "records are kept", type(exc).__name__, exc)
        if self.config.store and not self.config.shared_store:
            size = sum(f.stat().st_size for f in Path(self.config.store).glob("*") if f.is_file())
            self.stats.set_value("neardup/store_bytes", size)
        if self.runs is not None:
            self.runs.closed(reason)
