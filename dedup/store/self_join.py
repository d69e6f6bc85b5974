"""All pairs within k bits of one large fingerprint array: the batch self-join.

The store's ``PermutedTables.row_pairs`` holds every table at once (8 bytes
per table and fingerprint: 8.4 GB for 100M fingerprints in 10 tables). This
join streams the tables instead, over one array:

1. **Exact copies collapse.** One argsort groups equal fingerprints; each
   distinct value is represented by the first row holding it (``first``).
   A copy has the same neighbours as its first row, so the pairs are only
   searched among distinct values, and a template repeated a million times
   is one value, not 5 x 10**11 pairs.
2. **One table at a time.** For each table of the layout (Manku et al. 3.1),
   the distinct values are permuted into a scratch array, radix-sorted by
   the table's prefix only (``sort_by_prefix``), and the
   compiled ``kernels.self_join_table`` compares the values within each run
   of equal prefixes. Each pair is reported by exactly one table (the first
   whose leading blocks it leaves clean), so no de-duplication is needed.
   Then the scratch array is reused by the next table.

Memory: the input (8 B/fp), the distinct values (8), their first rows (8),
each row's first row (8), one scratch table and its radix buffer (16) and
the pairs (17 B each); about 50 B per fingerprint at the peak, whatever the
number of tables. Time: per table O(m) for the radix passes plus the candidates, about
m * m / 2**p for m distinct random values and p-bit prefixes; a run of g
values sharing a prefix costs g**2 / 2 comparisons (dense clusters of
near-identical, not identical, values are the expensive case).

>>> import numpy as np
>>> g = self_join(np.array([0b1111, 0, 0b1111, 0b0111, 2**63], dtype=np.uint64), k=3)
>>> g.first.tolist()
[0, 1, 0, 3, 4]
>>> sorted(zip(g.a.tolist(), g.b.tolist(), g.distance.tolist()))
[(0, 3, 1), (1, 3, 3), (1, 4, 1)]
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import kernels as K
from .layout import FP_BITS, Layout, choose_layout

logger = logging.getLogger(__name__)

#: expected candidates per prefix run when the join picks its own layout: more tables (longer
#: prefixes) cost a sort each, fewer make every run longer (its cost grows with its square)
JOIN_MAX_CANDIDATES = 16.0


@dataclass(frozen=True)
class PairGraph:
    """The near pairs of a fingerprint array, exact copies collapsed.

    ``first[r]``: the first row holding row r's fingerprint (``first[r] <= r``;
    ``first[r] == r`` for the first copy). ``a``, ``b``, ``distance``: every
    pair of *distinct* fingerprints within k, each once, as their first rows
    (``a < b``). Row r is within k of row s iff ``first[r] == first[s]`` or
    (first[r], first[s]) is a pair.
    """

    n: int
    k: int
    first: np.ndarray
    a: np.ndarray
    b: np.ndarray
    distance: np.ndarray

    @property
    def n_distinct(self) -> int:
        return int(np.count_nonzero(self.first == np.arange(self.n)))


#: beyond these, sort_by_prefix sorts fully: two passes of 2**16 buckets at most, and small arrays
RADIX_MAX_BITS = 32
RADIX_MIN_SIZE = 1 << 16


@njit(cache=True)
def _radix_pass(keys, out, idx, out_idx, shift, bits):
    """One stable counting-sort pass of ``keys`` by bits [shift, shift + bits)
    into ``out`` (and ``idx`` along into ``out_idx`` when it is not empty). O(n + 2**bits)."""
    n = keys.shape[0]
    m = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    sh = np.uint64(shift)
    counts = np.zeros((1 << bits) + 1, dtype=np.int64)
    for i in range(n):
        counts[np.int64((keys[i] >> sh) & m) + 1] += 1
    for v in range(1 << bits):
        counts[v + 1] += counts[v]
    carry = idx.shape[0] > 0
    for i in range(n):
        v = np.int64((keys[i] >> sh) & m)
        pos = counts[v]
        counts[v] = pos + 1
        out[pos] = keys[i]
        if carry:
            out_idx[pos] = idx[i]


def sort_by_prefix(keys: np.ndarray, prefix_bits: int, idx: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """Stable radix sort of ``keys`` by their top ``prefix_bits`` bits only (two
    passes of about half of them; the order within a prefix is the input's),
    carrying ``idx`` along. A few times faster than a full sort, which the
    join does not need: it compares every pair within a run of equal prefixes."""
    if prefix_bits > RADIX_MAX_BITS or len(keys) < RADIX_MIN_SIZE:  # (the histograms would dominate)
        if idx is None:
            keys.sort()
            return keys, None
        order = np.argsort(keys, kind="stable")
        return keys[order], idx[order]
    empty = np.empty(0, dtype=np.int64)
    idx_in = empty if idx is None else idx
    out = np.empty_like(keys)
    out_idx = empty if idx is None else np.empty_like(idx)
    low = prefix_bits // 2
    _radix_pass(keys, out, idx_in, out_idx, FP_BITS - prefix_bits, low)
    _radix_pass(out, keys, out_idx, idx_in, FP_BITS - prefix_bits + low, prefix_bits - low)
    return keys, (None if idx is None else idx_in)


@njit(cache=True)
def _collapse(keys, rows, shift):
    """``keys`` sorted by the bits above ``shift``, ``rows`` their rows: sorts
    each run of equal prefixes fully (stably), then returns the distinct
    values, the first row of each, and each row's first row. O(n) for short runs."""
    n = keys.shape[0]
    sh = np.uint64(shift)
    i = 0
    while i < n:  # finish the sort inside each prefix run
        j = i + 1
        while j < n and (keys[j] >> sh) == (keys[i] >> sh):
            j += 1
        if j - i > 16:
            o = np.argsort(keys[i:j], kind="mergesort")
            keys[i:j] = keys[i:j][o]
            rows[i:j] = rows[i:j][o]
        else:
            for x in range(i + 1, j):  # insertion sort (stable)
                kx, rx = keys[x], rows[x]
                y = x - 1
                while y >= i and keys[y] > kx:
                    keys[y + 1] = keys[y]
                    rows[y + 1] = rows[y]
                    y -= 1
                keys[y + 1] = kx
                rows[y + 1] = rx
        i = j
    values = np.empty(n, dtype=np.uint64)
    firsts = np.empty(n, dtype=np.int64)
    first_of_row = np.empty(n, dtype=np.int64)
    m = 0
    i = 0
    while i < n:
        j = i
        lo = rows[i]  # stable all along: the smallest row of the run comes first
        while j < n and keys[j] == keys[i]:
            first_of_row[rows[j]] = lo
            j += 1
        values[m] = keys[i]
        firsts[m] = lo
        m += 1
        i = j
    return values[:m].copy(), firsts[:m].copy(), first_of_row


#: prefix bits of the collapse's radix sort: runs of equal prefixes are then ~n / 2**26 long
COLLAPSE_PREFIX_BITS = 26


def collapse(fps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct values, first row of each, each row's first row); O(n)
    radix passes plus a sort of each run of equal 26-bit prefixes."""
    keys, rows = sort_by_prefix(np.array(fps, dtype=np.uint64), COLLAPSE_PREFIX_BITS,
                                np.arange(len(fps), dtype=np.int64))
    return _collapse(keys, rows, FP_BITS - COLLAPSE_PREFIX_BITS)


def _join_one_table(values: np.ndarray, t: int, lay: Layout, arrays: tuple, cap: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value pairs that table t is the first to see; grows its output until they fit."""
    src, dst, mask, _, _ = arrays
    if t == 0:
        perm = values  # table 0 is the identity, and values are sorted already
    else:
        perm, _ = sort_by_prefix(K.permute_all(values, t, src, dst, mask), lay.prefix_bits(t))
    return table_pairs(perm, t, lay, arrays, cap)


def table_pairs(perm: np.ndarray, t: int, lay: Layout, arrays: tuple, cap: int = 1024
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value a, value b, distance) of the pairs within k among ``perm``
    (distinct values permuted for table t, sorted by its prefix) that table t
    is the first to see; ``arrays``: the layout's (src, dst, mask,
    block_masks, first_clean). The compiled scan of each run of equal
    prefixes; its output grows until the pairs fit."""
    src, dst, mask, block_masks, first_clean = arrays
    shift = FP_BITS - lay.prefix_bits(t)
    while True:
        out_a = np.empty(cap, dtype=np.uint64)
        out_b = np.empty(cap, dtype=np.uint64)
        out_d = np.empty(cap, dtype=np.int64)
        cnt = K.self_join_table(perm, t, lay.k, shift, src, dst, mask, block_masks, first_clean,
                                out_a, out_b, out_d, 0)
        if cnt >= 0:
            return out_a[:cnt].copy(), out_b[:cnt].copy(), out_d[:cnt].astype(np.int8)
        cap *= 4


def join_arrays(lay: Layout) -> tuple[np.ndarray, ...]:
    """The layout's arrays the compiled scan takes: (src, dst, mask, block_masks, first_clean)."""
    return (*lay.shift_arrays(), lay.block_masks(), lay.first_clean_table())


def join_layout(k: int, n: int) -> Layout:
    """The layout the join uses for ``n`` distinct values when none is given."""
    return choose_layout(k, max(n, 1), max_candidates=JOIN_MAX_CANDIDATES)


def self_join(fps: np.ndarray, k: int = 3, layout: Layout | None = None) -> PairGraph:
    """Every pair of rows of ``fps`` within ``k`` bits, as a ``PairGraph``.

    ``layout``: the permuted tables to stream (by default ``join_layout``:
    prefixes long enough that a run of random values holds a few). Exact: a
    test checks it against a brute-force scan. See the module for costs.
    """
    if not 0 <= k < FP_BITS:
        raise ValueError(f"k must be 0..{FP_BITS - 1}, got {k}")
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    n = len(fps)
    started = time.perf_counter()
    values, firsts, first_of_row = collapse(fps)
    lay = layout if layout is not None else join_layout(k, len(values))
    if lay.k != k:
        raise ValueError(f"layout is for k={lay.k}, not k={k}")
    empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int8))
    if k == 0 or len(values) < 2:  # distinct values are at distance >= 1
        return PairGraph(n, k, first_of_row, *empty)
    arrays = join_arrays(lay)
    parts_a, parts_b, parts_d = [empty[0]], [empty[1]], [empty[2]]
    cap = max(1024, len(values) // 64)
    for t in range(lay.n_tables):
        va, vb, d = _join_one_table(values, t, lay, arrays, cap)
        # values -> their first rows (values is sorted and distinct)
        ra = firsts[np.searchsorted(values, va)]
        rb = firsts[np.searchsorted(values, vb)]
        parts_a.append(np.minimum(ra, rb))
        parts_b.append(np.maximum(ra, rb))
        parts_d.append(d)
        logger.debug("self-join table %d/%d: %d pairs", t + 1, lay.n_tables, len(d))
    a, b, d = np.concatenate(parts_a), np.concatenate(parts_b), np.concatenate(parts_d)
    logger.info("self-join of %d fingerprints (%d distinct, %s): %d pairs in %.1f s",
                n, len(values), lay.describe(), len(a), time.perf_counter() - started)
    return PairGraph(n, k, first_of_row, a, b, d)
