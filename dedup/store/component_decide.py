"""The input-order decision of a large fingerprint array without its pair list.

``greedy.decide(self_join(fps))`` holds every pair of distinct values within
k (17 B each, then sorted for the decision). Where clusters of near-copies
grow with the data (templates shared by a share of all pages), those pairs
grow faster than the data: 5.0M at 1M skewed fingerprints, 72.6M at 10M,
about 10**9 at 100M, past any one machine's memory. This module makes the
same decision (the same kept rows, the same twins, the same distances:
tested) holding O(n) state, never the pair list:

1. **Exact copies collapse** (``self_join.collapse``): the distinct values
   and each row's first row.
2. **Components, pairs counted not held.** The tables are streamed one at a
   time as ``self_join`` does; each pair found joins its two values' sets in a
   union-find (``kernels.self_join_table_union``: 4 B per distinct value)
   and marks both as linked, then is forgotten.
3. **The decision per component.** A record's earlier neighbours are in its
   component, so the greedy rule can be applied to each component alone.
   The linked values are sorted by component, then input order; each
   component is decided by scanning its values against its own kept ones
   (``_scan_components``: the nearest kept, the earliest among equals). A
   cluster of near-copies keeps few values, so this costs little; a
   component of more than ``SCAN_MAX`` values is joined alone
   (``self_join``) and decided from its pairs (``greedy.decide``). A value
   with no neighbour is kept.
4. **Copies follow their first row** (``greedy.follow_copies``).

Memory: about 52 B per fingerprint beyond the input at the peak (the
collapse's arrays, then one permuted table, its radix buffer, the positions
carried along and the union-find); no pairs, but those of a component too
large to scan. Time: the self-join's comparisons without its pair list or
the decision's sort of it, plus the scans (a component of c values keeping
h costs c x h comparisons: a chain through a large part of the data is
the expensive case, and a component past ``SCAN_MAX`` is joined instead).

>>> import numpy as np
>>> out = decide_by_components(np.array([0b1111, 0, 0b1111, 0b0111, 2**63, 1], dtype=np.uint64))
>>> out.decision.kept.tolist(), out.decision.twin.tolist(), out.decision.distance.tolist()
([True, True, False, False, False, False], [-1, -1, 0, 0, 1, 1], [-1, -1, 0, 1, 1, 1])
>>> out.pairs, out.components, out.largest, out.joined
(7, 1, 5, 0)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import kernels as K
from .greedy import Decision, decide, follow_copies
from .layout import FP_BITS, Layout
from .self_join import collapse, join_layout, self_join, sort_by_prefix

logger = logging.getLogger(__name__)

#: the largest component decided by scanning its kept values (O(size x kept)); a larger one
#: is joined alone and decided from its pairs (``self_join``, ``greedy.decide``)
SCAN_MAX = 1 << 16


@dataclass(frozen=True)
class ComponentDecision:
    """The ``decision`` per row, with what the search saw: ``pairs`` of
    distinct values within k (counted, never held), the ``components`` of two
    or more distinct values, the ``largest`` one's distinct values, how many
    components were too large to scan and were ``joined``, and the
    ``comparisons`` the scans made."""

    decision: Decision
    n_distinct: int
    pairs: int
    components: int
    largest: int
    joined: int
    comparisons: int


def _link(values: np.ndarray, k: int, lay: Layout) -> tuple[np.ndarray, np.ndarray, int]:
    """Union-find over the sorted distinct ``values`` from every pair within k,
    one table at a time: (parent, linked, pairs)."""
    m = len(values)
    parent = np.arange(m, dtype=np.int32 if m < 2**31 else np.int64)
    linked = np.zeros(m, dtype=np.bool_)
    src, dst, mask = lay.shift_arrays()
    block_masks, first_clean = lay.block_masks(), lay.first_clean_table()
    pairs = 0
    for t in range(lay.n_tables):
        idx: np.ndarray | None = np.arange(m, dtype=parent.dtype)
        if t == 0:
            perm = values  # table 0 is the identity, and values are sorted already
        else:
            perm, idx = sort_by_prefix(K.permute_all(values, t, src, dst, mask), lay.prefix_bits(t), idx)
        pairs += K.self_join_table_union(perm, idx, t, k, FP_BITS - lay.prefix_bits(t), src, dst, mask,
                                         block_masks, first_clean, parent, linked)
        del perm, idx
    return parent, linked, pairs


@njit(cache=True)
def _scan_components(vals, starts, ends, k, kept, twin, dist):
    """The greedy rule in each component ``vals[starts[c]:ends[c]]`` (its
    values in input order) by a scan of the component's kept values: a value
    with none within ``k`` is kept, else it takes the nearest, the earliest
    among equals (the kept values are scanned in input order, a tie does not
    replace). Writes positions in ``vals``; returns the comparisons made.
    O(c x kept) per component: a cluster of near-copies keeps few."""
    buf = np.empty(np.max(ends - starts) if starts.shape[0] else 0, dtype=np.int64)
    comparisons = 0
    for c in range(starts.shape[0]):
        nk = 0
        for p in range(starts[c], ends[c]):
            x = vals[p]
            best_d = k + 1
            best = -1
            for q in range(nk):
                d = K.popcount(x ^ vals[buf[q]])
                if d < best_d:
                    best_d = d
                    best = buf[q]
            comparisons += nk
            if best < 0:
                kept[p] = True
                buf[nk] = p
                nk += 1
            else:
                twin[p] = best
                dist[p] = best_d
    return comparisons


def decide_by_components(fps: np.ndarray, k: int = 3, layout: Layout | None = None,
                         scan_max: int = SCAN_MAX) -> ComponentDecision:
    """The decision ``greedy.decide(self_join(fps, k, layout))`` makes (same
    kept rows, twins and distances), without holding the pairs. See the
    module for the steps and costs. ``layout``: the tables of the linking
    pass (by default ``self_join.join_layout``); ``scan_max``: the largest
    component decided by a scan of its kept values (larger ones are joined)."""
    if not 0 <= k < FP_BITS:
        raise ValueError(f"k must be 0..{FP_BITS - 1}, got {k}")
    if scan_max < 1:
        raise ValueError(f"scan_max must be positive, got {scan_max}")
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    n = len(fps)
    started = time.perf_counter()
    values, firsts, first_of_row = collapse(fps)
    m = len(values)
    pairs = n_components = largest = joined = comparisons = 0
    lay = layout if layout is not None else join_layout(k, max(m, 1))
    if lay.k != k:
        raise ValueError(f"layout is for k={lay.k}, not k={k}")
    if k > 0 and m > 1:  # distinct values are at distance >= 1
        parent, linked, pairs = _link(values, k, lay)
    # (the outputs are made after the linking pass, the peak of the memory)
    kept = np.zeros(n, dtype=np.bool_)
    twin = np.full(n, -1, dtype=np.int64)
    dist = np.full(n, -1, dtype=np.int8)
    kept[firsts] = True  # a value with no neighbour is kept (its copies follow below)
    if pairs:
        at = np.flatnonzero(linked)  # the values with a neighbour
        del linked
        roots = K.uf_roots(parent, at.astype(parent.dtype))
        del parent
        order = np.lexsort((firsts[at], roots))  # by component, each in input order
        at, roots = at[order], roots[order]
        del order
        starts = np.flatnonzero(np.r_[True, roots[1:] != roots[:-1]]) if len(roots) else np.empty(0, np.int64)
        del roots
        ends = np.r_[starts[1:], len(at)].astype(np.int64)
        sizes = ends - starts
        n_components, largest = len(starts), int(sizes.max()) if len(sizes) else 0
        rows, vals = firsts[at], values[at]
        lkept = np.zeros(len(at), dtype=np.bool_)
        ltwin = np.full(len(at), -1, dtype=np.int64)
        ldist = np.full(len(at), -1, dtype=np.int8)
        small = sizes <= scan_max
        comparisons = _scan_components(vals, starts[small], ends[small], k, lkept, ltwin, ldist)
        for s, e in zip(starts[~small].tolist(), ends[~small].tolist()):  # too large to scan: joined alone
            dec = decide(self_join(vals[s:e], k))  # (no copies: the values are distinct)
            lkept[s:e] = dec.kept
            ltwin[s:e] = np.where(dec.kept, -1, dec.twin + s)
            ldist[s:e] = dec.distance
            joined += 1
        kept[rows] = lkept
        dropped = ~lkept
        twin[rows[dropped]] = rows[ltwin[dropped]]
        dist[rows] = ldist
        logger.info("decision by components of %d fingerprints (%d distinct, %s): %d pairs, %d components "
                    "(largest %d, %d joined), %d comparisons in scans, in %.1f s", n, m, lay.describe(), pairs,
                    n_components, largest, joined, comparisons, time.perf_counter() - started)
    follow_copies(kept, twin, dist, first_of_row)
    return ComponentDecision(Decision(kept, twin, dist), m, pairs, n_components, largest, joined, comparisons)
