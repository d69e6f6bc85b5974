"""The Spark pair search's steps (``dealt_rows``, ``join_partition``,
``bucket_pairs``, ``group_pairs``), run by hand without Spark, against a
brute-force scan and the one-machine ``self_join``: every pair within k once,
whatever the partitions, with oversized groups split into buckets of at most
``max_group``. (The job itself, on Spark, is ``test_spark_job.py``.)"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from scrapy_neardup.dedup.spark import pairs
from scrapy_neardup.dedup.store.kernels import permute_all
from scrapy_neardup.dedup.store.layout import make_layout
from scrapy_neardup.dedup.store.self_join import join_layout, self_join


def planted(seed: int, n: int, dense: int = 60) -> np.ndarray:
    """Distinct fingerprints: random ones, near-copies 1-3 bits away, and a dense cluster."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    src = base[rng.integers(0, n, size=n // 2)]
    flips = np.zeros(len(src), dtype=np.uint64)
    for _ in range(3):
        flips ^= np.uint64(1) << rng.integers(0, 64, size=len(src)).astype(np.uint64)
    cluster = base[0] ^ (np.uint64(1) << rng.integers(0, 64, size=(dense, 2)).astype(np.uint64)).sum(
        axis=1, dtype=np.uint64)
    fps = np.unique(np.concatenate([base, src ^ flips, cluster]))
    return fps[rng.permutation(len(fps))]


def brute_force(fps: np.ndarray, pos: np.ndarray, k: int) -> set[tuple[int, int, int]]:
    d = np.bitwise_count(fps[:, None] ^ fps[None, :])
    a, b = np.nonzero(np.triu(d <= k, 1))
    return {(int(min(pos[i], pos[j])), int(max(pos[i], pos[j])), int(d[i, j])) for i, j in zip(a, b)}


def by_self_join(fps: np.ndarray, pos: np.ndarray, k: int) -> set[tuple[int, int, int]]:
    g = self_join(fps, k)
    return {(int(min(pos[a], pos[b])), int(max(pos[a], pos[b])), int(d))
            for a, b, d in zip(g.a.tolist(), g.b.tolist(), g.distance.tolist())}


def by_hand(fps: np.ndarray, pos: np.ndarray, layout, n: int, max_group: int, chunks: int):
    """The job's steps without Spark: map tasks over chunks, the shuffle by partition, the
    join's tasks, then the oversized groups' members to their bucket pairs, grouped, compared.
    Returns the pairs, the oversized groups' sizes and the largest bucket."""
    shuffled = defaultdict(list)
    for part in np.array_split(np.arange(len(fps)), chunks):
        for p, blob in pairs.dealt_rows(zip(fps[part].tolist(), pos[part].tolist()), layout, n):
            assert 0 <= p < n
            shuffled[p].append((p, blob))
    found, sizes, groups = [], [], defaultdict(list)
    for p in range(n):
        for tag, item in pairs.join_partition(shuffled[p], layout, max_group):
            if tag == pairs.PAIR:
                found.append(item)
            elif tag == pairs.OVERSIZED:
                sizes.append(item)
            else:
                for key, member in pairs.bucket_pairs(*item):
                    groups[key].append(member)
    largest_bucket = 0
    for key, members in groups.items():
        largest_bucket = max(largest_bucket, *(sum(1 for m in members if m[2] == b) for b in key[2:]))
        found.extend(pairs.group_pairs((key, members), layout))
    return found, sizes, largest_bucket


@pytest.mark.parametrize("seed, blocks, n, max_group", [(0, 4, 1, 2000), (1, 4, 7, 2000), (2, 5, 3, 5),
                                                         (3, 6, 11, 3), (4, 4, 2, 2), (5, 4, 1, 7),
                                                         (6, 5, 500, 4)])
def test_every_pair_within_k_once_whatever_the_partitions(seed, blocks, n, max_group):
    k = 3
    layout = make_layout(k, blocks)
    fps = planted(seed, 400)
    pos = np.random.default_rng(seed).permutation(len(fps)).astype(np.int64) * 3  # positions are not ranks
    found, sizes, largest_bucket = by_hand(fps, pos, layout, n, max_group, chunks=5)
    assert len(found) == len(set(found)), "a pair came out twice"
    assert set(found) == brute_force(fps, pos, k) == by_self_join(fps, pos, k)
    if max_group <= 7:
        assert sizes and max(sizes) > max_group  # the dense cluster was split ...
        assert largest_bucket <= max_group  # ... into buckets of at most max_group


def test_the_compiled_sort_path_and_the_join_layout():
    # 90,000 fingerprints in one partition: the radix sort by prefix (past 65,536 rows) and the
    # layout the job chooses for them, against the one-machine self-join
    fps = planted(9, 60_000, dense=200)
    pos = np.arange(len(fps), dtype=np.int64)
    layout = join_layout(3, len(fps))
    found, _, _ = by_hand(fps, pos, layout, 1, 2000, chunks=2)
    assert len(found) == len(set(found))
    assert set(found) == by_self_join(fps, pos, 3)


def test_k_zero_and_empty_input():
    layout = make_layout(0, 1)
    fps = planted(10, 200)
    found, _, _ = by_hand(fps, np.arange(len(fps), dtype=np.int64), layout, 4, 2000, chunks=3)
    assert found == []  # distinct fingerprints are at least 1 bit apart
    assert list(pairs.dealt_rows([], make_layout(3, 4), 4)) == []
    assert list(pairs.join_partition([], make_layout(3, 4), 2000)) == []


@pytest.mark.parametrize("blocks", [4, 5, 6])
def test_the_partition_follows_the_prefix_the_join_groups_by(blocks):
    # the map side deals a row by its table's prefix (``Layout.prefixes``); the join's task groups
    # rows by the top bits of the permuted value: the same number, so a group meets in one task
    layout = make_layout(3, blocks)
    fps = planted(7, 300)
    src, dst, mask = layout.shift_arrays()
    for t, prefixes in enumerate(layout.prefixes(fps)):
        top = permute_all(fps, t, src, dst, mask) >> np.uint64(64 - layout.prefix_bits(t))
        assert np.array_equal(prefixes, top)
