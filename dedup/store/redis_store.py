"""The permuted tables on Redis (or Redis Cluster), shared by many processes.

``SimhashStore.open("redis://[:password@]host:port/db?prefix=NAME")`` gives
this store: the same answers as the embedded one (the same contract tests run
over both), for crawler processes on many machines at once.

Layout (``k = 3`` at 1M: 4 tables of 16-bit prefixes): a fingerprint lives
in one *bucket* per table, the bucket named by its prefix in that table
(``Layout.prefixes``). Two fingerprints within k bits share the prefix of
some table (pigeonhole), so probing the T buckets of a fingerprint finds
every stored neighbour. Keys, with ``S`` shards per table (``?shards=``,
default 64) and shard ``s = prefix mod S``::

    {NAME:t.s}:b:<prefix hex>   the bucket: stored fingerprints, 8 bytes each, appended
    {NAME:t.s}:b:<prefix hex>:p a cluster's reservations in flight in this bucket (a hash; usually absent)
    {NAME:0.s}:b:<prefix hex>:r table 0 only: records, field fingerprint -> its (seq, key) records
    {NAME:0.s}:n                table 0 only: records in this shard
    NAME:meta                   settings and layout

The ``{...}`` hash tag puts one table shard in one Redis Cluster slot, so the
``T * S`` shards spread over the cluster's nodes and the store grows with it,
while every server-side step touches one slot only.

Every ``check_and_add`` first reads the fingerprint's T buckets (one MGET
per slot chunk) and scans them here with numpy: a committed neighbour makes
it a duplicate with no write at all. Otherwise it must be admitted
atomically across processes:

* On one Redis, one Lua step per chunk (``CHECK_AND_COMMIT``) appends the
  fingerprint to its T buckets, scans whatever another process appended
  since the read (usually nothing: APPEND's new length says so), and writes
  its record; or, finding a neighbour there, undoes the appends.
* On a Redis Cluster a step may touch one slot only, so a fingerprint
  *reserves* itself in each of its buckets (``RESERVE``: unless a committed
  fingerprint, or another process's live reservation, is within k). A
  committed neighbour makes it a duplicate (it gives back its reservations);
  a reservation within k makes it wait and retry. Holding all T, it commits
  them at once (table 0 first, with the record). Of two near-duplicates
  racing, both need the bucket they share and only one can hold it: exactly
  one is admitted. Waiting at table t, a fingerprint first gives back what it
  holds from t on, so waits follow table order and cannot deadlock. A
  reservation whose process died expires after ``lease`` seconds
  (``?lease=``, default 30); a process that stalls longer than that between
  reserving and committing could let a near-copy in (documented).

Costs: a probe reads T buckets of about ``n / 2**prefix`` fingerprints (15 at
1M). Round trips per ``check_and_add``: a duplicate 2 (read, records: one
HGET of its field); a new fingerprint 2 on one Redis (read,
check-and-commit), 3-4 on a cluster (read, reserve, commit table 0, commit
the rest), more when it waits. Batches pipeline all of it, grouped by slot;
on one Redis a big batch goes in two halves from two threads, so that one
half's Python work overlaps the other's wait on Redis (``BENCHMARKS.md``).
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import defaultdict
from contextlib import contextmanager
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from . import redis_scripts as scripts
from .backends import StoreError
from .layout import Layout

DEFAULT_SHARDS = 64
DEFAULT_LEASE = 30.0
CHUNK = 1000  # fingerprints per script call (at most: a call blocks Redis for its duration)
OVERLAP_MIN = 200  # a batch (wave) this big is admitted in two halves at once, from two threads (one Redis)
OWN_PARAMS = ("prefix", "cluster", "shards", "lease")
REDIS_FORMAT = "2"  # the keys' layout (2: records hashes keyed by fingerprint)


class StoreUnavailable(StoreError):
    """The store's server cannot be reached (or is loading): retry later."""


def redact(url: str) -> str:
    """``url`` without its password (for messages, logs and stats)."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def is_redis_url(location: str) -> bool:
    return location.startswith(("redis://", "rediss://", "unix://"))


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The URL for redis-py, and this store's own query parameters."""
    parts = urlsplit(url)
    own, rest = {}, []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (own.__setitem__(name, value) if name in OWN_PARAMS else rest.append((name, value)))
    return urlunsplit(parts._replace(query=urlencode(rest))), own


