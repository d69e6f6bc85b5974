"""The input-order decision of a large fingerprint array without its pair list.

``greedy.decide(self_join(fps))`` holds every pair of distinct values within
k (17 B each, then sorted for the decision). Where clusters of near-copies
grow with the data (templates shared by a share of all pages), those pairs
grow faster than the data: 5.0M at 1M skewed fingerprints, 72.6M at 10M,
about 10**9 at 100M, past any one machine's memory. This module makes the
same decision (the same kept rows, the same twins, the same distances:
tested) holding state in O(n) and the pairs of one batch of components at a time:

1. **Exact copies collapse** (``self_join.collapse``): the distinct values
   and each row's first row.
2. **Components, pairs counted not held.** The tables are streamed one at a
   time as ``self_join`` does; each pair found joins its two values' sets in a
   union-find (``kernels.self_join_table_union``: 4 B per distinct value)
   and marks both as linked, then is forgotten.
3. **The decision per component.** A record's earlier neighbours are in its
   component, so the greedy rule can be applied to each component alone. The
   linked values, grouped by component, are cut into batches of whole
   components of about ``batch_values`` values; each batch, in input order,
   is joined again (``self_join``) and decided (``greedy.decide``). Only
   that batch's pairs are held. A value with no neighbour is kept.
4. **Copies follow their first row** (``greedy.follow_copies``).

Memory: about 45 B per fingerprint beyond the input at the peak (the collapse's
arrays, then one permuted table, its radix buffer, the positions carried
along and the union-find), plus the largest batch's pairs. A single
component larger than the memory's share of pairs (one chain of near-copies
linking a large part of the data) is still joined whole. Time: the
self-join's comparisons twice for the linked values (once to link, once per
batch), once for the others; no sort of all pairs.

>>> import numpy as np
>>> out = decide_by_components(np.array([0b1111, 0, 0b1111, 0b0111, 2**63, 1], dtype=np.uint64))
>>> out.decision.kept.tolist(), out.decision.twin.tolist(), out.decision.distance.tolist()
([True, True, False, False, False, False], [-1, -1, 0, 0, 1, 1], [-1, -1, 0, 1, 1, 1])
>>> out.pairs, out.components, out.largest
(7, 1, 5)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from . import kernels as K
from .greedy import Decision, decide, follow_copies
from .layout import FP_BITS, Layout
from .self_join import collapse, join_layout, self_join, sort_by_prefix

logger = logging.getLogger(__name__)

#: distinct values per batch of components decided at once: bounds the pairs held
#: (a batch of dense near-copies holds up to a few hundred pairs per value: some 10**7 pairs, 17 B each)
BATCH_VALUES = 1 << 17


@dataclass(frozen=True)
class ComponentDecision:
    """The ``decision`` per row, with what the search saw: ``pairs`` of
    distinct values within k (counted, never held), the ``components`` of two
    or more distinct values, the ``largest`` one's distinct values, the
    ``batches`` they were decided in and the most pairs one batch held
    (``batch_pairs``)."""

    decision: Decision
    n_distinct: int
    pairs: int
    components: int
    largest: int
    batches: int
    batch_pairs: int


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


def _batches(roots: np.ndarray, batch_values: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Order of the linked values grouped by component (``roots``), the cuts
    between batches of whole components of about ``batch_values`` values,
    the number of components and the largest one's size."""
    order = np.argsort(roots, kind="stable")
    r = roots[order]
    starts = np.flatnonzero(np.r_[True, r[1:] != r[:-1]]) if len(r) else np.empty(0, dtype=np.int64)
    sizes = np.diff(np.r_[starts, len(r)])
    # a component belongs to the batch its first value falls in: batches of batch_values
    # values plus at most one component's overflow
    batch_of = starts // batch_values
    cuts = np.r_[starts[np.flatnonzero(np.r_[True, batch_of[1:] != batch_of[:-1]])], len(r)] if len(r) else np.zeros(1, dtype=np.int64)
    return order, cuts, len(starts), int(sizes.max()) if len(sizes) else 0


def decide_by_components(fps: np.ndarray, k: int = 3, layout: Layout | None = None,
                         batch_values: int = BATCH_VALUES) -> ComponentDecision:
    """The decision ``greedy.decide(self_join(fps, k, layout))`` makes (same
    kept rows, twins and distances), without holding all the pairs. See the
    module for the steps and costs. ``layout``: the tables of the linking
    pass (by default ``self_join.join_layout``); ``batch_values``: distinct
    values per batch of components."""
    if not 0 <= k < FP_BITS:
        raise ValueError(f"k must be 0..{FP_BITS - 1}, got {k}")
    if batch_values < 1:
        raise ValueError(f"batch_values must be positive, got {batch_values}")
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    n = len(fps)
    started = time.perf_counter()
    values, firsts, first_of_row = collapse(fps)
    m = len(values)
    kept = np.zeros(n, dtype=np.bool_)
    twin = np.full(n, -1, dtype=np.int64)
    dist = np.full(n, -1, dtype=np.int8)
    kept[firsts] = True  # a value with no neighbour is kept (its copies follow below)
    pairs = n_components = largest = n_batches = batch_pairs = 0
    if k > 0 and m > 1:  # distinct values are at distance >= 1
        lay = layout if layout is not None else join_layout(k, m)
        if lay.k != k:
            raise ValueError(f"layout is for k={lay.k}, not k={k}")
        parent, linked, pairs = _link(values, k, lay)
        linked_at = np.flatnonzero(linked)
        del linked
        roots = K.uf_roots(parent, linked_at.astype(parent.dtype))
        del parent
        order, cuts, n_components, largest = _batches(roots, batch_values)
        del roots
        linked_at = linked_at[order]
        del order
        n_batches = len(cuts) - 1
        for s, e in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            pos = linked_at[s:e]
            pos = pos[np.argsort(firsts[pos], kind="stable")]  # input order within the batch
            rows = firsts[pos]
            g = self_join(values[pos], k)  # no copies: values are distinct
            batch_pairs = max(batch_pairs, len(g.a))
            dec = decide(g)
            kept[rows] = dec.kept
            dropped = ~dec.kept
            twin[rows[dropped]] = rows[dec.twin[dropped]]
            dist[rows] = dec.distance
        logger.info("decision by components of %d fingerprints (%d distinct, %s): %d pairs, %d components "
                    "(largest %d), %d batches, in %.1f s", n, m, lay.describe(), pairs, n_components, largest,
                    n_batches, time.perf_counter() - started)
    follow_copies(kept, twin, dist, first_of_row)
    return ComponentDecision(Decision(kept, twin, dist), m, pairs, n_components, largest, n_batches, batch_pairs)
