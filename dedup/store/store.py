"""``SimhashStore``: "is any stored page within k bits of this one?", exactly.

>>> with SimhashStore.open(None, max_distance=3) as store:
...     store.check_and_add(0xF0F0, "a") is None
...     store.check_and_add(0xF0F1, "b")
True
Match(key='a', fingerprint=61680, distance=1)

Every answer equals an exhaustive Hamming scan's (tested against one).
Costs, n stored with T tables of p-bit prefixes: ``query``/``check_and_add``
O(T (log n + n / 2**p)); ``add`` amortised O(T) element moves; ``pairs``
O(n T log n + pairs); memory ``layout.bytes_per_fingerprint()`` bytes per
fingerprint (keys stay in the backend).

Durability (``SimhashStore.open(path)``): records are written to SQLite in
group commits, every ``commit_every`` adds or ``commit_interval`` seconds
(checked on each add), on ``flush()`` and on ``close()``. A committed record
survives a crash of the process (and power loss with ``fsync=True``); at most
the last group may be lost to a crash. Snapshots of the sorted tables are a
cache: a missing or stale one is rebuilt from the records.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from .backends import Backend, MemoryBackend, SQLiteBackend, StoreError, check_keys
from .layout import Layout
from .match import Match
from .meta import settle_meta
from .redis import RedisSimhashStore, is_redis_url
from .self_join import PairGraph
from .tables import PermutedTables

DEFAULT_CAPACITY = 1_000_000


def _as_u64(fp: int) -> int:
    fp = int(fp)
    if not 0 <= fp < 1 << 64:
        raise ValueError(f"fingerprint must be an unsigned 64-bit integer, got {fp}")
    return fp


def _damaged(location: str, exc: Exception) -> StoreError:
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text:
        return StoreError(f"the store at {location} cannot be written: it is read-only ({exc})")
    if "disk is full" in text:
        return StoreError(f"the store at {location} cannot be written: the disk is full ({exc})")
    return StoreError(f"the store at {location} is damaged and cannot be read ({exc}); "
                      "restore it from a copy, or move it away to start a new one")


class SimhashStore:
    """Permuted-table simhash store over a pluggable backend. Thread-safe."""

    def __init__(self, backend: Backend, layout: Layout, *, scheme: str | None, commit_every: int,
                 commit_interval: float, readonly: bool = False, compiled: bool | None = None) -> None:
        self.backend = backend
        self.layout = layout
        self.max_distance = layout.k
        self.scheme = scheme
        self.readonly = readonly
        self.commit_every = commit_every
        self.commit_interval = commit_interval
        self._lock = threading.RLock()
        self._last_commit = time.monotonic()
        self._since_commit = 0
        self.tables = PermutedTables(layout, compiled=compiled)
        if backend.durable and not readonly:
            self.tables.on_main_merged = self._snapshot  # type: ignore[method-assign]
        self._load()

    # -- opening --------------------------------------------------------------

    @classmethod
    def open(cls, location: str | os.PathLike[str] | None = None, *, max_distance: int = 3,
             capacity: int = DEFAULT_CAPACITY, scheme: str | None = None, layout: Layout | None = None,
             readonly: bool = False, commit_every: int = 1000, commit_interval: float = 0.2,
             fsync: bool = False, compiled: bool | None = None) -> SimhashStore:
        """Open or create a store.

        ``location``: None for an in-memory store; a directory path for the
        embedded persistent store; ``redis://[:password@]host:port/db?prefix=NAME``
        (or ``rediss://``, or a cluster node's URL) for a store many processes
        share (``store.redis``: same API, same answers). ``capacity``
        (expected fingerprints) picks the table layout when the store is
        created; an existing store keeps its own. ``scheme`` names how fingerprints were made; a store refuses
        to open under another scheme, ``max_distance`` or ``layout``.
        ``compiled``: use the compiled table kernels always (True), never
        (False: exhaustive scans, for tests), or once ``dedup.jit`` says they
        are ready (None, the default; in a plain process, at once).
        """
        loc = ":memory:" if location is None else os.fspath(location)
        if location is None:
            backend: Backend = MemoryBackend()
        else:
            if is_redis_url(loc):  # shared by many processes: the tables live on the server
                if fsync:
                    raise StoreError("fsync is the Redis server's setting (appendfsync), not the store's")
                return RedisSimhashStore(loc, max_distance=max_distance, capacity=capacity,  # type: ignore[return-value]
                                         scheme=scheme, layout=layout, readonly=readonly)
            try:
                backend = SQLiteBackend(loc, readonly=readonly, fsync=fsync)
            except sqlite3.DatabaseError as exc:
                raise _damaged(loc, exc) from exc
            except OSError as exc:  # read-only, no space, no permission: say which and where
                raise StoreError(f"cannot open the store at {loc}: {exc.strerror or exc}") from exc
        try:
            lay = settle_meta(backend, max_distance, capacity, scheme, layout, readonly)
            meta = backend.read_meta()
            return cls(backend, lay, scheme=meta.get("scheme") or scheme, commit_every=commit_every,
                       commit_interval=commit_interval, readonly=readonly, compiled=compiled)
        except sqlite3.DatabaseError as exc:
            backend.close()
            raise _damaged(loc, exc) from exc
        except BaseException:
            backend.close()
            raise

    def _load(self) -> None:
        snap = self.backend.load_snapshot(self.layout.n_tables)
        start = 0
        if snap is not None:
            self.tables.load_main(*snap)
            start = snap[0].shape[1]
        tail = self.backend.fingerprints_from(start)
        if len(tail):
            self.tables.add_many(tail)
        if len(self.tables) != self.backend.count():
            raise StoreError(f"store holds {self.backend.count()} records but {len(self.tables)} loaded")

    def refresh(self) -> int:
        """Read-only stores: load records another process added since. Returns how many."""
        with self._lock:
            if not isinstance(self.backend, SQLiteBackend):
                return 0
            before = len(self.tables)
            self.backend.refresh_count()
            tail = self.backend.fingerprints_from(before)
            if len(tail):
                self.tables.add_many(tail)
            return len(tail)

    # -- writing --------------------------------------------------------------

    def _check_open(self) -> None:
        if self.backend is None:
            raise StoreError("the store is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise StoreError("store opened read-only")

    def add(self, fp: int, key: str) -> None:
        """Store one fingerprint under ``key``. O(T) amortised."""
        fp = _as_u64(fp)
        check_keys((key,))
        with self._lock:
            self._add(fp, key)

    def _add(self, fp: int, key: str) -> None:
        """``add`` of a checked fingerprint and key, under the lock."""
        self._check_writable()
        self.backend.append_one(len(self.tables), fp, key)
        self.tables.add(fp)
        self._after_add(1)

    def add_many(self, fps: Iterable[int] | np.ndarray, keys: Sequence[str]) -> None:
        """Store many fingerprints at once (sorted in bulk)."""
        arr = np.asarray(fps if isinstance(fps, np.ndarray) else list(fps), dtype=np.uint64)
        if len(arr) != len(keys):
            raise ValueError(f"{len(arr)} fingerprints but {len(keys)} keys")
        check_keys(keys)
        with self._lock:
            self._check_writable()
            self.backend.append(len(self.tables), arr, keys)
            self.tables.add_many(arr)
            self._after_add(len(arr))

    def _after_add(self, n: int) -> None:
        self._since_commit += n
        now = time.monotonic()
        if self._since_commit >= self.commit_every or now - self._last_commit >= self.commit_interval:
            self.backend.commit()
            self._since_commit = 0
            self._last_commit = now

    def check_and_add(self, fp: int, key: str) -> Match | None:
        """The nearest stored match within ``max_distance`` (ties: the oldest
        record), or None after storing ``fp`` under ``key``: one atomic step."""
        fp = _as_u64(fp)
        check_keys((key,))
        with self._lock:
            self._check_open()
            found = self.tables.nearest(fp)
            if found is None:
                self._add(fp, key)
                return None
            return self._match(*found)

    def _match(self, distance: int, value: int) -> Match:
        return Match(self.backend.keys([self.tables.first_row(value)])[0], value, distance)

    def check_and_add_many(self, fps: Iterable[int] | np.ndarray, keys: Sequence[str]) -> list[Match | None]:
        """``check_and_add`` for each of a batch, in order (a later fingerprint
        can match an earlier one of the same batch), in compiled code."""
        arr = np.asarray(fps if isinstance(fps, np.ndarray) else list(fps), dtype=np.uint64)
        if len(arr) != len(keys):
            raise ValueError(f"{len(arr)} fingerprints but {len(keys)} keys")
        check_keys(keys)
        with self._lock:
            self._check_writable()
            first = len(self.tables)
            dist, vals = self.tables.check_and_add_many(arr)
            added = np.flatnonzero(dist < 0)
            self.backend.append(first, arr[added], [keys[i] for i in added.tolist()])
            self._after_add(len(added))
            out: list[Match | None] = [None] * len(arr)
            hit = np.flatnonzero(dist >= 0)
            rows = self.tables.first_rows(vals[hit])
            keys_found = self.backend.keys(rows.tolist())
            for i, key, d, v in zip(hit.tolist(), keys_found, dist[hit].tolist(), vals[hit].tolist()):
                out[i] = Match(key, v, d)
            return out

    def flush(self) -> None:
        """Commit pending records (durable from here on)."""
        with self._lock:
            self._check_open()
            if not self.readonly:
                self.backend.commit()
                self._since_commit = 0
                self._last_commit = time.monotonic()

    def _snapshot(self) -> None:
        self.backend.save_snapshot(self.tables.main, self.tables.main_ids)

    def close(self) -> None:
        """Commit, snapshot the tables (so the next open is fast), release the store."""
        with self._lock:
            if self.backend is None:
                return
            try:
                if not self.readonly:
                    self.backend.commit()
                    # (not while the kernels are not ready: the records are committed,
                    # and the snapshot is only a cache; the next open rebuilds it)
                    if self.backend.durable and len(self.tables) > self.tables.n_main and self.tables.use_kernels():
                        self.tables.compact()  # merges main, which snapshots
            finally:
                self.backend.close()
                self.backend = None  # type: ignore[assignment]

    def abandon(self) -> None:
        """Release the store without a commit or a snapshot: for a store its user refuses as it is (a crawl's
        resume that finds it holds fewer fingerprints than recorded), which must be left as it was found. O(1)."""
        with self._lock:
            if self.backend is not None:
                self.backend.close()
                self.backend = None  # type: ignore[assignment]

    def __enter__(self) -> SimhashStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.tables)

    # -- reading --------------------------------------------------------------

    def _matches_for(self, fp: int, values: np.ndarray) -> list[Match]:
        found: list[tuple[int, int, int]] = []  # (distance, row, value)
        for v in values.tolist():
            d = (fp ^ v).bit_count()
            found.extend((d, r, v) for r in self.tables.rows_of(v))
        found.sort()
        keys = self.backend.keys([r for _, r, _ in found])
        return [Match(k, v, d) for (d, _, v), k in zip(found, keys)]

    def query(self, fp: int) -> list[Match]:
        """Every stored record within ``max_distance`` of ``fp``, nearest first (ties by age)."""
        fp = _as_u64(fp)
        with self._lock:
            self._check_open()
            return self._matches_for(fp, self.tables.matches(fp))

    def query_many(self, fps: Iterable[int] | np.ndarray) -> list[list[Match]]:
        """``query`` for each fingerprint of a batch (e.g. a uint64 array)."""
        arr = np.asarray(fps if isinstance(fps, np.ndarray) else list(fps), dtype=np.uint64)
        with self._lock:
            self._check_open()
            return [self._matches_for(int(q), self.tables.matches(int(q))) for q in arr]

    def pair_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every pair of records within ``max_distance``, each once, as row arrays (a < b)."""
        with self._lock:
            return self.tables.row_pairs()

    def pair_graph(self) -> PairGraph:
        """Every pair within ``max_distance`` with exact copies collapsed, as row
        numbers (``PermutedTables.pair_graph``): its size does not grow with copies."""
        with self._lock:
            return self.tables.pair_graph()

    def pairs(self) -> Iterator[tuple[str, str, int]]:
        """Yield ``(key_a, key_b, distance)`` for every stored pair within
        ``max_distance``, each pair once (the batch self-join). Exact copies are
        expanded as the pairs are taken, a chunk at a time, so memory stays
        bounded however many copies a value has (their pairs are quadratic)."""
        with self._lock:
            chunks = self.tables.iter_row_pairs()
            # (many rows: every key in one query rather than one look-up per chunk)
            all_keys = (self.backend.all_keys()
                        if isinstance(self.backend, SQLiteBackend) and chunks.rows > len(self.tables) // 8 else None)
        for ra, rb, dd in chunks:
            if all_keys is not None:
                lookup = all_keys.__getitem__
            else:
                rows = np.unique(np.concatenate([ra, rb])).tolist()
                with self._lock:
                    lookup = dict(zip(rows, self.backend.keys(rows))).__getitem__
            for a, b, d in zip(ra.tolist(), rb.tolist(), dd.tolist()):
                yield lookup(a), lookup(b), d

    def fingerprints(self) -> np.ndarray:
        """All stored fingerprints in insertion order (uint64 array)."""
        with self._lock:
            return self.tables.all_fingerprints()

    def check_invariants(self) -> None:
        """Raise unless the tables are consistent with each other and the backend."""
        with self._lock:
            self.tables.check_invariants()
            if len(self.tables) != self.backend.count():
                raise AssertionError(f"{len(self.tables)} in tables, {self.backend.count()} in backend")
            stored = self.backend.fingerprints_from(0)
            if len(stored) and not np.array_equal(stored, self.tables.all_fingerprints()[: len(stored)]):
                raise AssertionError("tables disagree with the backend's records")
