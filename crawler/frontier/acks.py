"""When a request is done: the acknowledgement side of the durable frontier.

A request leaves the frontier only after everything it produced is
committed. The tracker follows each request the scheduler hands out (by the
frontier row id in ``request.meta[ID_KEY]``) until one of:

* its response went through the spider: the outermost spider middleware saw
  the callback's output end, and every item it let out has left the item
  pipelines (``item_scraped`` / ``item_dropped`` / ``item_error``);
* a downloader middleware replaced it (a redirect, a retry): the scheduler
  saw the new request, which carries the id, arrive before any response;
* its download failed for good (the outermost downloader middleware saw the
  exception): done one checkpoint later, so that an errback's requests are
  queued first;
* a component left it out on purpose before its download, having noted it
  through a gate (``left_out``: a learned URL rule, noted in the rule book):
  done at once, so it is acknowledged as soon as that note is committed.

A request queued again in place of one that is not acknowledged yet (a
retired URL rule's avoided request) takes its place in one frontier
transaction: the caller acknowledges the old row itself and the tracker
forgets it (``superseded``), so that a kill never leaves both.

Then the outputs' commits are *gated*: each ``Gate`` (the index writer, the
duplicates file, the feed files) is marked, and the acknowledgement is
written in the first frontier commit after every gate has settled past its
mark. So when a request is gone from the frontier its pages are in the
index and its outlinks are queued; a crash before that makes the crawl fetch
it again. One whose page was being stored as new (``storing``: the frontier
records it before the store's add) is handed out marked
(``request.meta["neardup_emit_again"]``), and the filter emits its page again
rather than take it for unchanged; one that had not got that far produced
nothing, and its page is judged as any other's.
"""

from __future__ import annotations

import logging
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

ID_KEY = "neardup_frontier_id"
EMIT_AGAIN_KEY = "neardup_emit_again"


class Gate(Protocol):
    """Something a request's outputs are committed through, in order."""

    def mark(self) -> int:
        """A token for "everything handed over so far"."""

    def settled(self, token: int) -> bool:
        """Whether everything up to ``token`` is committed (may flush, must not block, must not
        raise: it is asked at each frontier commit, so an error would repeat at every request; a gate
        that cannot commit says False from then on and stops the crawl itself)."""


@dataclass
class _Entry:
    responded: bool = False
    reached: bool = False  # its server answered (headers came): a kill from now on counts against it
    items: int = 0
    output_done: bool = False


