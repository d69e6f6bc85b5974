"""The near-duplicate filter: a spider middleware.

Spider middlewares see responses after the downloader middlewares, so after
``HttpCompressionMiddleware`` has decompressed them. For each response:

1. ``process_spider_input`` (before the callback) starts fingerprinting the
   visible text, in a worker process when ``NEARDUP_WORKERS`` > 0 so that
   the spider's own work and the fingerprinting use two cores;
2. ``process_spider_output`` (an async generator) waits for the fingerprint
   before it lets anything through, asks the store (first seen wins; the
   store is only touched here, in the crawl's thread, so every check is
   atomic), then lets a kept page's output through and discards
   *everything* a near-duplicate's callback yields: no items, and none of
   its outlinks are requested because of it. A page that a kept page also
   links to is still crawled, once, via that page.

Items whose ``fingerprint`` field is None get the page's fingerprint, title
and visible text filled in, so nothing is extracted twice.

Every drop is explained: a JSON line in the duplicates file (written in
blocks, flushed at least every second and at the end) and a DEBUG log line.

Nothing compiles in the crawl's thread: the filter marks the compiled
kernels not ready (``dedup.jit``) and warms them elsewhere: the worker
process compiles them all (answering by the reference path meanwhile), and
a background thread here loads the store's from the cache once the worker
has put them there (without a worker, that thread compiles both groups).
Until then pages are fingerprinted by the reference path and the store
answers by exhaustive scans, with the same results.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

from itemadapter import ItemAdapter, is_item
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response, TextResponse
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.reactor import is_asyncio_reactor_installed
from w3lib.encoding import http_content_type_encoding

from scrapy_neardup.dedup import jit
from scrapy_neardup.dedup.fingerprint import Fingerprinter
from scrapy_neardup.dedup.fingerprint.jobs import JobResult, fingerprint_job, warm_up
from scrapy_neardup.dedup.simhash import to_hex
from scrapy_neardup.dedup.store import SimhashStore
from scrapy_neardup.dedup.store import StoreUnavailable
from scrapy_neardup.dedup.store.backends import StoreError, private_file

from .config import NearDupConfig
from .frontier.acks import REDELIVERED_KEY, AckTracker, response_id
from .frontier.codec import CorruptRequest, UnserializableRequest, decode_request, encode_request
from .frontier.scheduler import stop_crawl
from .scope import scope_of
from .url_rules import RuleBook

logger = logging.getLogger(__name__)

KEPT, DROPPED, UNCHANGED, SKIPPED = "kept", "dropped", "unchanged", "skipped"
_FILTERS: weakref.WeakKeyDictionary[Crawler, NearDupMiddleware] = weakref.WeakKeyDictionary()
MIN_BACKOFF, MAX_BACKOFF = 0.5, 30.0  # seconds between attempts to reach a shared store that is down
HTML_TYPES = (b"text/html", b"application/xhtml+xml")
#: What the filter's stores can fail with (a store or rule book on disk or on Redis): the crawl goes on or stops cleanly
FILE_ERRORS = (StoreError, sqlite3.Error, OSError)


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


async def _sleep(seconds: float) -> None:
    if is_asyncio_reactor_installed():
        await asyncio.sleep(seconds)
    else:
        from twisted.internet import reactor, task

        await maybe_deferred_to_future(task.deferLater(reactor, seconds, lambda: None))


class NearDupMiddleware:
    """Drops near-duplicate pages and their outlinks. See the module docstring."""

    def __init__(self, crawler: Crawler, config: NearDupConfig) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.scheme = Fingerprinter(min_tokens=config.min_text).scheme
        workers = config.workers
        if workers and not is_asyncio_reactor_installed():
            logger.warning("NEARDUP_WORKERS needs the asyncio reactor; fingerprinting in the crawl's thread")
            workers = 0
        # The crawl's thread never compiles: the reference paths serve until the
        # kernels are warm. With a worker, the worker compiles them all (the store's
        # first, into the cache) while it fingerprints by the reference path, and a
        # thread here loads the store's from the cache once they are there; without
        # one, a thread here compiles both.
        jit.defer()
        mp = multiprocessing.get_context("spawn")
        self._store_cached = mp.Event() if workers else None
        # commit_every=1: a kept page's fingerprint is committed before its item goes
        # anywhere (the index, a feed), so the index never holds a page the store lost
        self.store = SimhashStore.open(config.store, max_distance=config.max_distance,
                                       capacity=config.capacity, scheme=self.scheme, commit_every=1)
        self._scope = scope_of(config.scope)
        # learned URL rules (crawler.url_rules): outlinks whose content a fetched page already has are not requested
        self.rules = RuleBook(config.url_rules_file, max_distance=config.max_distance,
                              min_evidence=config.url_rules_min_evidence, explore=config.url_rules_explore,
                              pin=config.url_rules_pin, forbid=config.url_rules_forbid) if config.url_rules else None
        self._rules_warned = 0.0
        self._store_failure: BaseException | None = None
        # a shared store that cannot be reached: not asked again before _down_until
        self._down_since: float | None = None
        self._down_until = 0.0
        self._backoff = MIN_BACKOFF
        # response -> pending fingerprint (a Future) or a skip reason (str)
        self._pending: weakref.WeakKeyDictionary[Response, Future | JobResult | str] = weakref.WeakKeyDictionary()
        self._pool: ProcessPoolExecutor | None = None
        self._pool_ready: Future | None = None
        if workers:
            self._pool = ProcessPoolExecutor(workers, mp_context=mp, initializer=warm_up,
                                             initargs=(config.min_text, self._store_cached))
            # Start the workers now (the pool spawns them on the first submit). A worker
            # takes a second or two to import and load rjieba's dictionary; pages that
            # arrive before it is ready are fingerprinted here, by the reference path,
            # rather than waiting for it.
            self._pool_ready = self._pool.submit(int)
        jit.warm_in_background(("store",) if workers else ("store", "fingerprint"), reference_first=True,
                               wait=self._wait_for_store_cache if workers else None)
        self._dup_fh = None
        self._dup_flushed = time.monotonic()
        self._dup_written = self._dup_synced = 0
        _FILTERS[crawler] = self
        if config.duplicates_file:
            Path(config.duplicates_file).parent.mkdir(parents=True, exist_ok=True)
            private_file(config.duplicates_file)
            self._dup_fh = open(config.duplicates_file, "a", encoding="utf-8")  # noqa: SIM115
            AckTracker.of(crawler).add_gate(self)  # a drop is acknowledged only once its line is written
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        logger.info("near-duplicate filter on: k=%d, store %s (%d fingerprints), %s, %d worker process(es)",
                    config.max_distance, config.store_shown, len(self.store),
                    self.store.layout.describe(), workers)

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

    # -- 1. start fingerprinting ------------------------------------------------

    def process_spider_input(self, response: Response) -> None:
        reason = self._skip_reason(response)
        if reason:
            self.stats.inc_value(f"neardup/skipped/{reason}")
            self._pending[response] = reason
            return
        assert isinstance(response, TextResponse)
        pool = self._usable_pool()
        if pool is not None:
            try:
                self._pending[response] = pool.submit(fingerprint_job, response.body, declared_encoding(response),
                                                      self.config.min_text)
                return
            except BrokenProcessPool:  # a worker died (killed, out of memory)
                self._give_up_pool("a worker process died")
        elif self._pool is not None:
            self.stats.inc_value("neardup/fingerprinted_while_workers_start")
        self._pending[response] = fingerprint_job(response.body, declared_encoding(response), self.config.min_text)

    def _usable_pool(self) -> ProcessPoolExecutor | None:
        """The worker pool once its workers are up; None while they start or without one."""
        ready = self._pool_ready
        if self._pool is None or ready is None or not ready.done():
            return None
        if ready.exception() is not None:
            self._give_up_pool(f"the worker process did not start: {ready.exception()!r}")
            return None
        return self._pool

    def _wait_for_store_cache(self) -> None:
        """Until the worker has the store's kernels in the cache (or is gone, or
        ten minutes have passed: then this process compiles them itself)."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self._store_cached.wait(1.0) or self._pool is None:
                return

    def _give_up_pool(self, why: str) -> None:
        """Fingerprint in the crawl's thread from now on; the crawl goes on."""
        logger.error("near-duplicate filter: %s; fingerprinting in the crawl's thread from now on", why)
        self.stats.inc_value("neardup/worker_failures")
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._pool_ready = None
        jit.warm_in_background(("fingerprint",))  # from the cache the worker filled, if it got that far

    def _skip_reason(self, response: Response) -> str | None:
        if response.meta.get(self.config.skip_meta_key):
            return "meta"
        # An error page (a spider that handles 404s sees them) is no page of the site:
        # one soft-404 template would otherwise make every later 404 a "duplicate", and
        # a 404 stored first would make the real page at another URL one.
        if response.status >= 400 and not self.config.check_error_pages:
            return "error_status"
        if not isinstance(response, TextResponse) or not self._is_html(response):
            return "non_html"
        # A 20 MB page takes ~2 s and ~570 MB to fingerprint: past the cap, let it through unchecked.
        if len(response.body) > self.config.max_page_bytes:
            return "too_large"
        return None

    @staticmethod
    def _is_html(response: TextResponse) -> bool:
        ctype = response.headers.get("Content-Type", b"").lower()
        if ctype:
            return any(t in ctype for t in HTML_TYPES)
        head = response.body[:512].lstrip().lower()
        return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head

    # -- 2. decide and filter ---------------------------------------------------

    async def _result(self, response: Response) -> JobResult | str:
        pending = self._pending.pop(response, "unchecked")
        if isinstance(pending, Future):
            try:
                return await asyncio.wrap_future(pending)
            except BrokenProcessPool:  # the worker died with this page in hand: do it here
                if self._pool is not None:
                    self._give_up_pool("a worker process died")
                try:
                    return fingerprint_job(response.body, declared_encoding(response), self.config.min_text)
                except Exception as exc:
                    return self._failed(response, exc)
            except Exception as exc:  # a failing page must not stop the crawl
                return self._failed(response, exc)
        return pending

    def _failed(self, response: Response, exc: Exception) -> str:
        logger.warning("fingerprinting failed for %s: %r", response.url, exc)
        self.stats.inc_value("neardup/skipped/unparsable")
        return "unparsable"

    def _decide(self, response: Response, result: JobResult | str, retried: bool = False) -> str:
        """The page's verdict. ``retried``: an earlier attempt for this page
        failed (the shared store went away), so its record may be half-written."""
        if isinstance(result, str):
            return SKIPPED
        if result.value is None:
            reason = (result.reason or "unparsable").split(":")[0]
            self.stats.inc_value(f"neardup/skipped/{reason}")
            if reason == "unparsable":  # the library caught an error: a bug or a broken install, say so
                logger.warning("could not fingerprint %s (%s)", response.url, result.reason)
            elif self.config.debug:
                logger.debug("not fingerprinted (%s): %s", result.reason, response.url)
            return SKIPPED
        fp = result.value
        url = urldefrag(response.url)[0]  # a #fragment names the same document
        verdict, match = self._check(response, url, fp, retried)
        self._learn(url, fp, match.key if verdict == DROPPED else None)
        return verdict

    def _check(self, response: Response, url: str, fp: int, retried: bool) -> tuple[str, Any]:
        """The store's verdict on a fingerprinted page, and the stored match it
        rests on (None for a page kept as new). A drop is explained here."""
        matches = self.store.query(fp)
        self.stats.inc_value("neardup/checked")
        for match in matches:
            if match.key == url:
                return self._same_url(response, match, retried), match
        nearby = bool(matches)
        if self._scope is not None:  # NEARDUP_SCOPE: only pages of the same host or domain count
            mine = self._scope(url)
            matches = [m for m in matches if self._scope(m.key) == mine]
        match = matches[0] if matches else None  # nearest; ties: the oldest
        if match is None:
            if nearby:  # near-copies on other sites only (NEARDUP_SCOPE): stored beside them
                self.store.add(fp, url)
            else:
                # One atomic step on the store: with a shared store another process may
                # have stored a near-copy since the query (then this page is its duplicate).
                match = self.store.check_and_add(fp, url)
                if match is not None:
                    self.stats.inc_value("neardup/lost_race")
                    if match.key == url:
                        return self._same_url(response, match, retried), match
            if match is None:
                self.stats.inc_value("neardup/kept")
                return KEPT, None
        self.stats.inc_value("neardup/dropped")
        self.stats.inc_value(f"neardup/distance_count/{match.distance}")
        referer = response.request.headers.get("Referer") if response.request else None
        record = {
            "url": url,
            "duplicate_of": match.key,
            "distance": match.distance,
            "fingerprint": to_hex(fp),
            "duplicate_of_fingerprint": to_hex(match.fingerprint),
            "referer": referer.decode("latin-1") if referer else None,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        self._write_duplicate(record)
        logger.debug("near-duplicate dropped: %s duplicates %s (distance %d)", url, match.key, match.distance)
        return DROPPED, match

    def _write_duplicate(self, record: dict[str, Any]) -> None:
        if self._dup_fh:
            self._dup_fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._dup_written += 1
            now = time.monotonic()
            if now - self._dup_flushed >= 1.0:  # a flush per drop is a syscall per page on a mirror
                self._flush_duplicates()

    def _learn(self, url: str, fp: int, duplicate_of: str | None = None) -> None:
        """Tell the rule book what this page is (and what it duplicates)."""
        if self.rules is None:
            return
        try:
            self.rules.observe(url, fp, duplicate_of)
            for event, st in self.rules.events:
                self.stats.inc_value(f"neardup/url_rules/{event}")
                if event == "retired":
                    self._requeue(self.rules.release(st), st.rule.spec)
            self.rules.events.clear()
        except FILE_ERRORS as exc:
            self._rules_failed(exc)

    def _rules_failed(self, exc: BaseException) -> None:
        """The rule book cannot be read or written (a shared one's Redis is
        down): nothing is learned or avoided meanwhile; the crawl goes on."""
        self.stats.inc_value("neardup/url_rules/unavailable")
        now = time.monotonic()
        if now - self._rules_warned >= 60:
            self._rules_warned = now
            logger.warning("URL rules unavailable (%s: %s): requests are made and nothing is learned until "
                           "they are back", type(exc).__name__, exc)

    def _requeue(self, requests: list[str | None], spec: str) -> None:
        """Make the requests a retired rule avoided, after all."""
        engine = self.crawler.engine
        made = 0
        for data in requests:
            if data is None or engine is None:
                continue
            try:
                request = decode_request(data, self.crawler.spider)
            except CorruptRequest as exc:
                logger.warning("could not requeue a request rule %s avoided: %s", spec, exc)
                continue
            engine.crawl(request.replace(dont_filter=True))  # (the dupe filter saw some of them already)
            made += 1
        self.stats.inc_value("neardup/url_rules/requeued", made)
        lost = len(requests) - made
        logger.info("URL rule %s retired: %d request(s) it avoided are made after all%s", spec, made,
                    f" ({lost} could not be)" if lost else "")

    def avoided(self, requests: list[Request], referer: str | None) -> set[Request]:
        """Those of ``requests`` not to be made: a learned rule says a fetched
        page has their content (that page's outlinks stand for theirs).
        Explained in the duplicates file, once per URL. One look-up round for
        all (a shared rule book is a Redis round trip)."""
        if self.rules is None:
            return set()
        todo = [r for r in requests if not r.dont_filter and not r.meta.get(self.config.skip_meta_key)]
        if not todo:
            return set()
        urls = [urldefrag(r.url)[0] for r in todo]
        try:
            verdicts = self.rules.avoid_many(urls)
        except FILE_ERRORS as exc:
            self._rules_failed(exc)
            return set()
        out = set()
        for request, url, verdict in zip(todo, urls, verdicts):
            if verdict is None:
                continue
            spec, target, explored = verdict
            if explored:
                self.stats.inc_value("neardup/url_rules/explored")
                continue
            try:
                data: str | None = encode_request(request, self.crawler.spider)
            except UnserializableRequest:
                data = None  # (it cannot be requeued should the rule be retired; the URL is in the duplicates file)
            try:
                first = self.rules.record_avoided(url, spec, target, data)
            except FILE_ERRORS as exc:
                self._rules_failed(exc)
                continue
            out.add(request)
            if first:
                self.stats.inc_value("neardup/requests_avoided")
                self._write_duplicate({"url": url, "duplicate_of": target, "avoided": True, "rule": spec,
                                       "referer": referer,
                                       "time": datetime.now(timezone.utc).isoformat(timespec="seconds")})
                logger.debug("not requested: %s (rule %s: %s has its content)", url, spec, target)
        return out

    def _same_url(self, response: Response, match: Any, retried: bool) -> str:
        """The same URL again with near-identical text (a later run, a re-fetch) is
        unchanged, unless the frontier hands it out again because it was in flight
        at a crash (or an earlier attempt here failed): then what it produced may not
        all have been committed, so it is emitted again (the index keeps one row per
        URL; feeds are at-least-once)."""
        if response.meta.get(REDELIVERED_KEY) or retried:
            self.stats.inc_value("neardup/kept_again")
            return KEPT
        self.stats.inc_value("neardup/unchanged")
        if self.config.debug:
            logger.debug("unchanged (distance %d): %s", match.distance, match.key)
        return UNCHANGED

    async def _decide_when_reachable(self, response: Response, result: JobResult | str) -> str:
        """``_decide``, riding out a shared store's outage as NEARDUP_STORE_UNAVAILABLE says:
        "pause" waits for it (with backoff), "pass" lets pages through unchecked."""
        retried = False
        while True:
            wait = self._down_until - time.monotonic()
            if wait > 0 and not isinstance(result, str) and result.value is not None:
                if self.config.store_unavailable == "pass":
                    self.stats.inc_value("neardup/skipped/store_unavailable")
                    return SKIPPED
                await _sleep(wait)
                continue
            try:
                verdict = self._decide(response, result, retried)
            except StoreUnavailable as exc:
                self._store_down(exc)
                retried = True
                continue
            if self._down_since is not None:
                logger.warning("near-duplicate filter: the store %s is back after %.0f s", self.config.store_shown,
                               time.monotonic() - self._down_since)
                self._down_since, self._backoff = None, MIN_BACKOFF
            return verdict

    def _store_down(self, exc: Exception) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            self.stats.inc_value("neardup/store_outages")
            logger.warning("near-duplicate filter: %s; %s until it is back (NEARDUP_STORE_UNAVAILABLE=%r)", exc,
                           "pausing pages" if self.config.store_unavailable == "pause" else
                           "letting pages through unchecked", self.config.store_unavailable)
        self._down_until = now + self._backoff
        self._backoff = min(self._backoff * 2, MAX_BACKOFF)

    def _flush_duplicates(self) -> None:
        if self._dup_fh and self._dup_synced < self._dup_written:
            self._dup_fh.flush()
            self._dup_synced = self._dup_written
        self._dup_flushed = time.monotonic()

    # the duplicates file as a gate of the durable frontier (crawler.frontier.acks)
    def mark(self) -> int:
        return self._dup_written

    def settled(self, token: int) -> bool:
        if self._dup_synced < token:
            self._flush_duplicates()
        return True

    def _keep(self, verdict: str, item: Any) -> bool:
        if verdict == DROPPED:
            if isinstance(item, Request):
                self.stats.inc_value("neardup/outlinks_dropped")
            return False
        return not (verdict == UNCHANGED and not self.config.emit_unchanged and not isinstance(item, Request))

    @staticmethod
    def _fill(item: Any, result: JobResult | str) -> None:
        # Requests first: they are most of the output, and is_item() is slow on them
        if isinstance(item, Request) or isinstance(result, str) or not is_item(item):
            return
        adapter = ItemAdapter(item)
        if "fingerprint" not in adapter or adapter["fingerprint"] is not None:
            return
        adapter["fingerprint"] = None if result.value is None else to_hex(result.value)
        for name, value in (("title", result.title), ("text", result.text), ("language", result.language)):
            if name in adapter and adapter[name] is None:
                adapter[name] = value

    async def process_spider_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        # Run the callback (link extraction, item building) while the worker
        # fingerprints; nothing leaves before the verdict.
        outputs: list[Any] = []
        error: BaseException | None = None
        try:
            async for item in result:
                outputs.append(item)
        except Exception as exc:  # e.g. CloseSpider after the page's item: deliver what came first
            error = exc
        fp_result = await self._result(response)
        if self._store_failure is None:
            try:
                verdict = await self._decide_when_reachable(response, fp_result)
            except FILE_ERRORS as exc:
                self._store_failed(exc)
        if self._store_failure is not None:
            # Nothing of this page leaves: it goes back to the frontier for the resume.
            AckTracker.of(self.crawler).keep_for_resume(response_id(response))
            self.stats.inc_value("neardup/held_for_resume")
            return
        kept = [item for item in outputs if self._keep(verdict, item)]
        skip = self.avoided([r for r in kept if isinstance(r, Request)], response.url)
        for item in kept:
            if isinstance(item, Request) and item in skip:  # (a request is its own key: identity)
                continue
            self._fill(item, fp_result)
            yield item
        if error is not None:
            raise error

    def _store_failed(self, exc: BaseException) -> None:
        """The store cannot be written (disk full, read-only, removed): stop the
        crawl; every record committed so far stays, and a resume goes on from there."""
        self._store_failure = exc
        logger.error("near-duplicate filter: its files (store %s) cannot be written (%s: %s); stopping the "
                     "crawl. What was committed is kept: fix the cause and resume with the same JOBDIR",
                     self.config.store_shown, type(exc).__name__, exc)
        self.stats.set_value("neardup/store_error", f"{type(exc).__name__}: {exc}"[:200])
        stop_crawl(self.crawler, "store_error")

    def spider_closed(self, reason: str) -> None:
        if self._pool is not None:
            # (A worker still compiling does so in a daemon thread: it does not hold up
            # the crawl's end. numba writes each cache file whole, a temporary file then a
            # rename, so what it finished compiling stays cached for the next crawl.)
            self._pool.shutdown(wait=True, cancel_futures=True)
        try:
            self.store.close()  # (what is committed stays, whatever fails here)
            if self.rules is not None:
                self.rules.close()
            if self._dup_fh:
                self._dup_fh.close()
        except FILE_ERRORS as exc:
            logger.error("near-duplicate filter: could not close its files cleanly (%s: %s); the committed "
                         "records are kept", type(exc).__name__, exc)
        self._dup_fh = None
        if self.config.store and not self.config.shared_store:
            size = sum(f.stat().st_size for f in Path(self.config.store).glob("*") if f.is_file())
            self.stats.set_value("neardup/store_bytes", size)