def _flag(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    if value.lower() in ("1", "yes", "true", "on"):
        return True
    if value.lower() in ("0", "no", "false", "off"):
        return False
    raise StoreError(f"cluster={value!r} in the store URL: use yes or no")


def connect(url: str, *, cluster: bool | None = None, timeout: float = 5.0) -> tuple[Any, bool]:
    """A redis-py client for ``url`` (a Redis Cluster client when the server
    says it is one, or ``cluster`` says so), checked with a PING, and whether
    it is a cluster. Raises ``StoreUnavailable`` naming the URL (no password)."""
    try:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.cluster import RedisCluster
        from redis.retry import Retry
    except ImportError as exc:
        raise StoreError("a redis:// store needs the redis package: pip install 'scrapy-neardup[redis]'") from exc
    # reconnects with backoff, within a call; a longer outage surfaces as StoreUnavailable
    opts = dict(socket_timeout=timeout, socket_connect_timeout=timeout,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3), health_check_interval=30)
    shown = redact(url)
    try:
        if cluster is None:
            probe = redis.Redis.from_url(url, **opts)
            try:
                info = probe.info("cluster")
            finally:
                probe.close()
            cluster = bool(info.get("cluster_enabled"))
        if cluster:
            opts.pop("health_check_interval")
            client = RedisCluster.from_url(url, **opts)
        else:
            client = redis.Redis.from_url(url, **opts)
        client.ping()
    except redis.AuthenticationError as exc:
        raise StoreError(f"the Redis store at {shown} refused the credentials ({exc})") from None
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterError) as exc:
        raise StoreUnavailable(f"cannot reach the Redis store at {shown}: {exc}") from None
    except redis.RedisError as exc:
        raise StoreError(f"the Redis store at {shown} answered with an error: {exc}") from None
    return client, cluster


@contextmanager
def redis_errors(what: str) -> Iterator[None]:
    """Turn redis-py's errors inside the block into ``StoreUnavailable`` (the
    server cannot be reached, is loading, or a cluster is resharding: retry
    later) or ``StoreError`` (anything else), each naming ``what`` (a redacted URL)."""
    import redis

    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterError,
            redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError) as exc:
        raise StoreUnavailable(f"{what} is unavailable: {exc}") from None
    except redis.exceptions.ReadOnlyError as exc:
        raise StoreError(f"{what} cannot be written: {exc}") from None
    except redis.RedisError as exc:
        raise StoreError(f"{what} failed: {exc}") from None


class _Meta:
    """The store's metadata hash, as ``SimhashStore._settle_meta`` reads it."""

    def __init__(self, store: RedisSimhashStore) -> None:
        self.store = store
        self.path = store.location

    def read_meta(self) -> dict[str, str]:
        raw = self.store._call(lambda c: c.hgetall(self.store.meta_key))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def write_meta(self, meta: dict[str, str]) -> None:
        if "format" in meta:  # creating: the first process to get here sets the layout and shards
            meta = {**meta, "redis_format": REDIS_FORMAT, "shards": str(self.store.shards)}
            args = [x for kv in meta.items() for x in kv]
            self.store._call(lambda c: c.eval(scripts.INIT_META, 1, self.store.meta_key, *args))
        else:
            self.store._call(lambda c: c.hset(self.store.meta_key, mapping=meta))


def _verdict(raw: bytes, pos: int, fp: int, found: dict[int, dict[int, int]], i: int) -> tuple[int, int]:
    """Read one fingerprint's verdict at ``raw[pos]`` ("0", "2", or "1" + a 2-byte
    count + that many 8-byte neighbours, put in ``found[i]``); returns it and the next position."""
    v = raw[pos] - 48
    pos += 1
    if v == 1:
        n = raw[pos] * 256 + raw[pos + 1]
        pos += 2
        hits = found.setdefault(i, {})
        for j in range(n):
            other = int.from_bytes(raw[pos + 8 * j : pos + 8 * j + 8], "big")
            hits[other] = (other ^ fp).bit_count()
        pos += 8 * n
    return v, pos


def _entries(raw: bytes) -> list[tuple[int, str]]:
    """A fingerprint's records as a records hash holds them (an 8-byte sequence
    number, a 4-byte key length and the key, each), as (seq, key) oldest first."""
    out, pos = [], 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos + 8 : pos + 12], "big")
        out.append((int.from_bytes(raw[pos : pos + 8], "big"), raw[pos + 12 : pos + 12 + size].decode("utf-8")))
        pos += 12 + size
    out.sort()
    return out


