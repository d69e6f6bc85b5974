"""The shared frontier: scrapy-redis's scheduler with reliable-queue acknowledgements.

Many crawler processes (on many machines) take requests from one scrapy-redis
queue and filter them through one scrapy-redis dupe filter. scrapy-redis pops
a request and forgets it, so a process killed mid-crawl loses every request
it had taken. ``ReliableRedisScheduler`` keeps scrapy-redis's queue (its key,
its class: ``PriorityQueue``, ``FifoQueue`` or ``LifoQueue``) and dupe filter,
and adds the reliable-queue pattern:

* a pop *moves* the request, in one server-side step, from the queue to this
  process's in-flight hash (``<queue key>:inflight:<process id>``);
* the request is acknowledged (removed from there) in the same commit order
  as the embedded frontier (``crawler.frontier.acks``): only after its
  response went through the spider, its outlinks were pushed, its
  fingerprint was stored and its items left the pipelines;
* each process beats a heartbeat into ``<queue key>:workers`` (a sorted set
  of last-seen times); a process whose heartbeat is older than
  ``NEARDUP_FRONTIER_LEASE`` seconds is dead, and any live one moves its
  in-flight requests back to the queue, counting the redelivery; those that
  had stored their page as new (``...:stored``) are marked in ``<queue
  key>:emit`` until done, and the filter then emits the page again rather
  than calling it unchanged (the others produced nothing);
* a process stays up while any process holds requests in flight (their
  outlinks are still to come), so N processes end together.

Requests are stored as JSON (``crawler.frontier.codec``), not pickled: a
shared Redis should not be able to run code in every crawler. Keys share the
hash tag of the queue key (the profile uses ``{%(spider)s}:requests``), so
each step touches one slot of a Redis Cluster.

If Redis goes away, popping returns nothing (the crawl waits) and pushes wait
in memory (their parent is acknowledged only once they are pushed), with
reconnects by redis-py; the crawl goes on when Redis is back.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
import uuid
from collections import deque
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.utils.misc import load_object
from scrapy_redis.scheduler import Scheduler as ScrapyRedisScheduler
from twisted.internet import task

from .acks import AckTracker, give_up
from .codec import CorruptRequest, UnserializableRequest, decode_request, encode_request
from .feeds import FlushGate
from .scheduler import CHECKPOINT_INTERVAL

logger = logging.getLogger(__name__)

# The queue kinds: how a request is pushed, popped and put back (at the front).
PRIORITY, FIFO, LIFO = "priority", "fifo", "lifo"

# KEYS: queue, inflight, redelivered, kills, emit. ARGV: kind, id.
# Move the next request to the in-flight hash as "score|data"; return {data, redeliveries, kills, emit again}.
# An id already in the hash gets its own request back, nothing more is popped: a call whose answer was lost
# (Redis stopping, a connection cut; redis-py may even send it again itself) is asked again with the same
# id, so the request it moved is handed out, not held by a live process that never got it (its heartbeat
# keeps it from any other process, and the crawl never ended) nor overwritten by a second pop (lost).
_POP = """
local kind, data, score = ARGV[1], nil, '0'
local held = redis.call('HGET', KEYS[2], ARGV[2])
if held then
  local sep = string.find(held, '|', 1, true)
  data = string.sub(held, sep + 1)
elseif kind == 'priority' then
  local r = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #r == 0 then return false end
  data, score = r[1], r[2]
  redis.call('ZREM', KEYS[1], data)
elseif kind == 'fifo' then
  data = redis.call('RPOP', KEYS[1])
else
  data = redis.call('LPOP', KEYS[1])
end
if not data then return false end
if not held then redis.call('HSET', KEYS[2], ARGV[2], score .. '|' .. data) end
local sha = redis.sha1hex(data)
return {data, tonumber(redis.call('HGET', KEYS[3], sha) or '0'), tonumber(redis.call('HGET', KEYS[4], sha) or '0'),
        tonumber(redis.call('HGET', KEYS[5], sha) or '0')}
