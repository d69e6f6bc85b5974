"""``DurableScheduler``: Scrapy's scheduler with the queue and seen set in SQLite.

Installed by the add-on when a crawl persists (``JOBDIR``), in place of
Scrapy's ``JOBDIR`` queues, whose state is written only at a clean close (a
killed crawl resumes with every URL seen and none queued). Through Scrapy's
documented interfaces (``SCHEDULER``, ``DUPEFILTER_CLASS``), the way
scrapy-redis plugs in.

Order: Scrapy's ``DownloaderAwarePriorityQueue``: the download slot with the
fewest active downloads goes first, and within a slot the highest
``priority`` (so ``DEPTH_PRIORITY`` works), then newest first
(``SCHEDULER_DISK_QUEUE`` a LIFO queue, Scrapy's default) or oldest first
(a FIFO one).

Commits: one transaction per request handed to the engine (it holds the
outlinks queued since the last one and the acknowledgements whose outputs
are committed, see ``acks``), and one a second while idle. A request that
cannot be stored as JSON is kept in memory, logged and counted
(``neardup/frontier/unserializable``), as Scrapy's scheduler does with what
its disk queue refuses; it would be lost to a crash.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from scrapy import Request, Spider
from scrapy.core.scheduler import BaseScheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet import task

from .acks import AckTracker, give_up
from .codec import CorruptRequest, UnserializableRequest, decode_request, encode_request
from .db import FrontierDB, FrontierError
from .dupefilter import DurableDupeFilter
from .feeds import FeedLedger, FlushGate
from .stop import stop_crawl

logger = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 1.0
COMMIT_EVERY_PUSHES = 2000


class DurableScheduler(BaseScheduler):
    #: It marks a request it hands out again after a kill that caught it storing its page
    #: (``acks.EMIT_AGAIN_KEY``), and knows which requests' outputs were committed: the filter reads this
    #: (``filter.verdict``).
    marks_redeliveries = True

    def __init__(self, crawler: Crawler, jobdir: str, dupefilter: Any, max_redeliveries: int) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.jobdir = jobdir
        self.df = dupefilter
        self.max_redeliveries = max_redeliveries
        self.lifo = "lifo" in str(crawler.settings.get("SCHEDULER_DISK_QUEUE", "lifo")).lower()
        self.tracker = AckTracker.of(crawler)
        self.tracker.add_gate(FlushGate(crawler))
        self.feeds = FeedLedger.of(crawler)  # local feed files: exactly once (frontier.feeds)
        self._db: FrontierDB | None = None
        self.spider: Spider | None = None
        self._memory: deque[Request] = deque()  # requests JSON cannot hold
        self._loop: task.LoopingCall | None = None
        self._failed = False
        self._pushed = 0  # requests queued since the last commit

    @property
    def db(self) -> FrontierDB:
        """The open frontier (between ``open`` and ``close``)."""
        if self._db is None:
            raise FrontierError("the durable frontier is not open")
        return self._db

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DurableScheduler:
        from ..config import NearDupConfig

        config = NearDupConfig.of(crawler)
        jobdir = crawler.settings.get("JOBDIR")
        if not jobdir:
            raise NotConfigured("the durable frontier needs JOBDIR")
        df = build_from_crawler(load_object(crawler.settings["DUPEFILTER_CLASS"]), crawler)
        return cls(crawler, jobdir, df, config.frontier_max_redeliveries)

    # -- opening and closing ----------------------------------------------------

    def open(self, spider: Spider) -> Any:
        self.spider = spider
        self._db = FrontierDB(self.jobdir, lifo=self.lifo, spider=spider.name)  # FrontierError: the crawl stops, naming the file
        if isinstance(self.df, DurableDupeFilter):
            self.df.attach(self.db)
        else:
            logger.warning("frontier: DUPEFILTER_CLASS is %s, whose seen set is not in the frontier; "
                           "after a crash it may disagree with the queue", type(self.df).__name__)
        self.tracker.active = True
        self.tracker.on_reached = self._reached
        self.tracker.on_storing = self._storing
        self.tracker.on_stored_nothing = self._stored_nothing
        self.tracker.on_note = self._note
        self.tracker.on_notes = self._notes
        try:
            self.feeds.attach(self.db)  # the last run's feed files: cut to what is committed, closed
        except OSError as exc:
            self.db.close()
            self._db = None
            raise FrontierError(f"frontier {self.jobdir}: could not repair a feed file ({exc})") from exc
        if self.db.redelivered:
            self.stats.inc_value("neardup/frontier/redelivered", self.db.redelivered)
        logger.info("frontier %s: %d requests queued, %d in flight at the last stop fetched again, %d URLs seen",
                    self.db.path, len(self.db), self.db.redelivered, self.db.seen_count)
        self._loop = task.LoopingCall(self._checkpoint)
        self._loop.start(CHECKPOINT_INTERVAL, now=False)
        return self.df.open()

    def close(self, reason: str) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._db is None:
            return
        try:
            if not self._failed:  # (else the file takes no more writes: what was committed stays)
                if reason == "finished":  # the engine was idle: everything handed out is done
                    self.tracker.finish_all()
                self._commit()
            left = self.db.in_flight()
            logger.info("frontier %s: %d requests queued, %d to fetch again on resume%s", self.db.path,
                        len(self.db) + len(self._memory), left,
                        f" ({len(self._memory)} unserializable ones lost)" if self._memory else "")
        finally:
            self.tracker.active = False
            self.tracker.on_reached = None
            self.tracker.on_storing = None
            self.tracker.on_stored_nothing = None
            self.tracker.on_note = self.tracker.on_notes = None
            self.feeds.detach()
            self.db.close()
            self._db = None
        self.df.close(reason)

    # -- the scheduler interface --------------------------------------------------

    def has_pending_requests(self) -> bool:
        return bool(self._memory) or (self._db is not None and len(self._db) > 0)

    def __len__(self) -> int:
        return len(self._memory) + (len(self._db) if self._db is not None else 0)

    def enqueue_request(self, request: Request) -> bool:
        parent = self.tracker.adopt(request)  # (the request it replaces: a redirect, a retry)
        try:
            if not request.dont_filter and self.df.request_seen(request):
                self.df.log(request, self.spider)
                return False
            try:
                data = encode_request(request, self.spider)
            except UnserializableRequest as exc:
                self._unserializable(request, exc)
                return True
            if request.dont_filter and request.meta.get("is_start_request") and self.db.taken_back(data):
                # (a start request made again at a resume, while its row from the last run waits in the queue)
                self.stats.inc_value("neardup/frontier/already_queued")
                logger.debug("frontier: %s is queued already (in flight at the last stop)", request)
                return False
            self.db.push(self._slot(request), request.priority, data)
            self._pushed += 1
            if self._pushed >= COMMIT_EVERY_PUSHES:  # a spider yielding a million start URLs: bound the transaction
                self._commit()
            self.stats.inc_value("scheduler/enqueued/disk")
            self.stats.inc_value("scheduler/enqueued")
            return True
        except FrontierError as exc:
            self._fail(exc)
            return False
        finally:
            if parent is not None:
                self.tracker.finish(parent)

    def next_request(self) -> Request | None:
        if self._failed:
            return None
        if self._memory:
            self.stats.inc_value("scheduler/dequeued/memory")
            self.stats.inc_value("scheduler/dequeued")
            return self._memory.popleft()
        try:
            while len(self.db):
                slot = self._next_slot()
                row = self.db.pop(slot)
                if row is None:
                    continue
                request = self._restore(row)
                if request is None:
                    continue
                self._commit()  # the request is durably in flight before anything it causes is stored
                self.stats.inc_value("scheduler/dequeued/disk")
                self.stats.inc_value("scheduler/dequeued")
                return request
            self._commit()
        except FrontierError as exc:
            self._fail(exc)
        return None

    @property
    def is_open(self) -> bool:
        """Between ``open`` and ``close``, while the frontier takes writes."""
        return self._db is not None and not self._failed

    def commit(self) -> None:
        """Make what was queued so far durable now (for a caller whose own file
        must be written after the requests it queued: ``filter.learned_rules``)."""
        if self._db is None or self._failed:
            return
        try:
            self._commit()
        except FrontierError as exc:
            self._fail(exc)

    # -- helpers --------------------------------------------------------------------

    def _restore(self, row: Any) -> Request | None:
        if give_up(self.stats, row.kills, self.max_redeliveries, row.data[:300]):
            self.db.ack([row.id])
            return None
        try:
            request = decode_request(row.data, self.spider)
        except CorruptRequest as exc:
            logger.error("frontier %s: skipping request row %d: %s", self.db.path, row.id, exc)
            self.stats.inc_value("neardup/frontier/unreadable")
            self.db.ack([row.id])
            return None
        return self.tracker.hand_out(request, row.id, row.emit)

    def _mark(self, write: str, rid: int) -> bool:
        """One of the frontier's marks of row ``rid`` (``write``: the ``FrontierDB`` method, ``reached``,
        ``storing`` or ``stored_nothing``). False: not written, as the frontier failed (then the crawl
        stops) or is closed."""
        if self._db is None or self._failed:
            return False
        try:
            getattr(self.db, write)(rid)
        except FrontierError as exc:
            self._fail(exc)
            return False
        return True

    def _reached(self, rid: int) -> None:
        """Frontier row ``rid``'s server answered (its headers came): from now on a kill counts against it."""
        self._mark("reached", rid)

    def _storing(self, rid: int) -> bool:
        """Frontier row ``rid``'s page is about to be stored as new: recorded (committed) first. False: the
        frontier failed (then the crawl stops), and the page is held for the resume."""
        return self._mark("storing", rid)

    def _stored_nothing(self, rid: int) -> None:
        self._mark("stored_nothing", rid)

    def _note(self, name: str) -> None:
        """``AckTracker.note``: a mark in the open transaction (committed before any later acknowledgement)."""
        if self._db is None or self._failed:
            return
        try:
            self.db.mark_once(name)
        except FrontierError as exc:
            self._fail(exc)

    def _notes(self, prefix: str) -> list[str]:
        if self._db is None or self._failed:
            return []
        try:
            return self.db.marks_under(prefix)
        except FrontierError as exc:
            self._fail(exc)
            return []

    def _downloader(self) -> Any:
        try:
            return self.crawler.engine.downloader
        except (RuntimeError, AttributeError):  # (no engine: a scheduler used on its own)
            return None

    def _slot(self, request: Request) -> str:
        downloader = self._downloader()
        if downloader is not None:
            return downloader.get_slot_key(request)
        from scrapy.utils.httpobj import urlparse_cached

        return urlparse_cached(request).hostname or ""

    def _next_slot(self) -> str:
        """The slot with queued requests and the fewest active downloads (ties: by name)."""
        slots = getattr(self._downloader(), "slots", {})
        return min((len(s.active) if (s := slots.get(key)) is not None else 0, key) for key in self.db.queued)[1]

    def _commit(self) -> None:
        self._pushed = 0
        done, held = self.feeds.settle(self.tracker.acknowledgeable())
        if held:  # their feed items follow items of requests not acknowledged yet
            self.tracker.put_back(held)
        if done:
            self.db.ack(done)
            self.stats.inc_value("neardup/frontier/acknowledged", len(done))
        self.db.commit(self.tracker.store_size() if self.tracker.store_size is not None else None)

    def _checkpoint(self) -> None:
        if self._db is None or self._failed:
            return
        try:
            self.tracker.tick()
            self._commit()
        except FrontierError as exc:
            self._fail(exc)

    def _unserializable(self, request: Request, exc: Exception) -> None:
        n = self.stats.get_value("neardup/frontier/unserializable", 0)
        if n == 0 or self.crawler.settings.getbool("SCHEDULER_DEBUG"):
            logger.warning("frontier: cannot store %s (%s); kept in memory only, so a crash loses it "
                           "(reported once; SCHEDULER_DEBUG=True reports every one)", request, exc)
        self.stats.inc_value("neardup/frontier/unserializable")
        self._memory.append(request)
        self.stats.inc_value("scheduler/enqueued/memory")
        self.stats.inc_value("scheduler/enqueued")

    def _fail(self, exc: FrontierError) -> None:
        """The frontier cannot be written (disk full, removed, damaged): stop the
        crawl with a clear error; what was committed stays for a resume."""
        if self._failed:
            return
        self._failed = True
        logger.error("%s; stopping the crawl (what was committed is kept: resume with the same JOBDIR)", exc)
        self.stats.set_value("neardup/frontier/error", str(exc)[:200])
        stop_crawl(self.crawler, "frontier_error")

