"""The greedy decision across executors: per connected component of the pair graph.

Whether a record is kept depends only on the records it is linked to through
near pairs (its connected component), so each component is decided on its
own, in input order, by the one-machine ``store.greedy.greedy_keep``: the
same kept set and the same twins as the one-machine run.

Components are found by label propagation with pointer jumping: every node
takes the smallest label among itself and its neighbours, then the label of
its label, until nothing changes (about log2 of the longest path's rounds
with the jumps; each round is a few joins). A component is then decided
inside one task: the largest must fit one executor (its pairs, 24 B each),
never the driver, which only counts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..store.greedy import greedy_keep

logger = logging.getLogger(__name__)

MAX_ROUNDS = 200


def component_labels(edges: Any, partitions: int, max_rounds: int = MAX_ROUNDS) -> tuple[Any, int]:
    """RDD of (node, smallest node of its component) for the nodes of ``edges``
    (an RDD of (a, b, ...)); and the rounds it took. Every shuffle has
    ``partitions`` partitions (a union's would add up, round after round)."""
    n = partitions
    links = edges.flatMap(lambda e: ((e[0], e[1]), (e[1], e[0]))).persist()
    labels = links.reduceByKey(min, n).map(lambda kv: (kv[0], min(kv[0], kv[1]))).persist()
    for rounds in range(1, max_rounds + 1):
        # a neighbour's label ...
        spread = links.join(labels, n).map(lambda kv: (kv[1][0], kv[1][1]))
        step = labels.union(spread).reduceByKey(min, n)
        # ... then the label's label (pointer jumping: halves the paths)
        jumped = (step.map(lambda kv: (kv[1], kv[0])).join(step, n)
                  .map(lambda kv: (kv[1][0], min(kv[0], kv[1][1]))))
        new = step.union(jumped).reduceByKey(min, n).persist()
        new.localCheckpoint()
        changed = new.join(labels, n).filter(lambda kv: kv[1][0] != kv[1][1]).count()
        labels.unpersist()
        labels = new
        if not changed:
            links.unpersist()
            return labels, rounds
    raise RuntimeError(f"components did not settle in {max_rounds} rounds")


def decide_component(edges: Iterable[tuple[int, int, int]]) -> Iterator[tuple[int, tuple[int, int]]]:
    """(pos, (twin pos, distance)) for each dropped node of one component,
    from its edges (pos_a < pos_b, distance); input order is pos order."""
    arr = np.array(list(edges), dtype=np.int64).reshape(-1, 3)
    nodes = np.unique(arr[:, :2])
    a = np.searchsorted(nodes, arr[:, 0])
    b = np.searchsorted(nodes, arr[:, 1])
    dec = greedy_keep(len(nodes), a, b, arr[:, 2])
    for i in np.flatnonzero(~dec.kept).tolist():
        yield int(nodes[i]), (int(nodes[dec.twin[i]]), int(dec.distance[i]))


def decide_pairs(pairs: Any, partitions: int) -> tuple[Any, dict]:
    """RDD of (pos, (twin pos, distance)) for every dropped distinct record,
    from the pair RDD (pos_a, pos_b, distance); and statistics."""
    pairs = pairs.persist()
    labels, rounds = component_labels(pairs, partitions)
    by_component = (pairs.map(lambda e: (e[0], e)).join(labels, partitions)
                    .map(lambda kv: (kv[1][1], kv[1][0])))
    sizes = labels.map(lambda kv: (kv[1], 1)).reduceByKey(lambda x, y: x + y, partitions).values()
    stats = {"components": sizes.count(), "largest_component": sizes.max() if not sizes.isEmpty() else 0,
             "component_rounds": rounds}
    dropped = by_component.groupByKey(partitions).flatMap(lambda kv: decide_component(kv[1]))
    return dropped, stats