def _pairs(reply: Any) -> Iterable[tuple[bytes, bytes]]:
    """HGETALL's reply as (field, value) pairs (redis-py gives a dict, or a flat list when raw)."""
    return reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])


def _fp8(fp: int) -> bytes:
    return int(fp).to_bytes(8, "big")


class RedisSimhashStore:
    """``SimhashStore``'s API on Redis. Thread-safe; many processes share one."""

    durable = True

    def __init__(self, url: str, *, max_distance: int = 3, capacity: int = 1_000_000, scheme: str | None = None,
                 layout: Layout | None = None, readonly: bool = False, timeout: float = 5.0) -> None:
        from .store import SimhashStore, StoreMismatchError  # (the metadata rules are the embedded store's)

        redis_url, own = split_url(url)
        self.location = redact(url)
        self.name = own.get("prefix") or "neardup"
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.name):
            raise StoreError(f"prefix={self.name!r} in the store URL: use letters, digits and _ . : -")
        try:
            self.shards = int(own.get("shards") or DEFAULT_SHARDS)
            self.lease = float(own.get("lease") or DEFAULT_LEASE)
        except ValueError as exc:
            raise StoreError(f"shards= and lease= in the store URL must be numbers ({exc})") from None
        if self.shards < 1 or self.lease <= 0:
            raise StoreError("shards= must be >= 1 and lease= > 0 in the store URL")
        self.readonly = readonly
        self.client, self.cluster = connect(redis_url, cluster=_flag(own.get("cluster")), timeout=timeout)
        self.meta_key = f"{self.name}:meta"
        self.token = uuid.uuid4().hex  # this store's reservations
        self._last_seq = 0
        self._seq_lock = threading.Lock()
        self._lock = threading.RLock()
        self._pool: ThreadPoolExecutor | None = None
        self._sha: dict[str, str] = {}
        try:
            meta = _Meta(self)
            self.layout = SimhashStore._settle_meta(meta, max_distance, capacity, scheme, layout, readonly)
            stored = meta.read_meta()  # (another process may have created it first)
            if stored.get("redis_format") != REDIS_FORMAT:
                raise StoreMismatchError(f"the Redis store at {self.location} has key format "
                                         f"{stored.get('redis_format', '1')}, this version reads {REDIS_FORMAT}")
            self.layout = Layout.from_json(stored["layout"])
            self.shards = int(stored["shards"])
            self.scheme = stored.get("scheme") or scheme
        except BaseException:
            self.client.close()
            raise
        self.max_distance = self.layout.k
        self.T = self.layout.n_tables

    # -- talking to Redis -------------------------------------------------------

    def _call(self, fn):
        """Run ``fn(client)``, turning redis-py's errors into store errors."""
        with redis_errors(f"the Redis store at {self.location}"):
            return fn(self.client)

    def _run(self, calls: list[tuple[str, list, list]]) -> list[Any]:
        """Run script calls ``(script, keys, args)`` in one pipeline (redis-py
        sends each to its slot's node); loads the scripts where a server lacks them."""
        import redis

        def go(client):
            for _attempt in range(3):
                pipe = client.pipeline(transaction=False)
                for src, keys, args in calls:
                    # (execute_command: redis-py blocks the evalsha method in cluster pipelines, not the command)
                    pipe.execute_command("EVALSHA", self._script(src), len(keys), *keys, *args)
                out = pipe.execute(raise_on_error=False)
                errors = [r for r in out if isinstance(r, Exception)]
                if not errors:
                    return out
                if any(isinstance(e, redis.exceptions.NoScriptError) for e in errors):
                    # a server restarted without its scripts: nothing ran for those calls
                    missing = [c for c, r in zip(calls, out) if isinstance(r, redis.exceptions.NoScriptError)]
                    if len(missing) == len(errors) and len(missing) < len(calls):
                        done = {i for i, r in enumerate(out) if not isinstance(r, Exception)}
                        self._sha.clear()
                        rest = [c for i, c in enumerate(calls) if i not in done]
                        again = self._run(rest)
                        it = iter(again)
                        return [out[i] if i in done else next(it) for i in range(len(calls))]
                    self._sha.clear()
                    continue
                raise errors[0]
            raise StoreError(f"the Redis store at {self.location} keeps losing its scripts")

        return self._call(go)

    def _script(self, src: str) -> str:
        sha = self._sha.get(src)
        if sha is None:
            sha = self._sha[src] = self.client.script_load(src)  # (on every primary of a cluster)
        return sha

    def _group(self, tags: Sequence[str], idx: Iterable[int]) -> list[list[int]]:
        """Indices ``idx`` in chunks that each stay within one slot (grouped by
        their hash tag ``tags[i]``; on a single Redis, any keys go together)."""
        if not self.cluster:
            idx = list(idx)
            return [idx[i : i + CHUNK] for i in range(0, len(idx), CHUNK)]
        groups: dict[str, list[int]] = defaultdict(list)
        for i in idx:
            groups[tags[i]].append(i)
        return [g[i : i + CHUNK] for g in groups.values() for i in range(0, len(g), CHUNK)]

    # -- keys ---------------------------------------------------------------------

    def _tag(self, t: int, prefix: int) -> str:
        return f"{self.name}:{t}.{prefix % self.shards}"

    def _bucket(self, t: int, prefix: int) -> str:
        return f"{{{self._tag(t, prefix)}}}:b:{prefix:x}"

    def _count_key(self, shard: int) -> str:
        return f"{{{self.name}:0.{shard}}}:n"

    def _names(self, prefixes: np.ndarray, fps: np.ndarray) -> tuple[list[list[str]], list[list[str]], list[bytes]]:
        """Per table, each fingerprint's hash tag (on a cluster only: ``_group``
        needs them there) and bucket name (as ``_tag`` and ``_bucket`` make them,
        here in one pass); and each fingerprint's 8 bytes."""
        tags, names, S = [], [], self.shards
        for t in range(len(prefixes)):
            row = prefixes[t].tolist()
            if self.cluster:
                tag = [f"{self.name}:{t}.{p % S}" for p in row]
                tags.append(tag)
                names.append([f"{{{g}}}:b:{p:x}" for g, p in zip(tag, row)])
            else:
                tags.append([])
                names.append([f"{{{self.name}:{t}.{p % S}}}:b:{p:x}" for p in row])
        return tags, names, [_fp8(v) for v in fps.tolist()]

    def _where(self, arr: np.ndarray, prefixes: np.ndarray) -> tuple:
        """What writing a batch needs of each fingerprint: ``_names``, and its
        sequence number, drawn once for the batch so records keep its order."""
        return *self._names(prefixes, arr), self._seqs(len(arr))

    def _calls(self, script: str, t: int, idx: list[int], fps: list[int], where: tuple, head: list[Any],
               tail=None) -> tuple[list[tuple[str, list, list]], list[list[int]]]:
        """Script calls over fingerprints ``idx`` in table ``t``, one per slot
        chunk (``where``: ``_names``): ARGV = head + [fingerprints blob, bucket
        names] (+ ``tail(chunk)``)."""
        tags, names = where[0][t], where[1][t]
        calls, order = [], []
        for chunk in self._group(tags, idx):
            args = [*head, b"".join(where[2][i] for i in chunk), " ".join(names[i] for i in chunk)]
            calls.append((script, [names[chunk[0]]], args + (tail(chunk) if tail else [])))
            order.append(chunk)
        return calls, order

    # -- writing ----------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.readonly:
            raise StoreError("store opened read-only")

    @staticmethod
    def _array(fps: Iterable[int] | np.ndarray) -> np.ndarray:
        if isinstance(fps, np.ndarray):
            return fps.astype(np.uint64, copy=False)
        vals = [int(x) for x in fps]
        for v in vals:
            if not 0 <= v < 1 << 64:
                raise ValueError(f"fingerprint must be an unsigned 64-bit integer, got {v}")
        return np.array(vals, dtype=np.uint64)

    def _seqs(self, n: int) -> range:
        """Sequence numbers for ``n`` new records: microseconds of this machine's
        clock, strictly increasing in this process (no shared counter: a hot key
        on one node). They order records by age, across processes as far as the
        machines' clocks agree."""
        with self._seq_lock:
            first = max(self._last_seq + 1, time.time_ns() // 1000)
            self._last_seq = first + n - 1
        return range(first, first + n)

    def _commit(self, fps: list[int], keys: Sequence[str], where: tuple, idx: list[int],
                repair: bool = False) -> None:
        """Commit fingerprints ``idx`` of a batch into every table: table 0
        (with the records) first, so no table shows a fingerprint without its key.
        (One pipeline on one Redis, whose connection keeps the order; on a
        cluster the nodes run concurrently, so table 0 goes in a round of its own.)"""
        if not idx:
            return
        head = [self.token, "1" if repair else "0"]
        first, _ = self._calls(scripts.COMMIT, 0, idx, fps, where, head,
                               lambda chunk: [b"".join(where[3][i].to_bytes(8, "big") for i in chunk)]
                               + [keys[i].encode("utf-8") for i in chunk])
        rest = [c for t in range(1, self.T) for c in self._calls(scripts.COMMIT, t, idx, fps, where, head)[0]]
        if self.cluster:
            self._run(first)
            if rest:
                self._run(rest)
        else:
            self._run(first + rest)

    def add(self, fp: int, key: str) -> None:
        """Store ``fp`` under ``key`` without a check. T + 1 server steps."""
        self.add_many([fp], [key])

    def add_many(self, fps: Iterable[int] | np.ndarray, keys: Sequence[str]) -> None:
        arr = self._array(fps)
        if len(arr) != len(keys):
            raise ValueError(f"{len(arr)} fingerprints but {len(keys)} keys")
        with self._lock:
            self._check_writable()
            where = self._where(arr, self.layout.prefixes(arr))
            self._commit(arr.tolist(), keys, where, list(range(len(arr))))

    def check_and_add(self, fp: int, key: str) -> Any:
        """The nearest stored match within ``max_distance`` (ties: the oldest
        record), or None after storing ``fp`` under ``key``; atomic across
        every process sharing the store."""
        return self.check_and_add_many([fp], [key])[0]

    def check_and_add_many(self, fps: Iterable[int] | np.ndarray, keys: Sequence[str]) -> list[Any]:
        """``check_and_add`` for each of a batch, in order, pipelined."""
        arr = self._array(fps)
        if len(arr) != len(keys):
            raise ValueError(f"{len(arr)} fingerprints but {len(keys)} keys")
        with self._lock:
            self._check_writable()
            out: list[Any] = [None] * len(arr)
            values = arr.tolist()
            prefixes = self.layout.prefixes(arr)
            where = self._where(arr, prefixes)
            for wave in self._waves(arr, prefixes):
                if len(wave) < OVERLAP_MIN or self.cluster:
                    # (a cluster pipeline from two threads measured slower, not faster)
                    got = self._admit(values, keys, where, wave)
                else:  # two halves at once: one's Python work overlaps the other's wait on Redis
                    half = len(wave) // 2
                    other = self._helper().submit(self._admit, values, keys, where, wave[half:])
                    try:
                        got = self._admit(values, keys, where, wave[:half])
                    finally:
                        rest = other.result()  # (waited for even on an error: it uses the store)
                    got.update(rest)
                for i, m in got.items():
                    out[i] = m
            return out

    def _helper(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="neardup-redis")
        return self._pool

    def _admit(self, values: list[int], keys: Sequence[str], where: tuple, idx: list[int]) -> dict[int, Any]:
        """Check and add ``idx`` (no two within k of each other): {index: its
        nearest match} for the duplicates; the others are stored."""
        if self.cluster:  # one slot per step: reserve the tables, then commit
            found = self._reserve(values, keys, where, idx)
        else:  # one Redis: check and commit all tables in one step
            found = self._check_and_commit(values, keys, where, idx)
        if not found:
            return {}
        dups = sorted(found)
        got = dict(zip(dups, self._resolve([found[i] for i in dups])))
        # a record this process half-committed before an outage: finish it
        mine = [i for i in dups if got[i].fingerprint == values[i] and got[i].key == keys[i]]
        self._commit(values, keys, where, mine, repair=True)
        return got

    def _resolve(self, found: list[dict[int, int]]) -> list[Any]:
        """The nearest record (ties: the oldest) of each {fingerprint: distance}."""
        out = []
        for ms in self._ranked(found):
            if not ms:  # (only if its neighbour was deleted behind the store's back)
                raise StoreError(f"the Redis store at {self.location} lost a record")
            out.append(ms[0])
        return out

    def _ranked(self, found: list[dict[int, int]]) -> list[list[Any]]:
        """The records of each {fingerprint: distance} as matches, nearest first (ties: the oldest)."""
        from .store import Match

        records = self._records_of(v for f in found for v in f)
        out = []
        for f in found:
            ms = sorted((d, seq, v, key) for v, d in f.items() for seq, key in records.get(v, ()))
            out.append([Match(key, v, d) for d, _, v, key in ms])
        return out

    def _waves(self, arr: np.ndarray, prefixes: np.ndarray) -> list[list[int]]:
        """Split a batch so that no two of a wave are within k bits, each after
        every earlier neighbour of the batch (then a wave's fingerprints are
        independent, and a later one sees an earlier one committed)."""
        if len(arr) == 1:
            return [[0]]
        ra, rb = self.layout.near_pairs(arr, prefixes)  # the batch's own near pairs, a < b (rare)
        wave_of = [0] * len(arr)
        for b, a in sorted(zip(rb.tolist(), ra.tolist())):  # by the later one: its earlier ones are final
            wave_of[b] = max(wave_of[b], wave_of[a] + 1)
        waves: list[list[int]] = [[] for _ in range(max(wave_of) + 1)]
        for i, w in enumerate(wave_of):
            waves[w].append(i)
        return waves

    def _reserve(self, fps: list[int], keys: Sequence[str], where: tuple, idx: list[int]) -> dict[int, dict[int, int]]:
        """Reserve every table for ``idx``: all tables in one pipelined round
        when nothing conflicts, committing each as soon as it holds them all.

        Safety needs only that a fingerprint is admitted while holding all T
        reservations (two near-duplicates cannot both hold the bucket they
        share). Liveness needs table order when waiting: a fingerprint told to
        wait at table t first gives back what it holds from t on, and goes on
        from t, so it waits only on one that holds a later table; and a
        fingerprint holding all T is committed at once, never kept waiting for
        the rest of its batch (two batches would otherwise each hold what the
        other waits for, until the lease ran out). Commits as it goes;
        returns {duplicate: {stored fingerprint: distance}}."""
        head = [str(self.max_distance), self.token, str(int(self.lease * 1000))]
        seen, found = self._read(fps, where, idx)  # committed neighbours: duplicates without a reservation
        start = {i: 0 for i in idx if i not in found}  # the first table not yet held
        pause, waited = 0.001, 0.0
        while start:
            calls, order = [], []
            for t in range(self.T):
                c, o = self._calls(scripts.RESERVE, t, [i for i, s in start.items() if s <= t], fps, where, head,
                                   lambda chunk, t=t: [" ".join(map(str, seen[t, chunk].tolist()))])
                calls += c
                order += [(t, chunk) for chunk in o]
            verdicts: dict[int, dict[int, int]] = {i: {} for i in start}  # i -> {table: verdict}
            for (t, chunk), raw in zip(order, self._run(calls)):
                pos = 0
                for i in chunk:
                    verdicts[i][t], pos = _verdict(raw, pos, fps[i], found, i)
            give_back: list[tuple[int, int]] = []  # (index, table) reservations to release
            waiting = False
            admitted = []
            for i, vs in verdicts.items():
                held = [t for t, v in vs.items() if v == 0]
                if i in found:  # a duplicate: give back everything, earlier rounds' too
                    give_back += [(i, t) for t in range(start[i])] + [(i, t) for t in held]
                    del start[i]
                    continue
                stuck = min((t for t, v in vs.items() if v == 2), default=None)
                if stuck is None:
                    admitted.append(i)
                    del start[i]
                else:
                    give_back += [(i, t) for t in held if t > stuck]
                    start[i] = stuck
                    waiting = True
            if give_back:
                self._release(fps, give_back, where)
            self._commit(fps, keys, where, sorted(admitted))
            if waiting:
                if waited > 4 * self.lease:
                    raise StoreError(f"the Redis store at {self.location}: a reservation did not clear in "
                                     f"{waited:.0f} s")
                time.sleep(pause * (0.5 + random.random()))
                waited += pause
                pause = min(pause * 2, 0.05)
        return found

    def _check_and_commit(self, fps: list[int], keys: Sequence[str], where: tuple,
                          idx: list[int]) -> dict[int, dict[int, int]]:
        """On one Redis: read and scan the buckets here, then check what was
        committed since and commit, all tables in one Lua step per chunk
        (``redis_scripts.CHECK_AND_COMMIT``). Returns the duplicates' neighbours."""
        seen, found = self._read(fps, where, idx)
        todo = [i for i in idx if i not in found]
        calls, order = [], []
        for c in range(0, len(todo), CHUNK):
            chunk = todo[c : c + CHUNK]
            calls.append((scripts.CHECK_AND_COMMIT, [where[1][0][chunk[0]]], [
                str(self.max_distance), str(self.T), b"".join(where[2][i] for i in chunk),
                " ".join(where[1][t][i] for i in chunk for t in range(self.T)),
                " ".join(map(str, seen[:, chunk].T.ravel().tolist())),
                b"".join(where[3][i].to_bytes(8, "big") for i in chunk), *(keys[i].encode("utf-8") for i in chunk)]))
            order.append(chunk)
        for chunk, raw in zip(order, self._run(calls) if calls else []):
            pos = 0
            for i in chunk:  # "1": committed by another process since the read
                _, pos = _verdict(raw, pos, fps[i], found, i)
        return found

    def _read(self, fps: list[int], where: tuple, idx: list[int]) -> tuple[np.ndarray, dict[int, dict[int, int]]]:
        """Read the T buckets of ``idx`` (one pipelined round of MGETs, one per
        slot chunk) and scan them here, with numpy. Returns (the bucket lengths
        read, (T, len(fps)) by batch index, {index: {stored fingerprint within k:
        distance}} for those with a committed neighbour)."""
        commands, order = [], []
        for t in range(self.T):
            for chunk in self._group(where[0][t], idx):
                commands.append(("MGET", *(where[1][t][i] for i in chunk)))
                order.append((t, chunk))
        seen = np.zeros((self.T, len(fps)), dtype=np.int64)
        blobs, owners, counts = [], [], []
        for (t, chunk), values in zip(order, self._pipe(commands)):
            values = [v or b"" for v in values]
            sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
            seen[t, chunk] = sizes
            blobs += values
            owners.append(np.array(chunk, dtype=np.int64))
            counts.append(sizes // 8)
        found: dict[int, dict[int, int]] = {}
        stored = np.frombuffer(b"".join(blobs), dtype=">u8").astype(np.uint64)
        if len(stored):
            owner = np.repeat(np.concatenate(owners), np.concatenate(counts))
            dist = np.bitwise_count(stored ^ np.array(fps, dtype=np.uint64)[owner])
            for j in np.flatnonzero(dist <= self.max_distance).tolist():
                found.setdefault(int(owner[j]), {})[int(stored[j])] = int(dist[j])
        return seen, found

    def _release(self, fps: list[int], pairs: list[tuple[int, int]], where: tuple) -> None:
        """Give back reservations, given as (batch index, table)."""
        by_table: dict[int, list[int]] = defaultdict(list)
        for i, t in pairs:
            by_table[t].append(i)
        calls = [c for t, idx in by_table.items()
                 for c in self._calls(scripts.RELEASE, t, idx, fps, where, [self.token])[0]]
        if calls:
            self._run(calls)

    # -- reading ----------------------------------------------------------------

    def _candidates(self, arr: np.ndarray) -> list[dict[int, int]]:
        """For each query, the stored fingerprints within k: {fingerprint: distance}."""
        _, found = self._read(arr.tolist(), self._names(self.layout.prefixes(arr), arr), list(range(len(arr))))
        return [found.get(i, {}) for i in range(len(arr))]

    def _records_of(self, values: Iterable[int]) -> dict[int, list[tuple[int, str]]]:
        """{fingerprint: [(seq, key), ...] oldest first} for stored fingerprints:
        each fingerprint's field in its table-0 records hash (one Lua call per
        slot chunk: ``redis_scripts.RECORDS``)."""
        values = sorted(set(values))
        if not values:
            return {}
        arr = np.array(values, dtype=np.uint64)
        tags, names, fp8s = self._names(self.layout.prefixes(arr)[:1], arr)
        calls, order = [], []
        for chunk in self._group(tags[0], range(len(values))):
            recs = [names[0][i] + ":r" for i in chunk]
            calls.append((scripts.RECORDS, [recs[0]], [b"".join(fp8s[i] for i in chunk), " ".join(recs)]))
            order.append(chunk)
        out: dict[int, list[tuple[int, str]]] = {}
        for chunk, raw in zip(order, self._run(calls)):
            pos = 0
            for i in chunk:
                size = int.from_bytes(raw[pos : pos + 4], "big")
                if size:
                    out[values[i]] = _entries(raw[pos + 4 : pos + 4 + size])
                pos += 4 + size
        return out

    def _matches(self, arr: np.ndarray) -> list[list[Any]]:
        return self._ranked(self._candidates(arr))

    def query(self, fp: int) -> list[Any]:
        """Every stored record within ``max_distance`` of ``fp``, nearest first
        (ties by age). Two pipelined round trips."""
        return self._matches(self._array([fp]))[0]

    def query_many(self, fps: Iterable[int] | np.ndarray) -> list[list[Any]]:
        arr = self._array(fps)
        return self._matches(arr) if len(arr) else []

    def _pipe(self, commands: Sequence[tuple]) -> list[Any]:
        """Run Redis commands (``("MGET", key, ...)``), pipelined (redis-py sends
        each to its slot's node)."""
        if not commands:
            return []

        def go(client):
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return pipe.execute()
        return self._call(go)

    def _each(self, command: str, names: Sequence[Any]) -> list[Any]:
        """One command (``"GET"``, ``"HGETALL"``, ``"DEL"``) on each key, pipelined."""
        return self._pipe([(command, name) for name in names])

    def _scan(self, pattern: str) -> list[bytes]:
        def scan(client):
            return list(client.scan_iter(match=pattern, count=1000))
        return self._call(scan)

    def _all_records(self) -> list[tuple[int, int, str]]:
        """(seq, fingerprint, key) of every record, oldest first."""
        out = []
        for rec in self._each("HGETALL", self._scan(f"{{{self.name}:0.*}}:b:*:r")):
            for field, raw in _pairs(rec):
                fp = int.from_bytes(field, "big")
                out += [(seq, fp, key) for seq, key in _entries(raw)]
        out.sort()
        return out

    def fingerprints(self) -> np.ndarray:
        """All stored fingerprints, oldest first (uint64 array). Scans the store."""
        return np.array([fp for _, fp, _ in self._all_records()], dtype=np.uint64)

    def pairs(self) -> Iterator[tuple[str, str, int]]:
        """Every stored pair within ``max_distance``, each once (the batch
        self-join, run locally over a copy of the fingerprints)."""
        from .store import SimhashStore

        records = self._all_records()
        with SimhashStore.open(None, max_distance=self.max_distance, layout=self.layout) as local:
            local.add_many(np.array([fp for _, fp, _ in records], dtype=np.uint64), [k for _, _, k in records])
            yield from local.pairs()

    def __len__(self) -> int:
        return sum(int(x or 0) for x in self._each("GET", [self._count_key(s) for s in range(self.shards)]))

    def check_invariants(self) -> None:
        """Raise unless every record's fingerprint is in its bucket of every
        table exactly as often as it has records, nothing else is in a bucket,
        and the counts add up. Scans the store (for tests)."""
        records = self._all_records()
        want = defaultdict(int)
        for _, fp, _ in records:
            want[fp] += 1
        if len(self) != len(records):
            raise AssertionError(f"counts say {len(self)} records, {len(records)} found")
        fps = np.array(sorted(want), dtype=np.uint64)
        prefixes = self.layout.prefixes(fps)
        for t in range(self.T):
            names = [n for n in self._scan(f"{{{self.name}:{t}.*}}:b:*") if not n.endswith((b":p", b":r"))]
            seen = defaultdict(int)
            for name, raw in zip(names, self._each("GET", names)):
                for v in np.frombuffer(raw or b"", dtype=">u8").tolist():
                    seen[v] += 1
                    i = int(np.searchsorted(fps, np.uint64(v)))
                    if i >= len(fps) or int(fps[i]) != v:
                        raise AssertionError(f"table {t}: {v:016x} in {name!r} has no record")
                    if name.decode() != self._bucket(t, int(prefixes[t, i])):
                        raise AssertionError(f"table {t}: {v:016x} in the wrong bucket {name!r}")
            if dict(seen) != dict(want):
                raise AssertionError(f"table {t} holds other fingerprints than the records")

    def refresh(self) -> int:
        """Nothing to load: every call reads the shared store."""
        return 0

    def flush(self) -> None:
        """Nothing pending: each call is committed on the server when it returns
        (durable as the server's persistence is: appendonly yes)."""

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
            if self.client is not None:
                self.client.close()
                self.client = None

    def __enter__(self) -> RedisSimhashStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop(self) -> int:
        """Delete every key of this store (for tests and benchmarks). Returns how many."""
        return sum(self._each("DEL", self._scan(f"{{{self.name}:*") + [self.meta_key.encode()]))
