"""The permuted tables in memory: exact Hamming-k search with online inserts.

Records are numbered 0, 1, 2, ... in insertion order (the *row*). Every table
holds all fingerprints permuted its way, in three levels, each newer than
the one before:

* ``main``: sorted arrays (tables x N), rows [0, N);
* ``delta``: sorted arrays (tables x D), rows [N, N + D);
* ``buf``: raw unsorted fingerprints, rows [N + D, n), scanned exhaustively.

Table 0's permutation is the identity, and its levels carry the row ids
(uint32), so a matched fingerprint maps to its rows by binary search there.

Until this process may run the compiled kernels (``dedup.jit``: a crawl
warms them in the background), nothing is merged: adds stay in the buffer,
main's directory waits, and a probe is an exhaustive Hamming scan with numpy
over every level (exact, the tests' oracle; ~1 ms per million fingerprints).
The first call after the kernels are ready sorts the buffer in.

Costs (n stored, T tables, p-bit prefixes): probe O(T (log n + n / 2**p) +
B) with B <= ``buffer_size``; insert amortised O(T (B + n / merge_ratio) /
B) element moves, merges done in compiled code; memory 8 T + 4 bytes per
fingerprint plus main's prefix directory (about 2 bytes; ``Layout.bytes_per_fingerprint``).

>>> from scrapy_neardup.dedup.store.layout import choose_layout
>>> t = PermutedTables(choose_layout(3, 1000))
>>> t.add(0b1011)
0
>>> t.nearest(0b0011)
(1, 11)
>>> t.check_invariants()
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import jit
from . import kernels as K
from .layout import FP_BITS, Layout
from .self_join import PairGraph

DEFAULT_BUFFER = 512


class InvariantError(AssertionError):
    pass


class PermutedTables:
    def __init__(self, layout: Layout, *, buffer_size: int = DEFAULT_BUFFER, merge_ratio: int = 8,
                 compiled: bool | None = None) -> None:
        """``compiled``: always use the compiled kernels (True), never (False),
        or once ``jit.ready("store")`` (None)."""
        self.layout = layout
        self.compiled = compiled
        self.directory: np.ndarray | None = None
        self.dbits = 0
        self.k = layout.k
        self.T = layout.n_tables
        self.src, self.dst, self.mask = layout.shift_arrays()
        # per table: shift below the prefix
        self.shifts = np.array([FP_BITS - layout.prefix_bits(t) for t in range(self.T)], dtype=np.int64)
        self.block_masks = layout.block_masks()
        self.first_clean = layout.first_clean_table()
        self.buffer_size = buffer_size
        self.merge_ratio = merge_ratio
        self.main = np.empty((self.T, 0), dtype=np.uint64)
        self.main_ids = np.empty(0, dtype=np.uint32)
        self.delta = np.empty((self.T, 0), dtype=np.uint64)
        self.delta_ids = np.empty(0, dtype=np.uint32)
        self.buf = np.empty(buffer_size, dtype=np.uint64)
        self.nbuf = 0
        self._out = np.empty(64, dtype=np.uint64)
        self._args: tuple | None = None
        self._index_main()

    # -- size -----------------------------------------------------------------

    @property
    def n_main(self) -> int:
        return self.main.shape[1]

    def __len__(self) -> int:
        return self.main.shape[1] + self.delta.shape[1] + self.nbuf

    def _levels(self) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        return (self.main, self.delta), np.array([self.main.shape[1], self.delta.shape[1]], dtype=np.int64)

    def _probe_args(self) -> tuple:
        # cached: rebuilt only when main or delta change (the hot path is one probe per page)
        if self._args is None:
            levels, sizes = self._levels()
            self._args = (levels, sizes, self.directory, self.dbits, self.shifts, self.src, self.dst, self.mask)
        return self._args

    def use_kernels(self) -> bool:
        """Whether to use the compiled kernels now; on the first call after
        they became ready, do the work deferred until then."""
        if self.compiled is False or (self.compiled is None and not jit.ready("store")):
            return False
        if self.directory is None:
            self._index_main()
        if len(self.buf) != self.buffer_size:  # grown while deferred: back to its size
            fps = self.buf[: self.nbuf].copy()
            self.buf = np.empty(self.buffer_size, dtype=np.uint64)
            if len(fps) >= self.buffer_size:
                start = len(self) - self.nbuf
                self.nbuf = 0
                self._merge_into_delta(fps, start)
                self._maybe_merge_main(force=len(fps) > self.n_main)
            else:
                self.buf[: len(fps)] = fps
        return True

    def _index_main(self) -> None:
        """Rebuild main's prefix directory: top ``dbits`` bits -> offsets, about
        n/8 entries (2 bytes per fingerprint for 4 tables), so a probe starts
        with one lookup instead of a binary search over all of main. Without
        the kernels, later (``use_kernels``)."""
        self._args = None
        if self.compiled is False or (self.compiled is None and not jit.ready("store")):
            self.directory = None
            return
        n = self.main.shape[1]
        self.dbits = 0 if n < 64 else min(int(np.log2(n)) - 3, self.layout.min_prefix_bits, 28)
        self.directory = K.build_directory(self.main, self.dbits)
        self._args = None

    # -- inserts --------------------------------------------------------------

    def _append_to_buffer(self, fps: np.ndarray) -> None:
        """Append past ``buffer_size`` (only while the kernels are not ready)."""
        need = self.nbuf + len(fps)
        if need > len(self.buf):
            grown = np.empty(max(need, 2 * len(self.buf)), dtype=np.uint64)
            grown[: self.nbuf] = self.buf[: self.nbuf]
            self.buf = grown
        self.buf[self.nbuf : need] = fps
        self.nbuf = need

    def add(self, fp: int) -> int:
        """Insert one fingerprint; returns its row."""
        row = len(self)
        if not self.use_kernels():
            self._append_to_buffer(np.array([fp], dtype=np.uint64))
            return row
        self.buf[self.nbuf] = fp
        self.nbuf += 1
        if self.nbuf == self.buffer_size:
            self._flush_buffer()
        return row

    def add_many(self, fps: np.ndarray) -> None:
        """Insert many fingerprints (rows continue from ``len(self)``); O(m log m + n T)."""
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        if not self.use_kernels():
            self._append_to_buffer(fps)
            return
        if len(fps) < self.buffer_size - self.nbuf:
            self.buf[self.nbuf : self.nbuf + len(fps)] = fps
            self.nbuf += len(fps)
            return
        start = len(self) - self.nbuf
        fps = np.concatenate([self.buf[: self.nbuf], fps])
        self.nbuf = 0
        self._merge_into_delta(fps, start)
        self._maybe_merge_main(force=len(fps) > self.n_main)

    def load_main(self, main: np.ndarray, main_ids: np.ndarray) -> None:
        """Adopt ready main arrays (e.g. a memory-mapped snapshot); must be empty."""
        if len(self):
            raise ValueError("load_main on a non-empty index")
        if main.shape[0] != self.T or main.shape[1] != len(main_ids):
            raise ValueError("snapshot shape does not match the layout")
        self.main, self.main_ids = main, main_ids
        self._index_main()

    def _sorted_level(self, fps: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        m = len(fps)
        level = np.empty((self.T, m), dtype=np.uint64)
        order = np.argsort(fps, kind="stable")
        level[0] = fps[order]
        ids = (order + start).astype(np.uint32)
        for t in range(1, self.T):
            p = K.permute_all(fps, t, self.src, self.dst, self.mask)
            p.sort()
            level[t] = p
        return level, ids

    def _merge_into_delta(self, fps: np.ndarray, start: int) -> None:
        new, new_ids = self._sorted_level(fps, start)
        if self.delta.shape[1] == 0:
            self.delta, self.delta_ids = new, new_ids
            self._args = None
            return
        merged = np.empty((self.T, self.delta.shape[1] + new.shape[1]), dtype=np.uint64)
        merged[0], ids = K.merge_sorted_ids(self.delta[0], self.delta_ids, self.delta.shape[1],
                                           new[0], new_ids, new.shape[1])
        for t in range(1, self.T):
            merged[t] = K.merge_sorted(self.delta[t], self.delta.shape[1], new[t], new.shape[1])
        self.delta, self.delta_ids = merged, ids
        self._args = None

    def _flush_buffer(self) -> None:
        if not self.nbuf:
            return
        start = len(self) - self.nbuf
        fps = self.buf[: self.nbuf].copy()
        self.nbuf = 0
        self._merge_into_delta(fps, start)
        self._maybe_merge_main()

    def _maybe_merge_main(self, force: bool = False) -> bool:
        d = self.delta.shape[1]
        if d == 0 or not (force or d * self.merge_ratio >= max(self.n_main, 1 << 16)):
            return False
        self.merge_main()
        return True

    def merge_main(self) -> None:
        """Move delta into main (O(n T)); the buffer stays."""
        d = self.delta.shape[1]
        if d == 0:
            return
        n = self.n_main
        merged = np.empty((self.T, n + d), dtype=np.uint64)
        merged[0], ids = K.merge_sorted_ids(self.main[0], self.main_ids, n, self.delta[0], self.delta_ids, d)
        for t in range(1, self.T):
            merged[t] = K.merge_sorted(self.main[t], n, self.delta[t], d)
        self.main, self.main_ids = merged, ids
        self._index_main()
        self.delta = np.empty((self.T, 0), dtype=np.uint64)
        self.delta_ids = np.empty(0, dtype=np.uint32)
        self._args = None
        self.on_main_merged()

    def on_main_merged(self) -> None:
        """Hook for owners (the persistent store snapshots main here)."""

    def compact(self) -> None:
        """Everything into main: buffer -> delta -> main."""
        self.use_kernels()
        self._flush_buffer()
        self.merge_main()

    # -- queries --------------------------------------------------------------

    def _scan(self, fp: int) -> tuple[np.ndarray, np.ndarray]:
        """(every stored value, its distance to ``fp``) by an exhaustive scan,
        the path without kernels; values in row order but for main and delta."""
        values = np.concatenate([self.main[0], self.delta[0], self.buf[: self.nbuf]])
        return values, np.bitwise_count(values ^ np.uint64(fp))

    def matches(self, fp: int) -> np.ndarray:
        """Distinct stored fingerprints within k of ``fp`` (uint64 array)."""
        if not self.use_kernels():
            values, dist = self._scan(fp)
            return np.unique(values[dist <= self.k])
        q = np.uint64(fp)
        while True:
            n = K.probe(q, self.k, *self._probe_args(), self.buf, self.nbuf, self._out)
            if n >= 0:
                return self._out[:n].copy()
            self._out = np.empty(self._out.shape[0] * 4, dtype=np.uint64)

    def nearest(self, fp: int) -> tuple[int, int] | None:
        """(distance, fingerprint) of a nearest stored fingerprint within k, or None."""
        if not self.use_kernels():
            values, dist = self._scan(fp)
            if not len(values) or int(dist.min()) > self.k:
                return None
            i = int(np.argmin(dist))
            return int(dist[i]), int(values[i])
        d, v = K.any_within(np.uint64(fp), self.k, *self._probe_args(), self.buf, self.nbuf)
        return None if d < 0 else (int(d), int(v))

    def check_and_add_many(self, fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sequential check-and-add of a batch, compiled end to end.

        Returns (distance, nearest value) per input; distance -1 means the
        fingerprint had no match and was added (rows in input order)."""
        qs = np.ascontiguousarray(fps, dtype=np.uint64)
        out_d = np.full(len(qs), -1, dtype=np.int64)
        out_v = np.zeros(len(qs), dtype=np.uint64)
        if not self.use_kernels():
            for i, q in enumerate(qs.tolist()):
                found = self.nearest(q)
                if found is None:
                    self._append_to_buffer(qs[i : i + 1])
                else:
                    out_d[i], out_v[i] = found
            return out_d, out_v
        i = 0
        while i < len(qs):
            i, self.nbuf = K.check_batch(qs, i, self.k, *self._probe_args(), self.buf, self.nbuf, out_d, out_v)
            if self.nbuf == self.buffer_size:
                self._flush_buffer()
        return out_d, out_v

    def rows_of(self, fp: int) -> list[int]:
        """Rows holding exactly ``fp`` (binary search in table 0, scan of the buffer)."""
        v = np.uint64(fp)
        rows: list[int] = []
        for arr, ids in ((self.main[0], self.main_ids), (self.delta[0], self.delta_ids)):
            lo = np.searchsorted(arr, v, "left")
            hi = np.searchsorted(arr, v, "right")
            rows.extend(int(r) for r in ids[lo:hi])
        base = len(self) - self.nbuf
        rows.extend(base + int(i) for i in np.flatnonzero(self.buf[: self.nbuf] == v))
        return sorted(rows)

    def first_row(self, value: int) -> int:
        """Oldest row holding ``value`` (which must be stored); scalar ``first_rows``."""
        v = np.uint64(value)
        for arr, ids in ((self.main[0], self.main_ids), (self.delta[0], self.delta_ids)):
            pos = int(np.searchsorted(arr, v, "left"))
            if pos < len(arr) and arr[pos] == v:
                return int(ids[pos])
        hits = np.flatnonzero(self.buf[: self.nbuf] == v)
        if not len(hits):
            raise KeyError(value)
        return len(self) - self.nbuf + int(hits[0])

    def first_rows(self, values: np.ndarray) -> np.ndarray:
        """Oldest row holding each value (all must be stored), vectorised.

        Rows grow main < delta < buffer, and table 0 keeps equal values in row
        order, so the first hit in the oldest level is the oldest row."""
        values = np.ascontiguousarray(values, dtype=np.uint64)
        out = np.full(len(values), -1, dtype=np.int64)
        for arr, ids in ((self.main[0], self.main_ids), (self.delta[0], self.delta_ids)):
            if not len(arr):
                continue
            todo = np.flatnonzero(out < 0)
            pos = np.searchsorted(arr, values[todo], "left")
            ok = pos < len(arr)
            ok[ok] = arr[pos[ok]] == values[todo[ok]]
            out[todo[ok]] = ids[pos[ok]]
        todo = np.flatnonzero(out < 0)
        if len(todo):
            base = len(self) - self.nbuf
            first: dict[int, int] = {}
            for i, v in enumerate(self.buf[: self.nbuf].tolist()):
                first.setdefault(v, base + i)
            out[todo] = [first[v] for v in values[todo].tolist()]
        return out

    def all_fingerprints(self) -> np.ndarray:
        """Fingerprints by row (uint64, O(n))."""
        out = np.empty(len(self), dtype=np.uint64)
        out[self.main_ids] = self.main[0]
        out[self.delta_ids] = self.delta[0]
        base = len(self) - self.nbuf
        out[base:] = self.buf[: self.nbuf]
        return out

    def value_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All pairs of distinct stored *values* within k, each once: (a, b, distance)."""
        self.compact()
        cap = max(1024, self.n_main // 4)
        while True:
            out_a = np.empty(cap, dtype=np.uint64)
            out_b = np.empty(cap, dtype=np.uint64)
            out_d = np.empty(cap, dtype=np.int64)
            cnt = 0
            for t in range(self.T):
                arr = K.unique_sorted(self.main[t])  # drop exact repeats
                cnt = K.self_join_table(arr, t, self.k, int(self.shifts[t]), self.src, self.dst, self.mask,
                                        self.block_masks, self.first_clean, out_a, out_b, out_d, cnt)
                if cnt < 0:
                    break
            if cnt >= 0:
                return out_a[:cnt], out_b[:cnt], out_d[:cnt]
            cap *= 4

    def pair_graph(self) -> PairGraph:
        """Every pair within k with exact copies collapsed, as ``self_join.PairGraph``:
        each pair of distinct stored values once, as their first rows, and each
        row's first row. Its size is the pairs of distinct values however many
        copies there are (a template stored 10**6 times is one value, not
        5 x 10**11 pairs); ``greedy.decide`` decides from it. O(n + value pairs)."""
        va, vb, d = self.value_pairs()  # (compacts: every row is in main)
        arr, ids = self.main[0], self.main_ids.astype(np.int64)
        n = len(arr)
        starts = np.flatnonzero(np.r_[True, arr[1:] != arr[:-1]]) if n else np.empty(0, dtype=np.int64)
        group_first = np.minimum.reduceat(ids, starts) if n else np.empty(0, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)
        first[ids] = np.repeat(group_first, np.diff(np.r_[starts, n]))
        fa = group_first[np.searchsorted(arr[starts], va)]
        fb = group_first[np.searchsorted(arr[starts], vb)]
        return PairGraph(n, self.k, first, np.minimum(fa, fb), np.maximum(fa, fb), d.astype(np.int8))

    def iter_row_pairs(self, chunk: int = 1 << 20) -> RowPairs:
        """Every pair of *rows* within k, each once (row_a < row_b), as chunks
        (a, b, distance) of fewer than 2 x ``chunk`` pairs: ``pair_graph`` expanded to
        the copies as the chunks are taken, so memory stays bounded whatever
        the copies (their pairs are quadratic in number, and so is the time to
        take them all). The tables are read when this is called."""
        return RowPairs(self.pair_graph(), chunk)

    def row_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All pairs of rows within k, each once (row_a < row_b): (a, b, distance).
        Exact copies make these quadratic (g copies of a value: g (g - 1) / 2
        pairs): ``pair_graph`` collapses them, ``iter_row_pairs`` takes them in
        bounded chunks."""
        parts = list(self.iter_row_pairs())
        if not parts:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    # -- checking -------------------------------------------------------------

    def check_invariants(self) -> None:
        """Raise InvariantError unless every table is a sorted permutation of
        the same fingerprints and the row ids are exactly 0..n-1."""
        for name, level, ids in (("main", self.main, self.main_ids), ("delta", self.delta, self.delta_ids)):
            if level.shape[0] != self.T or level.shape[1] != len(ids):
                raise InvariantError(f"{name}: shape {level.shape} vs {len(ids)} ids")
            for t in range(self.T):
                if len(level[t]) > 1 and not np.all(level[t][1:] >= level[t][:-1]):
                    raise InvariantError(f"{name} table {t} not sorted")
                if t:
                    expect = np.sort(K.permute_all(level[0], t, self.src, self.dst, self.mask))
                    if not np.array_equal(expect, level[t]):
                        raise InvariantError(f"{name} table {t} is not table 0 permuted")
        n_main, n_delta = self.main.shape[1], self.delta.shape[1]
        if len(self.main_ids) and not np.array_equal(np.sort(self.main_ids), np.arange(n_main, dtype=np.uint32)):
            raise InvariantError("main rows are not 0..N-1")
        if len(self.delta_ids) and not np.array_equal(
                np.sort(self.delta_ids), np.arange(n_main, n_main + n_delta, dtype=np.uint32)):
            raise InvariantError("delta rows do not follow main")
        if self.use_kernels() and not 0 <= self.nbuf < self.buffer_size:
            raise InvariantError(f"buffer holds {self.nbuf} of {self.buffer_size}")
        if self.directory is not None and not np.array_equal(self.directory, K.build_directory(self.main, self.dbits)):
            raise InvariantError("main's prefix directory is stale")
        sample = self.main[0][:16].copy()
        for t in range(self.T):  # permutation round-trips
            back = K.unpermute_all(K.permute_all(sample, t, self.src, self.dst, self.mask), t,
                                   self.src, self.dst, self.mask)
            if not np.array_equal(back, sample):
                raise InvariantError(f"table {t} permutation does not invert")


