"""The pair search as a partitioned join: the paper's permuted tables as join keys.

Each distinct fingerprint (exact copies are collapsed before) gives one row
per table, dealt to the partition its key (table, the fingerprint's prefix in
that table) hashes to: every member of a prefix group meets in one task. A
pair within k shares the prefix of some table (pigeonhole), so every pair is
found, and it is kept only by the first table whose leading blocks it leaves
clean (the store's rule, ``Layout.first_clean_table``), so each pair comes
out once.

The rows travel as packed numpy arrays, one per (map task, partition), and
each task compares its rows with the one-machine join's compiled scan
(``store.self_join.table_pairs``): past ~2M fingerprints most rows are alone
in their group, and a Python row or group for each of them (about 10 per
document) cost more than the rest of the job.

An oversized group (more than ``max_group`` members: a template shared by
thousands of pages) is split: its members, in position order, are dealt
round the m = ceil(g / max_group) buckets, and each pair of buckets (i <= j)
is one group of a second, small shuffle, so no task compares more than
2 * max_group members of it and all g**2 / 2 candidates are still compared.
The members leave the task that found the group once each and are spread
over the partitions before each is copied to its m bucket pairs. Only the
sizes of oversized groups reach the driver.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..store.kernels import permute_all
from ..store.layout import Layout
from ..store.self_join import join_arrays, sort_by_prefix, table_pairs

logger = logging.getLogger(__name__)

DEFAULT_MAX_GROUP = 2000


#: one table row: the table, the fingerprint, its record's position
ROW = np.dtype([("t", "<u8"), ("fp", "<u8"), ("pos", "<i8")])
#: what a task of the join yields: a pair, an oversized group's size, a member dealt to one of its buckets
PAIR, OVERSIZED, DEALT = 0, 1, 2


def _as_u64(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def partition_of(t: int, prefixes: np.ndarray, n: int) -> np.ndarray:
    """The partition (0..n-1) of each key (t, prefix): a multiplicative hash,
    so that neighbouring prefixes spread."""
    h = (prefixes ^ np.uint64((t + 1) * 0x9E3779B97F4A7C15 % 2**64)) * np.uint64(0xBF58476D1CE4E5B9)
    return ((h >> np.uint64(29)) % np.uint64(n)).astype(np.int64)


def dealt_rows(reps: Iterable[tuple[int, int]], layout: Layout, n: int) -> Iterator[tuple[int, bytes]]:
    """(partition, packed ``ROW`` array) for each partition that gets rows of
    ``reps`` ((fingerprint, pos); the fingerprints distinct): one row per
    table, in the partition of its key. About 60 bytes a row at its peak."""
    reps = list(reps)
    if not reps:
        return
    fps = np.fromiter((f for f, _ in reps), dtype=np.uint64, count=len(reps))
    pos = np.fromiter((p for _, p in reps), dtype=np.int64, count=len(reps))
    del reps
    rows = np.empty(len(fps) * layout.n_tables, dtype=ROW)
    parts = np.empty(len(rows), dtype=np.int64)
    for t, prefixes in enumerate(layout.prefixes(fps)):
        span = slice(t * len(fps), (t + 1) * len(fps))
        rows["t"][span], rows["fp"][span], rows["pos"][span] = t, fps, pos
        parts[span] = partition_of(t, prefixes, n)
    order = np.argsort(parts, kind="stable")
    parts = parts[order]
    starts = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
    for s, e in zip(starts.tolist(), np.r_[starts[1:], len(parts)].tolist()):
        yield int(parts[s]), rows[order[s:e]].tobytes()


def join_partition(blobs: Iterable[tuple[int, bytes]], layout: Layout, max_group: int
                   ) -> Iterator[tuple[int, Any]]:
    """One task of the join, over the rows dealt to it (distinct fingerprints
    in each table): (PAIR, (pos_a, pos_b, distance)) for each pair within k
    its tables are the first to see; for each oversized group (OVERSIZED, its
    size), then (DEALT, ((t, prefix, buckets), (fp, pos, bucket))) once for
    each member: in position order, member r goes to bucket r mod buckets, so
    no bucket holds more than ``max_group``. About 60 bytes a row at its peak."""
    rows = np.concatenate([np.frombuffer(b, dtype=ROW) for _, b in blobs] or [np.empty(0, dtype=ROW)])
    if not len(rows):
        return
    rows = rows[np.argsort(rows["t"], kind="stable")]
    arrays = join_arrays(layout)
    src, dst, mask = arrays[:3]
    starts = np.flatnonzero(np.r_[True, rows["t"][1:] != rows["t"][:-1]])
    for s, e in zip(starts.tolist(), np.r_[starts[1:], len(rows)].tolist()):
        t = int(rows["t"][s])
        vals, pos = np.ascontiguousarray(rows["fp"][s:e]), np.ascontiguousarray(rows["pos"][s:e])
        bits = layout.prefix_bits(t)
        perm, idx = sort_by_prefix(permute_all(vals, t, src, dst, mask), bits, np.arange(e - s, dtype=np.int64))
        pfx = perm >> np.uint64(64 - bits)
        runs = np.flatnonzero(np.r_[True, pfx[1:] != pfx[:-1]])
        sizes = np.diff(np.r_[runs, len(pfx)])
        if (sizes > max_group).any():
            assert idx is not None  # (given, so returned)
            keep = np.ones(len(perm), dtype=bool)
            for r, g in zip(runs[sizes > max_group].tolist(), sizes[sizes > max_group].tolist()):
                keep[r:r + g] = False
                yield OVERSIZED, g
                members = sorted(zip(pos[idx[r:r + g]].tolist(), vals[idx[r:r + g]].tolist()))
                key = (t, int(pfx[r]), math.ceil(g / max_group))
                for rank, (p, fp) in enumerate(members):
                    yield DEALT, (key, (fp, p, rank % key[2]))
            perm = perm[keep]
        va, vb, d = table_pairs(perm, t, layout, arrays, max(1024, len(perm) // 64))
        if not len(d):
            continue
        order = np.argsort(vals)
        pa = pos[order[np.searchsorted(vals, va, sorter=order)]]
        pb = pos[order[np.searchsorted(vals, vb, sorter=order)]]
        for a, b, dd in zip(np.minimum(pa, pb).tolist(), np.maximum(pa, pb).tolist(), d.tolist()):
            yield PAIR, (a, b, dd)


def bucket_pairs(key: tuple[int, int, int], member: tuple[int, int, int]
                 ) -> Iterator[tuple[tuple[int, int, int, int], tuple[int, int, int]]]:
    """An oversized group's member, to each pair of buckets (i <= j) its bucket
    is one of: ((t, prefix, i, j), member); ``key`` is (t, prefix, buckets),
    ``member`` (fp, pos, its bucket)."""
    t, prefix, m = key
    b = member[2]
    for j in range(m):
        yield (t, prefix, min(b, j), max(b, j)), member


def group_pairs(kv: tuple[tuple[int, int, int, int], Iterable[tuple[int, int, int]]], layout: Layout
                ) -> Iterator[tuple[int, int, int]]:
    """The pairs of one pair of buckets (i, j) of an oversized group that its
    table is the first to see: within bucket i when i == j, else across."""
    (t, _, bi, bj), members = kv
    members = list(members)
    masks, first_clean = layout.block_masks(), layout.first_clean_table()
    if bi == bj:
        yield from compare(t, [(f, p) for f, p, _ in members], None, layout.k, masks, first_clean)
    else:
        left = [(f, p) for f, p, b in members if b == bi]
        right = [(f, p) for f, p, b in members if b == bj]
        if left and right:
            yield from compare(t, left, right, layout.k, masks, first_clean)


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
    (an RDD of (fingerprint, pos), the fingerprints distinct) within
    ``layout.k``, each once; and statistics (oversized groups, largest group).
    One shuffle of packed rows, and a second of the oversized groups' members."""
    from pyspark import StorageLevel

    if max_group < 2:
        raise ValueError("max_group must be >= 2")
    n = partitions or reps.getNumPartitions()
    joined = (reps.mapPartitions(lambda it: dealt_rows(it, layout, n))
              .partitionBy(n, lambda p: p)
              .mapPartitions(lambda it: join_partition(it, layout, max_group))
              .persist(StorageLevel.MEMORY_AND_DISK))
    big = joined.filter(lambda r: r[0] == OVERSIZED).values().collect()
    pairs = joined.filter(lambda r: r[0] == PAIR).values()
    if big:
        # (each member once, spread over the partitions, then copied to its m bucket pairs)
        split = (joined.filter(lambda r: r[0] == DEALT).values().repartition(n)
                 .flatMap(lambda kv: bucket_pairs(*kv)).groupByKey(n)
                 .flatMap(lambda kv: group_pairs(kv, layout)))
        pairs = pairs.union(split)
    stats = {"oversized_groups": len(big), "largest_group": max(big, default=0)}
    return pairs, stats
