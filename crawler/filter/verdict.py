"""The verdict on a page, and what of its output the verdict lets through.

A fingerprinted page is checked against the store (first seen wins; the
store is only touched in the crawl's thread, so every check is atomic):

* ``KEPT``: no stored page within k bits (with ``NEARDUP_SCOPE``, none of
  the same host or domain): the page is stored and its output goes on;
* ``DROPPED``: the nearest stored page within k bits (ties: the oldest) is
  another URL: the page is a near-duplicate of it. *Everything* its callback
  yields is discarded: no items, and none of its outlinks are requested
  because of it (a page that a kept page also links to is still crawled,
  once, via that page). The drop is explained (``duplicates_log``), once:
  a URL the duplicates file already holds as a near-duplicate of the same
  page is dropped again, counted ``neardup/dropped_again`` and not
  ``neardup/dropped``, and not written again;
* ``UNCHANGED``: the same URL is stored with near-identical text (a later
  run, a re-fetch): its requests go on, its items only with
  ``NEARDUP_EMIT_UNCHANGED``, or when this crawl stored the page from a
  request its dupe filter let pass (``dont_filter``: a start request) for
  another callback: a ``CrawlSpider``'s start page, parsed by
  ``parse_start_url`` and then linked from the site to a rule's callback,
  gives that callback's items as it does without the filter (which callbacks such a page was fetched
  for is noted in the frontier, ``AckTracker.note``: a resumed crawl and the other processes of a
  shared one know it too). Not in a crawl with ``JOBDIR`` whose
  scheduler is not the durable frontier's (the project set its own, or
  ``NEARDUP_FRONTIER = False``): nothing tells which pages had their items
  committed before a kill, so the same URL is emitted again
  (``neardup/kept_again``: at least once, never lost);
* ``SKIPPED``: not fingerprinted (``unchecked``, or the library's own
  reasons): passed through unchecked.

Each verdict is counted (``crawler.counts``) and, with learned URL rules,
told to the rule book.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urldefrag

from scrapy import Request
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from scrapy_neardup.dedup.fingerprint.jobs import JobResult
from scrapy_neardup.dedup.store import Match, SimhashStore

from .. import counts
from ..canonical import declared_canonical
from ..config import NearDupConfig
from ..frontier.acks import EMIT_AGAIN_KEY, AckTracker
from ..scope import scope_of
from .unchecked import CALLBACK_ERROR
from .duplicates_log import DuplicatesLog

logger = logging.getLogger(__name__)

KEPT, DROPPED, UNCHANGED, SKIPPED = "kept", "dropped", "unchanged", "skipped"

#: Told each fingerprinted page: its URL, its fingerprint, dropped, the URL it duplicates, its response and its
#: head for ranged GETs (``JobResult.head``)
Learn = Callable[[str, int, "str | None", Response, "int | None"], None]
#: Asked before a page is stored as new: whether its frontier recorded that it is (``AckTracker.storing``)
Storing = Callable[[Response], bool]
#: URLs fetched by ``dont_filter`` requests whose callbacks a crawl remembers (``Verdicts.callbacks``); past
#: it, a URL fetched again for another callback is unchanged, its items held back (as before the memory)
MAX_UNFILTERED_URLS = 100_000
#: the frontier's note of a callback a ``dont_filter`` request fetched a URL for: this, the URL, a newline and
#: the callback's key as JSON
CALLBACK_NOTE = "callback "


def callback_key(request: Request | None) -> tuple[str | None, Any]:
    """What a request's callback is, for telling a page fetched again for other items from one fetched
    again for the same: the callback's name (none: the spider's ``parse``) and a ``CrawlSpider`` rule's
    index (its links all go to ``_callback``). O(1).

    >>> callback_key(Request("http://h/", meta={"rule": 2}))
    ('parse', 2)
    """
    if request is None:
        return ("parse", None)
    return (getattr(request.callback, "__name__", None) or "parse", request.meta.get("rule"))


def _requested_again_by_the_spider(request: Request | None) -> bool:
    """Whether ``request`` is one the spider made of a URL again itself (``dont_filter``), not a start request
    (made again at each resume, by each process of a shared crawl, at each crawl of a store) nor a retry
    (which Scrapy makes ``dont_filter``). O(1)."""
    return request is not None and request.dont_filter and not request.meta.get("is_start_request") \
        and not request.meta.get("retry_times")


class NotRecorded(Exception):
    """The frontier could not record that a page is about to be stored (its file failed, its Redis is
    away): the page is not stored and nothing of it goes out; it is held for the resume."""


class Verdicts:
    """Decides each page's verdict against ``store``; see the module docstring."""

    def __init__(self, config: NearDupConfig, stats: StatsCollector, store: SimhashStore,
                 duplicates: DuplicatesLog, learn: Learn | None = None, *, blind_resume: bool = False,
                 storing: Storing | None = None, stored_nothing: Callable[[Response], None] | None = None,
                 notes: AckTracker | None = None) -> None:
        self.config = config
        #: the crawl persists (JOBDIR) but its scheduler does not say which requests it hands out again
        #: after a kill: a page fetched again is emitted again (see the module docstring)
        self.blind_resume = blind_resume
        self.stats = stats
        self.store = store
        self.duplicates = duplicates
        self.learn = learn
        #: the frontier's record that a page is being stored (then a kill has it emitted again)
        self.storing = storing
        self.stored_nothing = stored_nothing  # (a page marked storing, not stored after all: a lost race)
        #: URL -> the callbacks it was fetched for in this crawl, for URLs a ``dont_filter`` request fetched
        self.callbacks: dict[str, set[tuple[str | None, Any]]] = {}
        self.notes = notes  # (where they are noted for a resume and the shared crawl's other processes)
        self._callbacks_full = False  # (MAX_UNFILTERED_URLS reached: said once)
        #: unchanged pages whose items go out all the same: fetched for another callback (``_another_callback``)
        self._items_out: weakref.WeakSet[Response] = weakref.WeakSet()
        self._told_held = False  # (an unchanged page's items held back from a dont_filter request: said once)
        self._scope = scope_of(config.scope)

    def decide(self, response: Response, result: JobResult | str, retried: bool = False, store: bool = True) -> str:
        """The page's verdict. ``result``: its fingerprint, or why it passes
        unchecked. ``retried``: an earlier attempt for this page failed (the
        shared store went away), so its record may be half-written. ``store``:
        False when the spider's callback raised on the page: checked (dropped,
        or unchanged, as any page), but a new one is not stored and passes
        unchecked (``callback_error``), so that a near-copy whose callback
        works is kept. Raises what the store raises (``StoreUnavailable``...),
        and ``NotRecorded``."""
        if isinstance(result, str):  # (counted when the reason was found)
            return SKIPPED
        if result.value is None:
            reason = (result.reason or "unparsable").split(":")[0]
            counts.count_unchecked(self.stats, reason)
            if reason == "unparsable":  # the library caught an error: a bug or a broken install, say so
                logger.warning("could not fingerprint %s (%s)", response.url, result.reason)
            elif reason == "hostile":  # (a page no parser should be given: name it)
                logger.warning("near-duplicate filter: %s not parsed: %s; it passes unchecked",
                               response.url, (result.reason or "").partition(":")[2].strip())
            elif self.config.debug:
                logger.debug("not fingerprinted (%s): %s", result.reason, response.url)
            return SKIPPED
        fp = result.value
        url = urldefrag(response.url)[0]  # a #fragment names the same document
        verdict, match = self._check(response, url, fp, retried, store)
        if verdict == SKIPPED:  # (a new page whose callback raised: not stored, nothing learned of it)
            return verdict
        if verdict in (KEPT, UNCHANGED):
            other = self._another_callback(response, url, note=verdict == KEPT)
            if other and verdict == UNCHANGED and not self.config.emit_unchanged:
                # its items go out: marked in the frontier first, as a page stored, so that a kill before they
                # are committed has them emitted again
                if self.storing is not None and not self.storing(response):
                    raise NotRecorded(url)
                self._items_out.add(response)
        if self.learn is not None:
            self.learn(url, fp, match.key if verdict == DROPPED and match is not None else None, response, result.head)
        return verdict

    def let_through(self, verdict: str, outputs: list[Any], response: Response | None = None) -> list[Any]:
        """What of ``outputs`` (the items and requests the page's callback
        yielded) goes on: ``outputs`` itself when all of it does (O(1): a kept
        page's tens or hundreds of outlinks are not looked at one by one)."""
        if verdict == DROPPED:
            dropped = sum(isinstance(output, Request) for output in outputs)
            if dropped:
                self.stats.inc_value(counts.OUTLINKS_DROPPED, dropped)
            return []
        if verdict == UNCHANGED and not self.config.emit_unchanged and response not in self._items_out:
            requests = [output for output in outputs if isinstance(output, Request)]
            if not self._told_held and len(requests) < len(outputs) and response is not None \
                    and _requested_again_by_the_spider(response.request):
                self._told_held = True  # (said once a crawl: a spider's own dont_filter requests are easy to miss)
                logger.info("near-duplicate filter: %s, requested again (dont_filter), is unchanged: its items are "
                            "held back (NEARDUP_EMIT_UNCHANGED; the meta key neardup_skip on such a request lets "
                            "them through); said once", response.url)
            return requests
        return outputs

    def _another_callback(self, response: Response, url: str, note: bool) -> bool:
        """Whether ``response``'s page was stored by this crawl from a ``dont_filter`` request (a start
        request) for other callbacks than this one's: then its items are this callback's first. ``note``:
        the page is kept (stored now); a ``dont_filter`` request's is noted here with its callback (at most
        ``MAX_UNFILTERED_URLS`` URLs), and in the frontier, so that a resumed crawl, or another process
        of a shared one, knows it. A page stored by an earlier crawl (another frontier) is not: its items
        were out then. O(1); an unchanged page not noted here asks the frontier (a Redis round trip on a
        shared one)."""
        request = response.request
        if request is None:
            return False
        key = callback_key(request)
        seen = self.callbacks.get(url)
        if seen is None and not note and not self.config.emit_unchanged:  # (with it, the items go out anyway)
            seen = self._recalled(url)
        if seen is None:
            if note and request.dont_filter:
                self._note(url, key)
            return False
        if key in seen:
            return False
        self._note(url, key)
        return True

    def _note(self, url: str, key: tuple[str | None, Any]) -> None:
        """Note that ``url`` was fetched for callback ``key``, here and in the frontier."""
        seen = self.callbacks.get(url)
        if seen is None:
            if len(self.callbacks) >= MAX_UNFILTERED_URLS:
                if not self._callbacks_full:
                    self._callbacks_full = True
                    logger.warning("near-duplicate filter: %d URLs fetched by dont_filter requests noted; a page "
                                   "fetched again for another callback is now taken for unchanged (its items "
                                   "held back: neardup_skip on such requests lets them through)",
                                   MAX_UNFILTERED_URLS)
                return
            seen = self.callbacks[url] = set()
        seen.add(key)
        if self.notes is not None:
            self.notes.note(f"{CALLBACK_NOTE}{url}\n{json.dumps(key, default=str)}")

    def _recalled(self, url: str) -> set[tuple[str | None, Any]] | None:
        """The callbacks the frontier noted for ``url`` (a run before a kill, another process), or None."""
        names = self.notes.notes(f"{CALLBACK_NOTE}{url}\n") if self.notes is not None else None
        if not names:
            return None
        seen: set[tuple[str | None, Any]] = {(key[0], key[1]) for key in
                                                (json.loads(name.partition("\n")[2]) for name in names)}
        if len(self.callbacks) < MAX_UNFILTERED_URLS:
            self.callbacks[url] = seen
        return seen

    def kept_twin(self, url: str, fp: int) -> str:
        """The kept page whose content fetched page ``url`` (fingerprint ``fp``) has: ``url`` itself when the
        store holds it, else the nearest stored page within k of it (with ``NEARDUP_SCOPE``, of its host or
        domain): the page it was dropped against. ``url`` when the store cannot say (not stored, unchecked;
        its store unreachable). O(a store query)."""
        try:
            matches = self.store.query(fp)
        except Exception:  # (a name in a duplicates line is not worth a crawl's failing: the page's own)
            return url
        return self._twin_of(url, matches)

    def twins(self, asked: list[tuple[str, str, int | None]]) -> list[str | None]:
        """For each ``(url, target, target_fp)``, a request for ``url`` that a learned URL rule says fetched
        page ``target`` has the content of: None when the store holds ``url`` itself (its page was stored,
        before a kill, say, and its request is handed out again: it must be made, or its items are lost),
        else the kept page to name (``kept_twin`` of ``target``). One store round (``query_many``)."""
        fps = [fp for _, _, fp in asked if fp is not None]
        try:
            found = iter(self.store.query_many(fps) if fps else [])
        except Exception:  # (the store unreachable: named as the rule says, as kept_twin does)
            return [target for _, target, _ in asked]
        out: list[str | None] = []
        for url, target, fp in asked:
            matches = next(found) if fp is not None else []
            out.append(None if any(m.key == url for m in matches) else self._twin_of(target, matches))
        return out

    def _twin_of(self, url: str, matches: list[Match]) -> str:
        """``kept_twin`` of ``url``, given the store's matches of its fingerprint."""
        if any(m.key == url for m in matches):
            return url
        matches = self._in_scope(url, matches)
        return matches[0].key if matches else url

    def _in_scope(self, url: str, matches: list[Match]) -> list[Match]:
        """``matches`` that count for ``url``: with ``NEARDUP_SCOPE``, those of its host or domain."""
        if self._scope is None:
            return matches
        mine = self._scope(url)
        return [m for m in matches if self._scope(m.key) == mine]

    def _check(self, response: Response, url: str, fp: int, retried: bool,
               store: bool = True) -> tuple[str, Match | None]:
        """The store's verdict on a fingerprinted page, and the stored match it
        rests on (None for a page kept as new; ``SKIPPED`` for a new one not to
        store, ``decide``). A drop is explained here."""
        matches = self.store.query(fp)
        self.stats.inc_value("neardup/checked")
        for same in matches:
            if same.key == url:
                return self._same_url(response, same, retried), same
        nearby = bool(matches)
        matches = self._in_scope(url, matches)  # (NEARDUP_SCOPE: only pages of the same host or domain count)
        match: Match | None = matches[0] if matches else None  # nearest; ties: the oldest
        if match is None and not store:
            counts.count_unchecked(self.stats, CALLBACK_ERROR)
            return SKIPPED, None
        if match is None:
            request = response.request
            if request is not None and request.dont_filter and url not in self.callbacks:
                # noted before it is stored: another process of a shared crawl that fetches the link back in
                # between finds the note (after, it would hold that link's items back)
                self._note(url, callback_key(request))
            if self.storing is not None and not self.storing(response):
                raise NotRecorded(url)
            if nearby:  # near-copies on other sites only (NEARDUP_SCOPE): stored beside them
                self.store.add(fp, url)
            else:
                # One atomic step on the store: with a shared store another process may
                # have stored a near-copy since the query (then this page is its duplicate).
                match = self.store.check_and_add(fp, url)
                if match is not None:
                    self.stats.inc_value("neardup/lost_race")
                    if self.stored_nothing is not None:  # (not this request's page: a kill must not emit it)
                        self.stored_nothing(response)
                    if match.key == url:
                        return self._same_url(response, match, retried), match
            if match is None:
                self.stats.inc_value(counts.KEPT)
                return KEPT, None
        if self.duplicates.recorded(url, match.key):
            # Dropped before as a near-duplicate of the same page (an earlier run on this
            # store, or before a kill): dropped again, neither recorded nor counted twice.
            self.stats.inc_value(counts.DROPPED_AGAIN)
            if self.config.debug:
                logger.debug("dropped again (already recorded): %s duplicates %s", url, match.key)
            return DROPPED, match
        self.stats.inc_value(counts.DROPPED)
        self.stats.inc_value(f"neardup/distance_count/{match.distance}")
        referer = response.request.headers.get("Referer") if response.request else None
        self.duplicates.dropped(url, match.key, match.distance, fp, match.fingerprint,
                                referer.decode("latin-1") if referer else None, declared_canonical(response))
        return DROPPED, match

    def _same_url(self, response: Response, match: Match, retried: bool) -> str:
        """The same URL again with near-identical text (a later run, a re-fetch) is
        unchanged, unless the frontier hands it out again because it had stored this
        very page when a crash stopped it (or an earlier attempt here failed), or the
        crawl persists without a scheduler that says so (``blind_resume``): then what
        it produced may not all have been committed, so it is emitted again (the index
        keeps one row per URL). A request stopped before it stored the page produced
        nothing, so the page another, finished request stored is unchanged for it."""
        if response.meta.get(EMIT_AGAIN_KEY) or retried or self.blind_resume:
            self.stats.inc_value(counts.KEPT_AGAIN)
            return KEPT
        self.stats.inc_value(counts.UNCHANGED)
        if self.config.debug:
            logger.debug("unchanged (distance %d): %s", match.distance, match.key)
        return UNCHANGED
