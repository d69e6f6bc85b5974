"""``RedisSimhashStore``: ``SimhashStore``'s API on Redis, shared by many processes.

Opening (the URL's parameters, the connection, the metadata under the same
rules as the embedded store's), the public calls, and the plan of a batch:
its sequence numbers and its *waves*, each admitted by the path of the
server it talks to (``single`` on one Redis, ``cluster`` on a Redis
Cluster). See the package's docstring for the layout and the costs.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..backends import StoreError, check_keys
from ..layout import Layout
from ..match import Match
from ..meta import StoreMismatchError, settle_meta
from ..tables import PermutedTables
from . import cluster, invariants, records, scripts, single
from .buckets import commit, read
from .connection import Connection, connect
from .keys import REDIS_FORMAT, KeySpace, meta_key
from .url import cluster_flag, redact, split_url

#: Low bits of a record's sequence number that are its store's (``RedisSimhashStore._seqs``)
SEQ_TAG_BITS = 12

DEFAULT_SHARDS = 64
DEFAULT_LEASE = 30.0
OVERLAP_MIN = 200  # a batch (wave) this big is admitted in two halves at once, from two threads (one Redis)


class _Meta:
    """The store's metadata hash, as ``meta.settle_meta`` reads it."""

    def __init__(self, store: RedisSimhashStore) -> None:
        self.store = store
        self.path = store.location

    def read_meta(self) -> dict[str, str]:
        raw = self.store.connection.call(lambda c: c.hgetall(self.store.meta_key))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def write_meta(self, meta: dict[str, str]) -> None:
        if "format" in meta:  # creating: the first process to get here sets the layout and shards
            meta = {**meta, "redis_format": REDIS_FORMAT, "shards": str(self.store.shards)}
            args = [x for kv in meta.items() for x in kv]
            self.store.connection.call(lambda c: c.eval(scripts.INIT_META, 1, self.store.meta_key, *args))
        else:
            self.store.connection.call(lambda c: c.hset(self.store.meta_key, mapping=meta))