"""

# KEYS: workers, queue, redelivered, kills, emit. ARGV: kind, lease_ms, inflight key prefix, me, reclaim_me
# ('1'/'0'), reclaim_others ('1'/'0').
# Heartbeat for me; move every dead process's in-flight requests (when reclaim_others: see
# ``_may_reclaim``), and mine when asked (a closing process), back to the front of the queue,
# counting the redelivery, a kill of those its server had answered (their ids in the process's
# "answered" set, the in-flight hash's key + ':answered': a request still waiting out DOWNLOAD_DELAY is
# not counted a kill, or it would be given up after a few deaths without ever being sent), and marking
# "emit again" those that had stored their page (the ':stored' set: their outputs may be half committed,
# so they are emitted again, never taken for unchanged; one that had not stored its page produced nothing).
# Returns {requests moved, requests in flight at live processes (mine included), requests queued}.
_BEAT = """
local kind, lease, prefix, me = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[5] == '1' then redis.call('ZADD', KEYS[1], 0, me) else redis.call('ZADD', KEYS[1], now, me) end
local moved, live = 0, 0
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  local w, seen = all[i], tonumber(all[i + 1])
  local inflight = prefix .. w
  if seen < now - lease and (w == me or ARGV[6] == '1') then
    local held = redis.call('HGETALL', inflight)
    local answered, stored = inflight .. ':answered', inflight .. ':stored'
    for j = 2, #held, 2 do
      local v = held[j]
      local sep = string.find(v, '|', 1, true)
      local score, data = string.sub(v, 1, sep - 1), string.sub(v, sep + 1)
      if kind == 'priority' then redis.call('ZADD', KEYS[2], score, data)
      elseif kind == 'fifo' then redis.call('RPUSH', KEYS[2], data)
      else redis.call('LPUSH', KEYS[2], data) end
      local sha = redis.sha1hex(data)
      redis.call('HINCRBY', KEYS[3], sha, 1)
      if redis.call('SISMEMBER', answered, held[j - 1]) == 1 then redis.call('HINCRBY', KEYS[4], sha, 1) end
      if redis.call('SISMEMBER', stored, held[j - 1]) == 1 then redis.call('HSET', KEYS[5], sha, 1) end
      moved = moved + 1
    end
    redis.call('DEL', inflight, answered, stored)
    redis.call('ZREM', KEYS[1], w)
  else
    live = live + redis.call('HLEN', inflight)
  end
