"""The Spark pair search's two sides (``dealt_rows``, ``join_partition``), run by
hand without Spark, against a brute-force scan: every pair within k once,
whatever the partitions, with oversized groups split. (The job itself, on
Spark, is ``test_spark_job.py``.)"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from scrapy_neardup.dedup.spark import pairs
from scrapy_neardup.dedup.store.layout import make_layout


def planted(seed: int, n: int) -> np.ndarray:
    """Distinct fingerprints: random ones, near-copies 1-3 bits away, and a dense cluster."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    src = base[rng.integers(0, n, size=n // 2)]
    flips = np.zeros(len(src), dtype=np.uint64)
    for _ in range(3):
        flips ^= np.uint64(1) << rng.integers(0, 64, size=len(src)).astype(np.uint64)
    dense = base[0] ^ (np.uint64(1) << rng.integers(0, 64, size=(60, 2)).astype(np.uint64)).sum(axis=1, dtype=np.uint64)
    return np.unique(np.concatenate([base, src ^ flips, dense]))


def brute_force(fps: np.ndarray, pos: np.ndarray, k: int) -> set[tuple[int, int, int]]:
    d = np.bitwise_count(fps[:, None] ^ fps[None, :])
    a, b = np.nonzero(np.triu(d <= k, 1))
    return {(int(min(pos[i], pos[j])), int(max(pos[i], pos[j])), int(d[i, j])) for i, j in zip(a, b)}


def by_hand(fps: np.ndarray, pos: np.ndarray, layout, n: int, max_group: int, chunks: int):
    """The job's steps without Spark: map tasks over chunks, the shuffle by partition, the join's
    tasks, then the oversized groups' buckets grouped and compared."""
    shuffled = defaultdict(list)
    for part in np.array_split(np.arange(len(fps)), chunks):
        for p, blob in pairs.dealt_rows(zip(fps[part].tolist(), pos[part].tolist()), layout, n):
            assert 0 <= p < n
            shuffled[p].append((p, blob))
    found, sizes, dealt = [], [], defaultdict(list)
    for p in range(n):
        for tag, item in pairs.join_partition(shuffled[p], layout, max_group):
            if tag == pairs.PAIR:
                found.append(item)
            elif tag == pairs.OVERSIZED:
                sizes.append(item)
            else:
                dealt[item[0]].append(item[1])
    masks, first_clean = layout.block_masks(), layout.first_clean_table()
    for (t, _, bi, bj), members in dealt.items():
        if bi == bj:
            found.extend(pairs.compare(t, [(f, q) for f, q, _ in members], None, layout.k, masks, first_clean))
        else:
            left = [(f, q) for f, q, b in members if b == bi]
            right = [(f, q) for f, q, b in members if b == bj]
            if left and right:
                found.extend(pairs.compare(t, left, right, layout.k, masks, first_clean))
    return found, sizes


@pytest.mark.parametrize("seed, blocks, n, max_group", [(0, 4, 1, 2000), (1, 4, 7, 2000), (2, 5, 3, 5),
                                                         (3, 6, 11, 3), (4, 4, 2, 2)])
def test_every_pair_within_k_once_whatever_the_partitions(seed, blocks, n, max_group):
    k = 3
    layout = make_layout(k, blocks)
    fps = planted(seed, 400)
    pos = np.random.default_rng(seed).permutation(len(fps)).astype(np.int64) * 3  # positions are not ranks
    found, sizes = by_hand(fps, pos, layout, n, max_group, chunks=5)
    assert len(found) == len(set(found)), "a pair came out twice"
    assert set(found) == brute_force(fps, pos, k)
    if max_group <= 5:
        assert sizes and max(sizes) > max_group  # the dense cluster was split


def test_a_group_lands_in_one_partition():
    # the map side's partition follows the key the join side groups by (the table's prefix)
    layout = make_layout(3, 5)
    fps = planted(7, 300)
    prefixes = layout.prefixes(fps)
    for t in range(layout.n_tables):
        part = pairs.partition_of(t, prefixes[t], 13)
        for p in np.unique(prefixes[t]):
            assert len(set(part[prefixes[t] == p].tolist())) == 1