class RowPairs:
    """The pairs of rows of a ``PairGraph``, copies expanded, as chunks
    (a, b, distance) of fewer than 2 x ``chunk`` pairs (``PermutedTables.iter_row_pairs``).
    ``rows``: how many rows are in some pair (a hint for looking their keys up)."""

    def __init__(self, graph: PairGraph, chunk: int) -> None:
        if chunk < 1:
            raise ValueError("chunk must be >= 1")
        self.graph, self.chunk = graph, chunk
        order = np.argsort(graph.first, kind="stable")  # rows grouped by their first row, in row order
        firsts = graph.first[order]
        self._order = order
        self._starts = np.flatnonzero(np.r_[True, firsts[1:] != firsts[:-1]]) if len(order) else order
        self._sizes = np.diff(np.r_[self._starts, len(order)])
        self._group_of = np.full(graph.n, -1, dtype=np.int64)  # first row -> its group
        self._group_of[firsts[self._starts]] = np.arange(len(self._starts))
        involved = np.zeros(len(self._starts), dtype=bool)
        involved[self._sizes > 1] = True
        involved[self._group_of[graph.a]] = True
        involved[self._group_of[graph.b]] = True
        self.rows = int(self._sizes[involved].sum())

    def _rows(self, g: int) -> np.ndarray:
        s = self._starts[g]
        return self._order[s : s + self._sizes[g]]

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        g, c = self.graph, self.chunk
        ga, gb = self._group_of[g.a], self._group_of[g.b]
        single = (self._sizes[ga] == 1) & (self._sizes[gb] == 1)
        d64 = g.distance.astype(np.int64)
        a1, b1, d1 = g.a[single], g.b[single], d64[single]
        for i in range(0, len(a1), c):  # pairs of values stored once: as they are
            yield a1[i : i + c], b1[i : i + c], d1[i : i + c]
        buf: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        held = 0
        for x, y, d in zip(ga[~single].tolist(), gb[~single].tolist(), d64[~single].tolist()):
            for part in _cross(self._rows(x), self._rows(y), d, c):  # every row of one with every row of the other
                buf.append(part)
                held += len(part[0])
                if held >= c:
                    yield _joined(buf)
                    buf, held = [], 0
        for grp in np.flatnonzero(self._sizes > 1).tolist():  # the copies of one value: distance 0
            rows = self._rows(grp)
            for i in range(len(rows) - 1):
                for j in range(i + 1, len(rows), c):
                    right = rows[j : j + c]
                    buf.append((np.full(len(right), rows[i]), right, np.zeros(len(right), dtype=np.int64)))
                    held += len(right)
                    if held >= c:
                        yield _joined(buf)
                        buf, held = [], 0
        if buf:
            yield _joined(buf)


def _cross(left: np.ndarray, right: np.ndarray, d: int, chunk: int
           ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every (l, r) of ``left`` x ``right`` as (min, max, d), in pieces of at most ``chunk``."""
    step = max(1, chunk // len(right))
    for i in range(0, len(left), step):
        lp = left[i : i + step]
        for j in range(0, len(right), chunk):
            rp = right[j : j + chunk]
            x, y = np.repeat(lp, len(rp)), np.tile(rp, len(lp))
            yield np.minimum(x, y), np.maximum(x, y), np.full(len(x), d, dtype=np.int64)


def _joined(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]