end
local queued
if kind == 'priority' then queued = redis.call('ZCARD', KEYS[2]) else queued = redis.call('LLEN', KEYS[2]) end
return {moved, live, queued}
"""

# KEYS: a claim hash (the shared rule book's avoided requests), queue, dupe filter set.
# ARGV: kind, then per request: its claim field, data, score, dupe-filter fingerprint ('' for none).
# Each request is pushed only by the call that deletes its claim field (so once, whichever process
# releases it), and only if its fingerprint is new to the dupe filter; claim and push are one step.
# Returns a 1 per request this call claimed, else 0.
_CLAIM_PUSH = """
local kind, out = ARGV[1], {}
for i = 2, #ARGV, 4 do
  local claimed = redis.call('HDEL', KEYS[1], ARGV[i])
  out[#out + 1] = claimed
  if claimed == 1 and (ARGV[i + 3] == '' or redis.call('SADD', KEYS[3], ARGV[i + 3]) == 1) then
    if kind == 'priority' then redis.call('ZADD', KEYS[2], ARGV[i + 2], ARGV[i + 1])
    else redis.call('LPUSH', KEYS[2], ARGV[i + 1]) end
  end
end
return out
"""


def claim_and_push(server: Any, claim_key: str, queue_key: str, dupefilter_key: str, kind: str,
                   items: list[tuple[str, str, float, str | None]]) -> list[bool]:
    """Push ``items`` (claim field, request data, score, dupe-filter fingerprint or None for
    one the dupe filter has let through already) to the queue, each only if this call deletes
    its field from ``claim_key`` and the dupe filter has not seen it: one server-side step, so
    a kill leaves a request either still claimable or queued, never neither, and processes
    releasing the same requests queue each once. Whether this call claimed each. O(len(items))."""
    if not items:
        return []
    args: list[Any] = [kind]
    for field, data, score, fp in items:
        args += [field, data, score, fp or ""]
    return [bool(x) for x in server.eval(_CLAIM_PUSH, 3, claim_key, queue_key, dupefilter_key, *args)]


# KEYS: queue, dupe filter set. ARGV: kind, data, score, dupe-filter fingerprint ('' for none).
# The dupe filter's mark and the push are one step: a kill between the two would leave a request
# marked seen and never queued, so its parent, fetched again, could not queue it either (lost).
# Returns 1 if queued, 0 if the dupe filter had seen it.
_SEEN_PUSH = """
if ARGV[4] ~= '' and redis.call('SADD', KEYS[2], ARGV[4]) == 0 then return 0 end
if ARGV[1] == 'priority' then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
else redis.call('LPUSH', KEYS[1], ARGV[2]) end
return 1
"""

# KEYS: queue, dupe filter set, marks set. ARGV: kind, data, score, dupe-filter fingerprint ('' for none), mark.
# A request queued once whatever the kills: its mark, the dupe filter's mark and the push are one step,
# so a caller that keeps the request elsewhere until it is queued, and queues it again after a kill, queues
# it once. Returns -1 if marked before (queued by an earlier call), 0 if the dupe filter had seen it, 1 if queued.
_MARK_PUSH = """
if redis.call('SADD', KEYS[3], ARGV[5]) == 0 then return -1 end
if ARGV[4] ~= '' and redis.call('SADD', KEYS[2], ARGV[4]) == 0 then return 0 end
if ARGV[1] == 'priority' then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
else redis.call('LPUSH', KEYS[1], ARGV[2]) end
return 1
"""

# KEYS: inflight, redelivered, answered, kills, stored, emit. ARGV: ids..., then '|', then sha1s of their data.
_ACK = """
local i = 1
while ARGV[i] ~= '|' do
  redis.call('HDEL', KEYS[1], ARGV[i]); redis.call('SREM', KEYS[3], ARGV[i]); redis.call('SREM', KEYS[5], ARGV[i])
  i = i + 1
end
for j = i + 1, #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[j]); redis.call('HDEL', KEYS[4], ARGV[j]); redis.call('HDEL', KEYS[6], ARGV[j])
end
return 0
"""


class _PushGate:
    """Outlinks pushed while Redis was away wait here; their parent is
    acknowledged only after they reach the queue."""

    def __init__(self, scheduler: ReliableRedisScheduler) -> None:
        self.scheduler = scheduler

    def mark(self) -> int:
        return self.scheduler.accepted

    def settled(self, token: int) -> bool:
        return self.scheduler.pushed >= token


class ReliableRedisScheduler(ScrapyRedisScheduler):
    """scrapy-redis's scheduler; a request leaves Redis only once it is done."""

    marks_redeliveries = True  # (as DurableScheduler's)
    crawler: Crawler
    df: Any  # scrapy-redis's dupe filter (made in open() unless given)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReliableRedisScheduler:
        from ..config import NearDupConfig

        config = NearDupConfig.of(crawler)
        instance = cls.from_settings(crawler.settings)
        instance.stats = crawler.stats
        instance.crawler = crawler
        instance.lease = config.frontier_lease
        instance.max_redeliveries = config.frontier_max_redeliveries
        return instance

    @classmethod
    def refuse_at_start(cls, settings: Any) -> None:
        """What this frontier refuses before the engine starts (the scheduler is made only as it
        opens, too late for one clear error): a plain client (no scrapy-redis ``REDIS_PARAMS``
        ``redis_cls``) on a node of a Redis Cluster, which gets MOVED for every key of another
        node's slots, so the crawl would fail later in tracebacks, or run on one node by luck.
        Redis unreachable: nothing to tell (the frontier waits for it, as at any time)."""
        from redis.cluster import RedisCluster
        from scrapy_redis.connection import get_redis_from_settings

        from ..config import ConfigError

        server = get_redis_from_settings(settings)
        try:
            if isinstance(server, RedisCluster):
                return
            try:
                enabled = server.info("cluster").get("cluster_enabled")
            except Exception:  # noqa: S110  (down, or a server without INFO cluster)
                return
        finally:
            server.close()
        if enabled:
            raise ConfigError("REDIS_URL points at a node of a Redis Cluster: set REDIS_PARAMS = "
                              "{'redis_cls': 'redis.cluster.RedisCluster'} (scrapy-redis's setting) so the "
                              "frontier's client is a cluster client")

    # -- opening and closing --------------------------------------------------------

    def open(self, spider: Spider) -> Any:
        # scrapy-redis's open(), without its deprecated spider.log()
        self.spider = spider
        queue_cls = load_object(self.queue_cls) if isinstance(self.queue_cls, str) else self.queue_cls
        self.queue = queue_cls(server=self.server, spider=spider, key=self.queue_key % {"spider": spider.name},
                               serializer=self.serializer)
        if not self.df:
            self.df = load_object(self.dupefilter_cls).from_spider(spider)
        if self.flush_on_start:
            self.flush()
        from scrapy_redis import queue as q

        self.kind = (PRIORITY if issubclass(queue_cls, q.PriorityQueue) else
                     LIFO if issubclass(queue_cls, q.LifoQueue) else FIFO)
        key = self.queue.key
        self.me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.inflight_prefix = f"{key}:inflight:"
        self.inflight_key = self.inflight_prefix + self.me
        self.answered_key = self.inflight_key + ":answered"  # (_BEAT's name for it)
        self.stored_key = self.inflight_key + ":stored"  # (_BEAT's name for it)
        self.workers_key = f"{key}:workers"
        self.redelivered_key = f"{key}:redelivered"
        self.kills_key = f"{key}:kills"
        self.emit_key = f"{key}:emit"
        self._pop = self.server.register_script(_POP)
        self._seen_push = self.server.register_script(_SEEN_PUSH) if self._df_in_step() else None
        self.marks_key = f"{key}:marks"  # (``push_marked``: the queue's hash tag, so its slot)
        self.notes_key = f"{key}:notes"  # (``AckTracker.note``: a sorted set of score 0, read by prefix)
        self._mark_push = self.server.register_script(_MARK_PUSH)
        self._beat = self.server.register_script(_BEAT)
        self._ack = self.server.register_script(_ACK)
        self._next_id = 0
        self._pop_unanswered = False  # the last pop failed: its id is asked again (``_POP``)
        self._shas: dict[int, str] = {}
        self._unacked: list[int] = []  # done, but Redis was away when they were to be acknowledged
        self._backlog: deque[Request] = deque()
        self.accepted = self.pushed = 0  # requests handed to enqueue_request / that reached Redis
        self._down = False
        # (since Redis answered this process without a break: a lease from its start too, as an outage just
        # before it left every heartbeat stale: see ``_may_reclaim``)
        self._up_since = time.monotonic()
        self._live_inflight = 0
        self.tracker = AckTracker.of(self.crawler)
        self.tracker.add_gate(FlushGate(self.crawler))
        self.tracker.add_gate(_PushGate(self))
        self.tracker.active = True
        self.tracker.on_reached = self._answered
        self.tracker.on_storing = self._storing
        self.tracker.on_stored_nothing = self._stored_nothing
        self.tracker.on_note = self._note
        self.tracker.on_notes = self._notes
        self._heartbeat()
        self._loop = task.LoopingCall(self._checkpoint)
        self._loop.start(CHECKPOINT_INTERVAL, now=False)
        logger.info("shared frontier on %s: queue %s (%s), %d requests queued; this process is %s",
                    "Redis Cluster" if self._cluster() else "Redis", key, self.kind, len(self.queue), self.me)

    def close(self, reason: str) -> None:
        if self._loop.running:
            self._loop.stop()
        if reason == "finished":
            self.tracker.finish_all()
        self._flush_backlog()
        self._acknowledge()
        try:  # what this process still holds goes back to the queue now, not after the lease
            moved, _, _ = self._beat_now(hand_back=True)
            if moved:
                logger.info("shared frontier: %d unfinished request(s) went back to the queue", moved)
        except Exception as exc:  # (Redis away: the lease hands them to another process later)
            logger.warning("shared frontier: could not hand back the requests in flight (%r); another process "
                           "takes them once NEARDUP_FRONTIER_LEASE has passed", exc)
        if self._backlog:
            logger.error("shared frontier: %d request(s) could not be pushed to Redis; their pages were not "
                         "acknowledged and will be fetched again", len(self._backlog))
        self.tracker.active = False
        self.tracker.on_reached = None
        self.tracker.on_storing = None
        self.tracker.on_stored_nothing = None
        self.tracker.on_note = self.tracker.on_notes = None
        super().close(reason)

    # -- the queue --------------------------------------------------------------------

    def __len__(self) -> int:
        try:
            return len(self.queue) + len(self._backlog)
        except Exception:
            return len(self._backlog)

    def has_pending_requests(self) -> bool:
        """Requests queued, or held by any live process (their outlinks are still to come)."""
        if self._backlog or self._down:
            return True
        try:
            if len(self.queue) > 0 or self._live_inflight > 0 or self.server.hlen(self.inflight_key):
                return True
            # It looks idle, but the count of others' requests in flight is the last heartbeat's: a
            # process that started meanwhile may have taken the start request this one's dupe filter
            # turned away. Before saying "nothing left" (the engine then closes), look again.
            self._heartbeat()
            return self._live_inflight > 0 or len(self.queue) > 0
        except Exception:
            return True

    def enqueue_request(self, request: Request) -> bool:
        parent = self.tracker.adopt(request)  # (the request it replaces: a redirect, a retry)
        try:
            self.accepted += 1
            self._backlog.append(request)
            if len(self._backlog) == 1:
                self._flush_backlog()
            return True
        finally:
            if parent is not None:
                self.tracker.finish(parent)

    def _cluster(self) -> bool:
        """Whether the queue's client is a Redis Cluster's (scrapy-redis's ``REDIS_PARAMS``:
        ``{"redis_cls": "redis.cluster.RedisCluster"}``)."""
        from redis.cluster import RedisCluster

        return isinstance(self.server, RedisCluster)

    def _df_in_step(self) -> bool:
        """Whether the dupe filter's mark can be made in the push's own server-side step:
        scrapy-redis's ``RFPDupeFilter`` (its SADD, unchanged by a subclass), its set on the
        queue's server and, on a Redis Cluster, in the queue's slot (the add-on's keys share
        the hash tag ``{spider}``). Any other dupe filter is asked first, as scrapy-redis does."""
        from redis.cluster import RedisCluster
        from redis.crc import key_slot
        from scrapy_redis.dupefilter import RFPDupeFilter

        if type(self.df).request_seen is not RFPDupeFilter.request_seen:
            return False
        if isinstance(self.server, RedisCluster) and isinstance(self.df.server, RedisCluster):
            mine, theirs = self.server.get_default_node(), self.df.server.get_default_node()
            return ((mine.host, mine.port) == (theirs.host, theirs.port)
                    and key_slot(self.queue.key.encode()) == key_slot(str(self.df.key).encode()))
        return self.shares_server(self.df.server)

    def _flush_backlog(self) -> None:
        """Filter and push the waiting requests, in order, while Redis answers."""
        while self._backlog:
            request = self._backlog[0]
            try:
                if not self._push(request):
                    self.df.log(request, self.spider)
            except Exception as exc:
                self._redis_down(exc)
                return
            self._backlog.popleft()
            self.pushed += 1
            self._redis_up()  # (only once Redis answered: an empty backlog says nothing of it)

    def _push(self, request: Request) -> bool:
        """Queue ``request`` unless the dupe filter has seen it (unless ``dont_filter``): marked
        and queued in one step (``_SEEN_PUSH``) where ``_df_in_step``, else the dupe filter asked
        first. False if the dupe filter had seen it (an unstorable request is dropped, logged)."""
        if self._seen_push is None and not request.dont_filter and self.df.request_seen(request):
            return False
        try:
            data = encode_request(request, self.spider)
        except UnserializableRequest as exc:
            logger.error("shared frontier: a request cannot be stored in Redis and is dropped (%s): %s", exc,
                         request)
            self.stats.inc_value("neardup/frontier/unserializable")
            return True
        if self._seen_push is not None:
            fp = "" if request.dont_filter else self.df.request_fingerprint(request)
            if not self._seen_push(keys=[self.queue.key, self.df.key], args=[self.kind, data, -request.priority, fp]):
                return False
        elif self.kind == PRIORITY:
            self.server.execute_command("ZADD", self.queue.key, -request.priority, data)
        else:
            self.server.lpush(self.queue.key, data)
        self.stats.inc_value("scheduler/enqueued/redis")
        self.stats.inc_value("scheduler/enqueued")
        return True

    def shares_server(self, client: Any) -> bool:
        """Whether ``client`` (a shared rule book's) talks to this queue's Redis, one server
        (not a Cluster: a claim and a push in one step need their keys on one node)."""
        from redis import Redis

        if not (isinstance(client, Redis) and isinstance(self.server, Redis)):
            return False
        mine, theirs = self.server.connection_pool.connection_kwargs, client.connection_pool.connection_kwargs
        return all(mine.get(k) == theirs.get(k) for k in ("host", "port", "path", "db"))

    def push_claimed(self, claim_key: str, made: list[tuple[str, Request]]) -> list[bool]:
        """Queue the requests of ``made`` (claim field, request) that this call claims from
        ``claim_key`` (``claim_and_push``): a retired URL rule's avoided requests, released
        from the shared rule book and queued in one step. Raises what Redis raises."""
        # (each was decoded from the book's JSON with the same codec: it encodes again)
        items = [(field, encode_request(request, self.spider), float(-request.priority),
                  None if request.dont_filter else self.df.request_fingerprint(request)) for field, request in made]
        claimed = claim_and_push(self.server, claim_key, self.queue.key, self.df.key, self.kind, items)
        self.stats.inc_value("scheduler/enqueued/redis", sum(claimed))
        return claimed

    def push_marked(self, marked: list[tuple[str, Request]]) -> list[int]:
        """Queue each request of ``marked`` (mark, request) once whatever the kills: its mark (in
        ``<queue key>:marks``, the queue's slot), the dupe filter's mark (unless ``dont_filter``) and
        the push in one server-side step (``_MARK_PUSH``; a dupe filter that cannot be marked in it,
        ``_df_in_step``, is asked first). For a caller that keeps the requests elsewhere until they are
        queued and may queue them again after a kill: a retired URL rule's avoided requests, kept in a
        rule book the queue cannot claim them from in the same step (a Redis Cluster, another server,
        a file). Per request: 1 queued, 0 the dupe filter had seen it, -1 queued by an earlier call.
        Raises what Redis raises. O(len(marked)) round trips."""
        out = []
        # (a dupe filter asked first may have no key, or one in another slot: the step does not touch it)
        df_key = self.df.key if self._seen_push is not None else self.marks_key
        for mark, request in marked:
            fp = "" if request.dont_filter or self._seen_push is None else self.df.request_fingerprint(request)
            if self._seen_push is None and not request.dont_filter and self.df.request_seen(request):
                out.append(0)
                continue
            # (each was decoded from the rule book's JSON with the same codec: it encodes again)
            got = int(self._mark_push(keys=[self.queue.key, df_key, self.marks_key],
                                      args=[self.kind, encode_request(request, self.spider), -request.priority, fp,
                                            mark]))
            if got == 1:
                self.stats.inc_value("scheduler/enqueued/redis")
                self.stats.inc_value("scheduler/enqueued")
            out.append(got)
        return out

    def next_request(self) -> Request | None:
        while True:
            # (after a failed pop, the same id: that pop may have moved a request before its answer was lost)
            rid = self._next_id = self._next_id + (0 if self._pop_unanswered else 1)
            try:
                got = self._pop(keys=[self.queue.key, self.inflight_key, self.redelivered_key, self.kills_key,
                                      self.emit_key], args=[self.kind, rid])
            except Exception as exc:
                self._pop_unanswered = True
                self._redis_down(exc)
                return None
            self._pop_unanswered = False
            self._redis_up()
            if not got:
                return None
            data, redelivered, kills, emit = got[0], int(got[1]), int(got[2]), int(got[3])
            sha = hashlib.sha1(data).hexdigest()
            self._shas[rid] = sha
            try:
                request = decode_request(data.decode("utf-8"), self.spider)
            except (CorruptRequest, UnicodeDecodeError) as exc:
                logger.error("shared frontier: an unreadable request in Redis is dropped (%s)", exc)
                self.stats.inc_value("neardup/frontier/corrupt")
                self._ack_or_later([rid])
                continue
            if give_up(self.stats, kills, self.max_redeliveries, request.url):
                self._ack_or_later([rid])
                continue
            if redelivered:
                self.stats.inc_value("neardup/frontier/redelivered")
            self.tracker.hand_out(request, rid, emit)
            self.stats.inc_value("scheduler/dequeued/redis")
            self.stats.inc_value("scheduler/dequeued")
            return request

    # -- acknowledgements and heartbeats ---------------------------------------------------

    def _checkpoint(self) -> None:
        self.tracker.tick()
        self._flush_backlog()
        self._acknowledge()
        self._heartbeat()

    def _acknowledge(self) -> None:
        ids, self._unacked = self._unacked + self.tracker.acknowledgeable(), []
        self._ack_or_later(ids)

    def _ack_or_later(self, ids: list[int]) -> None:
        """Acknowledge ``ids``; Redis away, they wait with the others for the next checkpoint. Raised
        into the engine instead, a request dropped at its pop (unreadable, given up) stayed in this
        live process's in-flight hash, and the crawl never ended."""
        if not ids:
            return
        try:
            self._ack_now(ids)
        except Exception as exc:
            self._redis_down(exc)
            self._unacked += ids

    def _ack_now(self, ids: list[int]) -> None:
        # (the data's hashes are let go only once acknowledged: sent again after a failure, they clear the
        # request's redelivery, kill and emit counts, which an identical request queued later would inherit)
        shas = [self._shas.get(i, "") for i in ids]
        self._ack(keys=[self.inflight_key, self.redelivered_key, self.answered_key, self.kills_key, self.stored_key,
                        self.emit_key], args=[*ids, "|", *shas])
        for i in ids:
            self._shas.pop(i, None)

    def _answered(self, rid: int) -> None:
        """Request ``rid``'s server answered: a death of this process from now on counts against it
        (``_BEAT``). Redis away: not recorded, so such a death does not count (a page that kills every
        process that fetches it is then given up only once Redis answers these marks again)."""
        try:
            self.server.sadd(self.answered_key, rid)
        except Exception as exc:
            self._redis_down(exc)

    def _storing(self, rid: int) -> bool:
        """Request ``rid``'s page is about to be stored as new: a death of this process from now on has it
        emitted again (``_BEAT``). Redis away: ``StoreUnavailable``, so that the page is not stored unmarked
        and waits for Redis, or passes unchecked, as ``NEARDUP_STORE_UNAVAILABLE`` says for the store
        itself (held here instead, it stayed in flight while this process ran, and the crawl never ended)."""
        from scrapy_neardup.dedup.store import StoreUnavailable

        try:
            self.server.sadd(self.stored_key, rid)
        except Exception as exc:
            self._redis_down(exc)
            raise StoreUnavailable(f"the shared frontier's Redis did not answer ({exc!r})") from exc
        return True

    def _stored_nothing(self, rid: int) -> None:
        """Request ``rid``'s page was not stored after all (another process stored it first): unmarked.
        Redis away: left marked (a death then emits the page again: a duplicate, never a loss)."""
        try:
            self.server.srem(self.stored_key, rid)
        except Exception as exc:
            self._redis_down(exc)

    def _note(self, name: str) -> None:
        """``AckTracker.note``, for every process of the crawl. Redis away: not kept (what it was for is then
        this process's own memory)."""
        try:
            self.server.zadd(self.notes_key, {name: 0})
        except Exception as exc:
            self._redis_down(exc)

    def _notes(self, prefix: str) -> list[str]:
        start = prefix.encode()
        try:
            found = self.server.zrangebylex(self.notes_key, b"[" + start, b"[" + start + b"\xff")
        except Exception as exc:
            self._redis_down(exc)
            return []
        return [name.decode() if isinstance(name, bytes) else name for name in found]

    def _heartbeat(self) -> None:
        try:
            moved, live, queued = self._beat_now(hand_back=False)
        except Exception as exc:
            self._redis_down(exc)
            return
        self._redis_up()
        self._live_inflight = int(live)
        if queued:
            self._wake_engine()
        if moved:
            logger.warning("shared frontier: %d request(s) held by a process that stopped beating went back "
                           "to the queue", moved)
            self.stats.inc_value("neardup/frontier/reclaimed", int(moved))

    def _beat_now(self, hand_back: bool) -> list[int]:
        """Heartbeat and requeue dead processes' requests (and, ``hand_back``, this
        one's): ``_BEAT``'s [requeued, in flight at live processes, queued]."""
        return self._beat(keys=[self.workers_key, self.queue.key, self.redelivered_key, self.kills_key, self.emit_key],
                          args=[self.kind, int(self.lease * 1000), self.inflight_prefix, self.me,
                                "1" if hand_back else "0", "1" if self._may_reclaim() else "0"])

    def _may_reclaim(self) -> bool:
        """Whether a silent process may be taken for dead. Not until Redis has answered this
        process for a whole lease after an outage it saw: an outage silences every process, and
        one longer than the lease left every heartbeat stale, so the first to see Redis back
        would take the others' requests while they still work on them (their pages emitted
        twice). Within the lease each live process beats again. So too after this process's start
        (it may start just after an outage): a dead process's requests wait a lease more at most."""
        if self._down:  # (this beat is the first call to reach Redis since: not a lease of it yet)
            return False
        return time.monotonic() - self._up_since >= self.lease

    def _wake_engine(self) -> None:
        """Ask the engine for requests now: an idle engine asks the scheduler only
        every 5 s, and other processes may have queued work meanwhile. (Scrapy's
        engine slot is not public API: without it, the engine's own 5 s poll serves.)"""
        try:
            slot = self.crawler.engine._slot
            if slot is not None:
                slot.nextcall.schedule()
        except Exception:  # noqa: S110  (an engine without that slot: its heartbeat polls)
            pass

    def _redis_down(self, exc: Exception) -> None:
        if not self._down:
            logger.warning("shared frontier: Redis is unavailable (%s); waiting for it (pushes wait in memory)",
                           exc)
            self.stats.inc_value("neardup/frontier/redis_outages")
        self._down = True

    def _redis_up(self) -> None:
        if self._down:
            logger.warning("shared frontier: Redis is back")
            self._up_since = time.monotonic()
        self._down = False