class AckTracker:
    """Per crawler (``AckTracker.of(crawler)``); used by the crawl's thread only."""

    def __init__(self) -> None:
        self.active = False  # set by the durable scheduler when it opens
        self.gates: list[Gate] = []
        self._inflight: dict[int, _Entry] = {}
        self._ready: deque[tuple[int, list[int]]] = deque()
        self._failed: list[int] = []
        self._failed_waiting: list[int] = []
        self._taken: list[tuple[int, list[int]]] = []  # what the last ``acknowledgeable`` took
        #: called with a request's id when its server answers (``reached``: the frontiers record it, so that
        #: only kills after an answer count against a request); None: nothing to record
        self.on_reached: Callable[[int], None] | None = None
        #: called with a request's id before its page is stored as new (``storing``); says whether the
        #: frontier recorded it. None: nothing to record
        self.on_storing: Callable[[int], bool] | None = None
        #: called with a request's id when its page, marked ``storing``, was not stored after all
        self.on_stored_nothing: Callable[[int], None] | None = None
        #: the frontier's notes (``note``, ``notes``): written, and the names under a prefix. None: no frontier
        self.on_note: Callable[[str], None] | None = None
        #: the crawl's local store's fingerprints, all committed (the filter's), recorded by the durable
        #: frontier at each commit: a resume refuses a store that holds fewer
        self.store_size: Callable[[], int | None] | None = None
        self.on_notes: Callable[[str], list[str]] | None = None

    @classmethod
    def of(cls, crawler: Crawler) -> AckTracker:
        tracker = _BY_CRAWLER.get(crawler)
        if tracker is None:
            tracker = _BY_CRAWLER[crawler] = cls()
        return tracker

    def add_gate(self, gate: Gate) -> None:
        self.gates.append(gate)

    # -- events -----------------------------------------------------------------

    def started(self, rid: int) -> None:
        self._inflight[rid] = _Entry()

    def _entry(self, rid: int | None) -> _Entry | None:
        """The in-flight entry of ``rid`` (None: a request the frontier did not hand out)."""
        return None if rid is None else self._inflight.get(rid)

    def reached(self, rid: int | None) -> None:
        """Its server answered (``headers_received``, before the body is read and decoded, or the response
        itself for a download handler that sends no headers): the frontier records it once, so that a
        page that kills the crawl as its body is read, inflated or processed is counted at each kill."""
        if (e := self._entry(rid)) is not None and not e.reached:
            e.reached = True
            if self.on_reached is not None:
                assert rid is not None
                self.on_reached(rid)

    def responded(self, rid: int | None) -> None:
        if (e := self._entry(rid)) is not None:
            e.responded = True
            self.reached(rid)

    def item_out(self, rid: int | None) -> None:
        if (e := self._entry(rid)) is not None:
            e.items += 1

    def item_done(self, rid: int | None) -> None:
        if rid is not None and (e := self._entry(rid)) is not None:
            e.items -= 1
            if e.output_done and e.items <= 0:
                self.finish(rid)

    def output_done(self, rid: int | None) -> None:
        if rid is not None and (e := self._entry(rid)) is not None:
            e.output_done = True
            if e.items <= 0:
                self.finish(rid)

    def failed(self, rid: int | None) -> None:
        if rid is not None and (e := self._entry(rid)) is not None and not e.responded:
            self._failed.append(rid)

    def left_out(self, rid: int | None, has_errback: bool) -> None:
        """A downloader middleware left ``rid`` out before its download (it raises
        ``IgnoreRequest``), after noting it through a gate: done now, acknowledged
        once the gates pass, not two checkpoints later as a failure. One with an
        errback takes the failure path (the errback's requests are queued first)."""
        if rid is not None and rid in self._inflight and not has_errback:
            self.finish(rid)

    def superseded(self, rid: int) -> None:
        """The caller acknowledged ``rid`` in the frontier transaction that queued
        its replacement: never acknowledge it again (its row id may be reused)."""
        self._inflight.pop(rid, None)
        self._failed = [r for r in self._failed if r != rid]
        self._failed_waiting = [r for r in self._failed_waiting if r != rid]
        if any(r == rid for r, _ in self._ready):
            self._ready = deque(e for e in self._ready if e[0] != rid)
        self._taken = [e for e in self._taken if e[0] != rid]

    def keep_for_resume(self, rid: int | None) -> None:
        """Never acknowledge ``rid`` in this run: a resume fetches it again (its
        outputs could not be committed)."""
        if rid is not None:
            self._inflight.pop(rid, None)

    def adopt(self, request: Any) -> int | None:
        """A request entering the frontier. One carrying a frontier id is an output
        of that request: a redirect or retry that replaces it (before any
        response), or a spider output that copied ``response.meta``; the id is the
        frontier's, not its own, and is dropped, and so is the emit-again mark but
        for a replacement (stored with it). Returns the id it replaces, to
        ``finish`` once it is queued, or None."""
        parent = request.meta.pop(ID_KEY, None)
        replaces = parent is not None and self.is_replacement(parent)
        if not replaces:  # (a retry or a redirect of a page to emit again is one too: its mark goes with it)
            request.meta.pop(EMIT_AGAIN_KEY, None)
        return parent if replaces else None

    def hand_out(self, request: Any, rid: int, emit_again: int) -> Any:
        """Mark ``request`` as the frontier's ``rid`` (``emit_again``: it had stored its page when a kill or
        a dead process stopped it, so its outputs may be half committed) and follow it from now on."""
        request.meta[ID_KEY] = rid
        if emit_again:
            request.meta[EMIT_AGAIN_KEY] = True
        self.started(rid)
        return request

    def storing(self, rid: int | None) -> bool:
        """Request ``rid``'s page is about to be stored as new: the frontier records it first (committed),
        so that a kill from now on has the page emitted again. False: the frontier could not record it
        (its file failed; its Redis is away), and nothing of the page may go out: it is held for a resume.
        True for a request the frontier does not follow. O(1) plus the frontier's write."""
        if self._entry(rid) is None or self.on_storing is None:
            return True
        assert rid is not None
        return self.on_storing(rid)

    def stored_nothing(self, rid: int | None) -> None:
        """Request ``rid``'s page, marked ``storing``, was not stored after all: a shared store's other
        process had stored it first (its items are that process's). Unmarked, so that a kill does not
        emit them again. O(1)."""
        if self._entry(rid) is not None and self.on_stored_nothing is not None:
            assert rid is not None
            self.on_stored_nothing(rid)

    def note(self, name: str) -> None:
        """Keep ``name`` in the frontier for the rest of the crawl, resumes and the other processes of a
        shared one included; in its next commit, so before any request still in flight is acknowledged (a
        request whose page ``name`` is about is acknowledged after it, or handed out again). Nothing without
        a frontier. O(1) plus the frontier's write (a Redis round trip on a shared one)."""
        if self.on_note is not None:
            self.on_note(name)

    def notes(self, prefix: str) -> list[str] | None:
        """The names ``note`` kept that start with ``prefix``; None without a frontier. O(log n + found)."""
        return None if self.on_notes is None else self.on_notes(prefix)

    def is_replacement(self, rid: int | None) -> bool:
        """A request carrying ``rid`` that arrives before ``rid`` had a response
        replaces it (a redirect or a retry)."""
        e = self._inflight.get(rid)  # type: ignore[arg-type]
        return e is not None and not e.responded

    def finish(self, rid: int) -> None:
        """``rid`` produced all it will; acknowledge once the gates pass."""
        if self._inflight.pop(rid, None) is not None:
            self._ready.append((rid, [g.mark() for g in self.gates]))

    def finish_all(self) -> None:
        """The crawl finished: nothing is in flight any more."""
        for rid in list(self._inflight):  # (failed ones are still in flight: finished here too)
            self.finish(rid)
        self._failed, self._failed_waiting = [], []

    # -- at a commit ------------------------------------------------------------

    def tick(self) -> None:
        """A checkpoint passed: failures seen before the previous one are done."""
        for rid in self._failed_waiting:
            if self._inflight.pop(rid, None) is not None:
                self._ready.append((rid, [g.mark() for g in self.gates]))
        self._failed_waiting, self._failed = self._failed, []

    def acknowledgeable(self) -> list[int]:
        """Take the requests whose gates have all settled (in order: tokens only grow)."""
        out: list[int] = []
        self._taken = []
        settled_cache: dict[int, int] = {}  # gate index -> highest token seen settled
        while self._ready:
            rid, tokens = self._ready[0]
            for i, (gate, token) in enumerate(zip(self.gates, tokens)):
                if settled_cache.get(i, -1) >= token:
                    continue
                if not gate.settled(token):
                    return out
                settled_cache[i] = token
            self._taken.append(self._ready.popleft())
            out.append(rid)
        return out

    def put_back(self, rids: set[int]) -> None:
        """Of what the last ``acknowledgeable`` took, ``rids`` are not acknowledged
        after all (a feed file cannot commit their items yet): first in line again."""
        for entry in reversed([e for e in self._taken if e[0] in rids]):
            self._ready.appendleft(entry)
        self._taken = []


def give_up(stats: Any, kills: int, limit: int, what: str) -> bool:
    """Whether a request in flight, its server having answered, at ``kills`` kills, crashes or
    dead processes in a row (likely a page that kills the crawler) is past
    ``NEARDUP_FRONTIER_MAX_REDELIVERIES``; if so it is logged and counted."""
    if kills <= limit:
        return False
    logger.error("frontier: giving up a request that was in flight, answered, at %d kills, crashes or dead "
                 "processes in a row (NEARDUP_FRONTIER_MAX_REDELIVERIES=%d): %s", kills, limit, what)
    stats.inc_value("neardup/frontier/given_up")
    return True


def request_id(request: Any) -> int | None:
    """The frontier id a request carries (None if it did not come from the frontier)."""
    meta = getattr(request, "meta", None)
    return meta.get(ID_KEY) if isinstance(meta, dict) else None


def response_id(response: Any) -> int | None:
    """The frontier id of the request a response answers."""
    return request_id(getattr(response, "request", None))


_BY_CRAWLER: weakref.WeakKeyDictionary[Crawler, AckTracker] = weakref.WeakKeyDictionary()
