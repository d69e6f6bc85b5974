"""The pair search as a partitioned join: the paper's permuted tables as join keys.

Each distinct fingerprint (exact copies are collapsed before) gives one row
per table: key (table, the fingerprint's prefix in that table). Rows are
grouped by key and compared within each group; a pair within k shares the
prefix of some table (pigeonhole), so every pair is found, and it is kept
only by the first table whose leading blocks it leaves clean (the store's
rule, ``Layout.first_clean_table``), so each pair comes out once.

An oversized group (more than ``max_group`` members: a template shared by
thousands of pages) is split: its members are dealt into m = ceil(g /
max_group) buckets and each pair of buckets (i <= j) is one group, so no
executor holds more than 2 * max_group members of it and all g**2 / 2
candidates are still compared. Only the keys of oversized groups and their
sizes reach the driver.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..store.layout import Layout

logger = logging.getLogger(__name__)

DEFAULT_MAX_GROUP = 2000


def _as_u64(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def table_rows(reps: Iterable[tuple[int, int]], layout: Layout) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """((table, prefix), (fingerprint, pos)) for each (fingerprint, pos) and table."""
    reps = list(reps)
    if not reps:
        return
    fps = _as_u64([f for f, _ in reps])
    prefixes = layout.prefixes(fps).tolist()
    for t, row in enumerate(prefixes):
        for (fp, pos), p in zip(reps, row):
            yield (t, p), (fp, pos)


def dirty_blocks(x: np.ndarray, block_masks: np.ndarray) -> np.ndarray:
    """Bitmask of the blocks where each XOR ``x`` has a set bit."""
    out = np.zeros(x.shape, dtype=np.int64)
    for blk, m in enumerate(block_masks):
        out |= ((x & m) != 0).astype(np.int64) << blk
    return out


def compare(t: int, left: list[tuple[int, int]], right: list[tuple[int, int]] | None, k: int,
            block_masks: np.ndarray, first_clean: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """Pairs (pos_a < pos_b, distance) within k between ``left`` and ``right``
    (or within ``left`` when ``right`` is None) that table t is the first to see."""
    fa = _as_u64([f for f, _ in left])
    pa = np.array([p for _, p in left], dtype=np.int64)
    if right is None:
        ia, ib = np.triu_indices(len(left), 1)
        x = fa[ia] ^ fa[ib]
        qa, qb = pa[ia], pa[ib]
    else:
        fb = _as_u64([f for f, _ in right])
        pb = np.array([p for _, p in right], dtype=np.int64)
        x = (fa[:, None] ^ fb[None, :]).ravel()
        qa, qb = np.repeat(pa, len(pb)), np.tile(pb, len(pa))
    d = np.bitwise_count(x)
    near = d <= k
    x, qa, qb, d = x[near], qa[near], qb[near], d[near]
    own = first_clean[dirty_blocks(x, block_masks)] == t
    for a, b, dd in zip(qa[own].tolist(), qb[own].tolist(), d[own].tolist()):
        yield (a, b, dd) if a < b else (b, a, dd)


def near_pairs(reps: Any, layout: Layout, max_group: int = DEFAULT_MAX_GROUP, partitions: int | None = None
               ) -> tuple[Any, dict]:
    """RDD of (pos_a, pos_b, distance), pos_a < pos_b, every pair of ``reps``
    (an RDD of distinct (fingerprint, pos)) within ``layout.k``, each once;
    and statistics (rows, oversized groups, largest group)."""
    if max_group < 2:
        raise ValueError("max_group must be >= 2")
    k = layout.k
    block_masks = layout.block_masks()
    first_clean = layout.first_clean_table()
    keyed = reps.mapPartitions(lambda it: table_rows(it, layout))
    keyed.persist()
    n = partitions or reps.getNumPartitions()
    big = dict(keyed.mapValues(lambda _: 1).reduceByKey(lambda a, b: a + b, n)
               .filter(lambda kv: kv[1] > max_group).collect())
    buckets = {key: math.ceil(g / max_group) for key, g in big.items()}
    sc = reps.context
    b_buckets = sc.broadcast(buckets)

    def deal(kv: tuple[tuple[int, int], tuple[int, int]]) -> Iterator[tuple[tuple[int, int, int, int], tuple]]:
        key, (fp, pos) = kv
        m = b_buckets.value.get(key)
        if m is None:
            yield (key[0], key[1], 0, 0), (fp, pos, 0)
            return
        b = (pos * 0x9E3779B97F4A7C15 >> 17) % m  # spread positions over the buckets
        for j in range(m):
            yield (key[0], key[1], min(b, j), max(b, j)), (fp, pos, b)

    def group_pairs(kv: tuple[tuple[int, int, int, int], Iterable[tuple]]) -> Iterator[tuple[int, int, int]]:
        (t, _, bi, bj), members = kv
        members = list(members)
        if len(members) < 2:
            # (no pair. Most groups are one member: the layout gives each table about as many
            # prefixes as there are fingerprints, so at 10M about 97% of the rows are alone in
            # their group, and compare's numpy set-up, ~60 us, cost more than the rest of the search)
            return
        if bi == bj:
            yield from compare(t, [(f, p) for f, p, _ in members], None, k, block_masks, first_clean)
        else:
            left = [(f, p) for f, p, b in members if b == bi]
            right = [(f, p) for f, p, b in members if b == bj]
            if left and right:
                yield from compare(t, left, right, k, block_masks, first_clean)

    pairs = keyed.flatMap(deal).groupByKey(n).flatMap(group_pairs)
    stats = {"oversized_groups": len(big), "largest_group": max(big.values(), default=0)}
    return pairs, stats
