"""The keep/drop decision from a pair list: the crawl's rule, in input order.

A record is dropped iff it is within k bits of a record *kept* before it;
otherwise it is kept. So no two kept records are within k, every dropped
record names a kept twin within k, and there are no chains: in A-B-C with
A~B and B~C but not A~C, A is kept, B dropped (twin A), and C kept, since
its only earlier neighbour B was dropped.

The input is a ``self_join.PairGraph``, or any pair list ``(a, b, distance)``
with ``a < b`` over rows 0..n-1 (rows are input order). Exact copies are
decided by their first row: a copy of a kept row is dropped as its copy
(distance 0); a copy of a dropped row is dropped with the same twin, which
is within k of it since it has the same fingerprint. This is what the
sequential ``check_and_add_many`` decides (tested), without enumerating
the pairs among copies.

The twin of a dropped record is its nearest kept earlier neighbour, the
earliest among equals; a later copy of a dropped record takes that
record's twin (the kept set does not depend on this choice). Cost: O(E log E) to order the E pairs, then O(n + E).

>>> import numpy as np
>>> d = greedy_keep(3, np.array([0, 1]), np.array([1, 2]), np.array([2, 3]))
>>> d.kept.tolist(), d.twin.tolist()
([True, False, True], [-1, 0, -1])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .self_join import PairGraph


@dataclass(frozen=True)
class Decision:
    """Per row: ``kept``; ``twin``, the kept row a dropped row is a near-copy
    of (-1 for a kept row); ``distance`` to it in bits (-1 for a kept row)."""

    kept: np.ndarray
    twin: np.ndarray
    distance: np.ndarray

    @property
    def n_kept(self) -> int:
        return int(np.count_nonzero(self.kept))


@njit(cache=True)
def _decide(n, a, b, d, order, first):
    kept = np.ones(n, dtype=np.bool_)
    twin = np.full(n, -1, dtype=np.int64)
    dist = np.full(n, -1, dtype=np.int8)
    # pairs by (later row, distance, earlier row): each later row's earlier neighbours are
    # decided before it (they are smaller rows, so their own groups came first)
    e = order.shape[0]
    i = 0
    while i < e:
        hi = b[order[i]]
        j = i
        while j < e and b[order[j]] == hi:
            j += 1
        for x in range(i, j):
            lo = a[order[x]]
            if kept[lo]:
                kept[hi] = False
                twin[hi] = lo
                dist[hi] = d[order[x]]
                break
        i = j
    follow_copies(kept, twin, dist, first)
    return kept, twin, dist


@njit(cache=True)
def follow_copies(kept, twin, dist, first):
    """Exact copies follow their first row (``first[r] < r``), in place: a copy
    of a kept row is dropped as its copy (distance 0), a copy of a dropped row
    takes that row's twin. The first rows must be decided already. O(n)."""
    for r in range(first.shape[0]):
        f = first[r]
        if f != r:
            kept[r] = False
            if kept[f]:
                twin[r] = f
                dist[r] = 0
            else:
                twin[r] = twin[f]
                dist[r] = dist[f]


def greedy_keep(n: int, a: np.ndarray, b: np.ndarray, distance: np.ndarray,
                first: np.ndarray | None = None) -> Decision:
    """The decision for rows 0..n-1 from pairs ``a < b`` within k (``distance``);
    ``first``: each row's first row holding the same fingerprint (pairs are
    then between first rows only), or None when the pairs name every row."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    d = np.ascontiguousarray(distance, dtype=np.int8)
    if len(a) and (np.any(a >= b) or a.min() < 0 or b.max() >= n):
        raise ValueError("pairs must satisfy 0 <= a < b < n")
    if first is None:
        first = np.arange(n, dtype=np.int64)
    first = np.ascontiguousarray(first, dtype=np.int64)
    order = np.lexsort((a, d, b))
    return Decision(*_decide(n, a, b, d, order, first))


def decide(graph: PairGraph) -> Decision:
    """``greedy_keep`` over a ``self_join`` result."""
    return greedy_keep(graph.n, graph.a, graph.b, graph.distance, graph.first)