class RedisSimhashStore:
    """``SimhashStore``'s API on Redis. Thread-safe; many processes share one."""

    durable = True

    def __init__(self, url: str, *, max_distance: int = 3, capacity: int = 1_000_000, scheme: str | None = None,
                 layout: Layout | None = None, readonly: bool = False, timeout: float = 5.0) -> None:
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
        client, self.cluster = connect(redis_url, cluster=cluster_flag(own.get("cluster")), timeout=timeout)
        self.connection = Connection(client, self.location)
        self.meta_key = meta_key(self.name)
        self.token = uuid.uuid4().hex  # this store's reservations
        self._last_seq = 0  # (in microseconds: ``_seqs``)
        self._seq_tag = 0  # (this store's low bits of its sequence numbers: counted at open, for a store that writes)
        self._seq_lock = threading.Lock()
        self._lock = threading.RLock()
        self._pool: ThreadPoolExecutor | None = None
        try:
            meta = _Meta(self)
            self.layout = settle_meta(meta, max_distance, capacity, scheme, layout, readonly)
            if not readonly:  # (a number of its own among the next 4096 stores opened: a random one met
                # another's once in 4096 pairs, and two stores storing one URL in one microsecond both kept it)
                opened = self.connection.call(lambda c: c.hincrby(self.meta_key, "opened", 1))
                self._seq_tag = int(opened) % (1 << SEQ_TAG_BITS)
            stored = meta.read_meta()  # (another process may have created it first)
            if stored.get("redis_format") != REDIS_FORMAT:
                raise StoreMismatchError(f"the Redis store at {self.location} has key format "
                                         f"{stored.get('redis_format', '1')}, this version reads {REDIS_FORMAT}")
            self.layout = Layout.from_json(stored["layout"])
            self.shards = int(stored["shards"])
            self.scheme = stored.get("scheme") or scheme
        except BaseException:
            self.connection.close()
            raise
        self.keyspace = KeySpace(self.name, self.shards, self.cluster)
        self.max_distance = self.layout.k
        self.T = self.layout.n_tables

    @property
    def client(self) -> Any:
        """The redis-py client (None once closed)."""
        return self.connection.client

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
        clock, strictly increasing in this store (no shared counter: a hot key
        on one node), above ``SEQ_TAG_BITS`` bits of this store's (a count of the stores
        opened, so 4096 stores opened one after another differ there). They order
        records by age, across processes as far as the machines' clocks agree. The
        bits tell two stores' records apart when both draw the same microsecond:
        ``_admit`` takes a record of the call's own number and key for the call's own
        (two processes storing one URL and fingerprint at once would each have taken the
        other's record for its own, and both emitted the page). Records written
        before the bits were added are all older than those after. O(1).

        >>> SEQ_TAG_BITS, (time.time_ns() // 1000) << SEQ_TAG_BITS < 1 << 63
        (12, True)
        """
        with self._seq_lock:
            first = max(self._last_seq + 1, time.time_ns() // 1000)
            self._last_seq = first + n - 1
        step = 1 << SEQ_TAG_BITS
        return range(first * step | self._seq_tag, (first + n) * step, step)

    def _where(self, arr: np.ndarray, prefixes: np.ndarray) -> tuple:
        """What writing a batch needs of each fingerprint: ``KeySpace.names``, and its
        sequence number, drawn once for the batch so records keep its order."""
        return *self.keyspace.names(prefixes, arr), self._seqs(len(arr))

    def add(self, fp: int, key: str) -> None:
        """Store ``fp`` under ``key`` without a check. T + 1 server steps."""
        self.add_many([fp], [key])

    def add_many(self, fps: Iterable[int] | np.ndarray, keys: Sequence[str]) -> None:
        arr = self._array(fps)
        if len(arr) != len(keys):
            raise ValueError(f"{len(arr)} fingerprints but {len(keys)} keys")
        check_keys(keys)
        with self._lock:
            self._check_writable()
            where = self._where(arr, self.layout.prefixes(arr))
            commit(self, keys, where, list(range(len(arr))))

    def check_and_add(self, fp: int, key: str) -> Match | None:
        """The nearest stored match within ``max_distance`` (ties: the oldest
        record), or None after storing ``fp`` under ``key``; atomic across
        every process sharing the store."""
        return self.check_and_add_many([fp], [key])[0]

    def check_and_add_many(self, fps: Iterable[int] | np.ndarray, keys: Sequence[str]) -> list[Match | None]:
        """``check_and_add`` for each of a batch, in order, pipelined."""
        arr = self._array(fps)
        if len(arr) != len(keys):
            raise ValueError(f"{len(arr)} fingerprints but {len(keys)} keys")
        check_keys(keys)
        with self._lock:
            self._check_writable()
            out: list[Match | None] = [None] * len(arr)
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

    def _helper(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="neardup-redis")
        return self._pool

    def _admit(self, values: list[int], keys: Sequence[str], where: tuple, idx: list[int]) -> dict[int, Match]:
        """Check and add ``idx`` (no two within k of each other): {index: its
        nearest match} for the duplicates; the others are stored."""
        if self.cluster:  # one slot per step: reserve the tables, then commit
            found = cluster.reserve(self, values, keys, where, idx)
        else:  # one Redis: check and commit all tables in one step
            found = single.check_and_commit(self, values, keys, where, idx)
        if not found:
            return {}
        dups = sorted(found)
        got = dict(zip(dups, records.nearest(self, [found[i] for i in dups])))
        # a record this process half-committed before an outage: finish it
        mine = [i for i in dups if got[i].fingerprint == values[i] and got[i].key == keys[i]]
        commit(self, keys, where, mine, repair=True)
        if mine:
            # one with this very call's sequence number is this call's own: redis-py sent a step again after
            # losing the answer of one that had committed (a connection cut, a timeout). Stored, not a match
            # (taken for a duplicate of itself, a page was stored and never emitted); one of an earlier call,
            # the same key stored before, stays a match
            held = records.records_of(self, [values[i] for i in mine])
            for i in mine:
                if (where[3][i], keys[i]) in held.get(values[i], ()):
                    del got[i]
        return got

    # -- reading ----------------------------------------------------------------

    def _matches(self, arr: np.ndarray) -> list[list[Match]]:
        """For each query, every stored record within k, nearest first."""
        _, found = read(self, arr.tolist(), self.keyspace.names(self.layout.prefixes(arr), arr), list(range(len(arr))))
        return records.ranked(self, [found.get(i, {}) for i in range(len(arr))])

    def query(self, fp: int) -> list[Match]:
        """Every stored record within ``max_distance`` of ``fp``, nearest first
        (ties by age). Two pipelined round trips."""
        return self._matches(self._array([fp]))[0]

    def query_many(self, fps: Iterable[int] | np.ndarray) -> list[list[Match]]:
        arr = self._array(fps)
        return self._matches(arr) if len(arr) else []

    def fingerprints(self) -> np.ndarray:
        """All stored fingerprints, oldest first (uint64 array). Scans the store."""
        return np.array([fp for _, fp, _ in records.all_records(self)], dtype=np.uint64)

    def pairs(self) -> Iterator[tuple[str, str, int]]:
        """Every stored pair within ``max_distance``, each once (the batch
        self-join, run locally over a copy of the fingerprints, in permuted
        tables of the store's layout, as the embedded store runs it)."""
        recs = records.all_records(self)
        keys = [k for _, _, k in recs]
        local = PermutedTables(self.layout)
        local.add_many(np.array([fp for _, fp, _ in recs], dtype=np.uint64))
        for ra, rb, dd in local.iter_row_pairs():  # (copies expanded a chunk at a time: bounded memory)
            for a, b, d in zip(ra.tolist(), rb.tolist(), dd.tolist()):
                yield keys[a], keys[b], d

    def __len__(self) -> int:
        return sum(int(x or 0) for x in self.connection.each("GET", [self.keyspace.count_key(s)
                                                                     for s in range(self.shards)]))

    def check_invariants(self) -> None:
        """Raise unless the buckets agree with the records (``invariants``). Scans the store (for tests)."""
        invariants.check_invariants(self)

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
            self.connection.close()

    def __enter__(self) -> RedisSimhashStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop(self) -> int:
        """Delete every key of this store (for tests and benchmarks). Returns how many."""
        return sum(self.connection.each("DEL", self.connection.scan(self.keyspace.every_pattern())
                                        + [self.meta_key.encode()]))
