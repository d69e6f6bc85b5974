"""The streaming self-join, the greedy decision and the decision by components, against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_neardup.dedup.store.component_decide import decide_by_components
from scrapy_neardup.dedup.store.greedy import decide, greedy_keep
from scrapy_neardup.dedup.store.layout import choose_layout, make_layout
from scrapy_neardup.dedup.store.self_join import collapse, self_join
from scrapy_neardup.dedup.store.tables import PermutedTables


def flip(x: int, rng, d: int) -> int:
    for bit in rng.choice(64, size=d, replace=False):
        x ^= 1 << int(bit)
    return x


def corpus(seed: int, n: int, k: int = 3) -> np.ndarray:
    """Random fingerprints with planted near-copies (0..k+1 bits), exact
    copies, chains A-B-C and a dense cluster, shuffled into input order."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True).tolist()
    for i in range(n // 3):  # near-copies of earlier or later records
        out.append(flip(out[int(rng.integers(len(out)))], rng, int(rng.integers(0, k + 2))))
    for _ in range(n // 20):  # chains: each link within k of the one before
        x = out[int(rng.integers(n))]
        for _ in range(int(rng.integers(2, 5))):
            x = flip(x, rng, int(rng.integers(max(1, k - 1), k + 1)))
            out.append(x)
    centre = int(rng.integers(0, 2**63))
    out.extend(flip(centre, rng, int(rng.integers(0, k + 1))) for _ in range(n // 10))  # dense cluster
    out.extend([out[3]] * 5)  # exact copies
    arr = np.array(out, dtype=np.uint64)
    rng.shuffle(arr)
    return arr


def brute_pairs(fps: np.ndarray, k: int) -> set[tuple[int, int, int]]:
    d = np.bitwise_count(fps[:, None] ^ fps[None, :])
    a, b = np.nonzero(np.triu(d <= k, 1))
    return {(int(x), int(y), int(d[x, y])) for x, y in zip(a, b)}


def brute_greedy(fps: np.ndarray, k: int) -> list[bool]:
    kept: list[int] = []
    out = []
    for x in fps.tolist():
        ok = all((x ^ fps[j].item()).bit_count() > k for j in kept)
        if ok:
            kept.append(len(out))
        out.append(ok)
    return out


def expand(graph) -> set[tuple[int, int, int]]:
    """The graph's pairs over every row (copies included), for comparing with brute force."""
    rows_of: dict[int, list[int]] = {}
    for r, f in enumerate(graph.first.tolist()):
        rows_of.setdefault(f, []).append(r)
    out = set()
    for rows in rows_of.values():
        out.update((x, y, 0) for i, x in enumerate(rows) for y in rows[i + 1:])
    for a, b, d in zip(graph.a.tolist(), graph.b.tolist(), graph.distance.tolist()):
        for x in rows_of[a]:
            for y in rows_of[b]:
                out.add((min(x, y), max(x, y), d))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 4])
def test_pairs_equal_brute_force(seed, k):
    fps = corpus(seed, 300, k)
    graph = self_join(fps, k)
    assert len(set(zip(graph.a.tolist(), graph.b.tolist()))) == len(graph.a)  # each pair once
    assert np.all(graph.a < graph.b)
    assert expand(graph) == brute_pairs(fps, k)


@pytest.mark.parametrize("blocks", [4, 5, 6])
def test_any_layout_gives_the_same_pairs(blocks):
    fps = corpus(7, 400)
    base = self_join(fps, 3)
    other = self_join(fps, 3, make_layout(3, blocks))
    key = lambda g: sorted(zip(g.a.tolist(), g.b.tolist(), g.distance.tolist()))  # noqa: E731
    assert key(base) == key(other)


def test_layout_must_match_k():
    with pytest.raises(ValueError, match="k=3"):
        self_join(np.zeros(3, dtype=np.uint64), 2, make_layout(3, 4))


def test_collapse_names_first_rows():
    values, firsts, first_of_row = collapse(np.array([5, 1, 5, 5, 1, 9], dtype=np.uint64))
    assert values.tolist() == [1, 5, 9]
    assert firsts.tolist() == [1, 0, 5]
    assert first_of_row.tolist() == [0, 1, 0, 0, 1, 5]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k", [2, 3])
def test_greedy_equals_sequential_brute_force(seed, k):
    fps = corpus(100 + seed, 250, k)
    graph = self_join(fps, k)
    dec = decide(graph)
    assert dec.kept.tolist() == brute_greedy(fps, k)
    # the oracle property: no kept pair within k, every drop's twin kept, earlier and within k
    kept = np.flatnonzero(dec.kept)
    kf = fps[kept]
    dk = np.bitwise_count(kf[:, None] ^ kf[None, :])
    assert not np.any(np.triu(dk <= k, 1))
    for r in np.flatnonzero(~dec.kept).tolist():
        t = int(dec.twin[r])
        assert 0 <= t < r and dec.kept[t]
        assert int(dec.distance[r]) == (int(fps[r]) ^ int(fps[t])).bit_count() <= k
        # the nearest kept neighbour before the first copy of its fingerprint (itself, if kept)
        earlier = kept[kept <= graph.first[r]]
        assert dec.distance[r] == np.bitwise_count(fps[earlier] ^ fps[r]).min()


def test_greedy_equals_the_stores_sequential_check():
    fps = corpus(42, 3000)
    graph = self_join(fps, 3)
    dec = decide(graph)
    tables = PermutedTables(choose_layout(3, len(fps)), compiled=True)
    d, _ = tables.check_and_add_many(fps)
    assert dec.kept.tolist() == (d < 0).tolist()
    single = np.bincount(graph.first, minlength=len(fps))[graph.first] == 1  # (no copy named another twin)
    assert dec.distance[single & ~dec.kept].tolist() == d[single & (d >= 0)].tolist()


def test_chain_keeps_both_ends():
    a = 0
    b = a ^ 0b111           # 3 from a
    c = b ^ 0b111000        # 3 from b, 6 from a
    d = c ^ 0b1000000       # 1 from c
    dec = decide(self_join(np.array([a, b, c, d, b], dtype=np.uint64), 3))
    assert dec.kept.tolist() == [True, False, True, False, False]
    assert dec.twin.tolist() == [-1, 0, -1, 2, 0]
    assert dec.distance.tolist() == [-1, 3, -1, 1, 3]


def test_copies_of_a_dropped_row_take_its_twin():
    a, b = 0, 0b11
    dec = decide(self_join(np.array([a, b, b, a, b], dtype=np.uint64), 3))
    assert dec.kept.tolist() == [True, False, False, False, False]
    assert dec.twin.tolist() == [-1, 0, 0, 0, 0]
    assert dec.distance.tolist() == [-1, 2, 2, 0, 2]


def test_dense_copies_do_not_enumerate_pairs():
    # 200,000 copies of one record and 2,000 within 1-2 bits of it: the pairs are between distinct
    # values only (a few million), not the 2 * 10**10 pairs of rows
    rng = np.random.default_rng(3)
    centre = int(rng.integers(0, 2**63))
    near = [centre ^ (1 << i) ^ (1 << j) for i in range(64) for j in range(i, 64)][:2000]
    fps = np.array([centre] * 200_000 + near, dtype=np.uint64)
    rng.shuffle(fps)
    graph = self_join(fps, 3)
    assert graph.n_distinct == len(set(near) | {centre})
    dec = decide(graph)
    assert dec.n_kept == 1 and dec.kept[0]


def test_greedy_rejects_bad_pairs():
    with pytest.raises(ValueError, match="a < b"):
        greedy_keep(3, np.array([1]), np.array([1]), np.array([0]))
    with pytest.raises(ValueError, match="a < b"):
        greedy_keep(3, np.array([1]), np.array([3]), np.array([0]))


def test_empty_and_tiny():
    for fps in (np.empty(0, dtype=np.uint64), np.array([7], dtype=np.uint64)):
        g = self_join(fps, 3)
        assert len(g.a) == 0
        assert decide(g).kept.all()
    g = self_join(np.array([1, 1, 2], dtype=np.uint64), 0)
    assert decide(g).kept.tolist() == [True, False, True]


def test_radix_path_equals_the_stores_join():
    # past RADIX_MIN_SIZE the tables and the collapse are radix-sorted by prefix: same pairs as the
    # store's all-tables join (PermutedTables.row_pairs), copies included
    rng = np.random.default_rng(11)
    base = rng.integers(0, 2**64 - 1, size=150_000, dtype=np.uint64, endpoint=True)
    flips = np.zeros(40_000, dtype=np.uint64)
    for _ in range(3):
        flips |= np.uint64(1) << rng.integers(0, 64, size=40_000).astype(np.uint64)
    fps = np.concatenate([base, base[:40_000] ^ flips, base[:3000]])
    rng.shuffle(fps)
    graph = self_join(fps, 3)
    tables = PermutedTables(choose_layout(3, len(fps)), compiled=True)
    tables.add_many(fps)
    ra, rb, rd = tables.row_pairs()
    assert expand(graph) == set(zip(ra.tolist(), rb.tolist(), rd.tolist()))
    values, firsts, first_of_row = collapse(fps)
    assert np.array_equal(values, np.unique(fps))
    assert np.all(fps[firsts] == values) and np.all(fps[first_of_row] == fps)
    assert np.all(first_of_row <= np.arange(len(fps)))


def test_the_stores_pairs_of_a_dense_exact_copy_cluster_stay_within_memory():
    # 300,000 copies of one record (4.5 x 10**10 pairs of rows) and 500 records 1-2 bits from it: the
    # store's pair graph collapses the copies (the pairs of 501 distinct values), and its pairs() takes
    # the row pairs in bounded chunks, so neither holds the 4.5 x 10**10 (the tables' old row_pairs did)
    import itertools
    import tracemalloc

    from scrapy_neardup.dedup.store import SimhashStore

    rng = np.random.default_rng(8)
    centre = int(rng.integers(0, 2**63))
    near = sorted({centre ^ (1 << int(i)) ^ (1 << int(j)) for i, j in rng.integers(0, 64, size=(800, 2))} - {centre})
    near = near[:500]
    fps = np.array([centre] * 300_000 + near, dtype=np.uint64)
    rng.shuffle(fps)
    with SimhashStore.open(None, max_distance=3, capacity=len(fps)) as store:
        store.add_many(fps, [str(i) for i in range(len(fps))])
        tracemalloc.start()
        try:
            graph = store.pair_graph()
            taken = sum(1 for _ in itertools.islice(store.pairs(), 300_000))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert taken == 300_000
    assert peak < 300 * 2**20, f"{peak / 2**20:.0f} MB"
    ref = self_join(fps, 3)
    assert graph.n_distinct == len(near) + 1 and np.array_equal(graph.first, ref.first)
    key = lambda g: sorted(zip(g.a.tolist(), g.b.tolist(), g.distance.tolist()))  # noqa: E731
    assert key(graph) == key(ref)
    assert decide(graph).kept.tolist() == decide(ref).kept.tolist()


def test_row_pairs_in_chunks_are_every_pair_of_rows_once():
    fps = corpus(9, 400)
    fps = np.concatenate([fps, fps[:30], fps[:4], fps[:4]])
    tables = PermutedTables(choose_layout(3, len(fps)), compiled=True)
    tables.add_many(fps)
    chunks = list(tables.iter_row_pairs(chunk=16))
    assert all(len(a) < 32 for a, _, _ in chunks)
    got = [(int(x), int(y), int(d)) for a, b, dd in chunks for x, y, d in zip(a, b, dd)]
    assert len(got) == len(set(got))
    assert set(got) == brute_pairs(fps, 3)
    ra, rb, rd = tables.row_pairs()
    assert set(zip(ra.tolist(), rb.tolist(), rd.tolist())) == set(got)


def test_the_batch_warmup_compiles_the_batch_kernels():
    # `neardup warmup` (the batch group) compiles the self-join's and the decision's kernels; a crawl does not
    import subprocess
    import sys

    code = ("from scrapy_neardup.dedup.store import batch_warmup, greedy, kernels, self_join\n"
            "batch_warmup.warm_compiled()\n"
            "print(all(f.signatures for f in (self_join._radix_pass, self_join._collapse, greedy._decide,\n"
            "                                 kernels.self_join_table_union, kernels.uf_roots)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    assert out.stdout.strip() == "True"


# -- the decision by components (no pair list held) -------------------------------

def same(a, b) -> bool:
    return (np.array_equal(a.kept, b.kept) and np.array_equal(a.twin, b.twin)
            and np.array_equal(a.distance, b.distance))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("scan_max", [1, 3, 10**6])
def test_same_decision_as_the_pair_list(seed, k, scan_max):
    fps = corpus(seed, 400, k)
    out = decide_by_components(fps, k, scan_max=scan_max)
    assert same(out.decision, decide(self_join(fps, k)))
    assert out.decision.kept.tolist() == brute_greedy(fps, k)
    assert out.pairs == len(self_join(fps, k).a)


def skewed(seed: int, n: int) -> np.ndarray:
    """Random values plus clusters of exact repeats and 1-3-bit variants of a
    few templates, one cluster far larger than the batch, in random order."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True).tolist()
    for size in (3000, 400, 40, 5):
        centre = int(rng.integers(0, 2**63))
        out.extend(centre if rng.random() < 0.6 else flip(centre, rng, int(rng.integers(1, 4)))
                   for _ in range(size))
    arr = np.array(out, dtype=np.uint64)
    rng.shuffle(arr)
    return arr


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scan_max", [100, 10**6])
def test_skewed_clusters_scanned_or_joined(seed, scan_max):
    fps = skewed(seed, 20_000)
    ref = decide(self_join(fps, 3))
    out = decide_by_components(fps, 3, scan_max=scan_max)
    assert same(out.decision, ref)
    assert out.largest > 100 and out.components >= 4
    assert (out.joined >= 1) if scan_max == 100 else (out.joined == 0)  # the clusters past 100 values are joined
    kept = np.flatnonzero(out.decision.kept)  # the oracle: no kept pair within k, every twin within k and earlier
    assert not len(self_join(fps[kept], 3).a)
    dropped = np.flatnonzero(~out.decision.kept)
    twins = out.decision.twin[dropped]
    assert np.all(twins < dropped) and np.all(out.decision.kept[twins])
    assert np.array_equal(np.bitwise_count(fps[dropped] ^ fps[twins]), out.decision.distance[dropped])
    assert out.decision.distance[dropped].max() <= 3


def test_a_given_layout_and_its_check():
    fps = corpus(7, 300, 3)
    out = decide_by_components(fps, 3, layout=make_layout(3, 5))
    assert same(out.decision, decide(self_join(fps, 3)))
    with pytest.raises(ValueError, match="k=3"):
        decide_by_components(fps, 2, layout=make_layout(3, 5))
    with pytest.raises(ValueError, match="scan_max"):
        decide_by_components(fps, 3, scan_max=0)
    with pytest.raises(ValueError, match="k must be"):
        decide_by_components(fps, 64)


def test_empty_tiny_and_k0():
    for fps in ([], [5], [5, 5, 5], [1, 3]):
        arr = np.array(fps, dtype=np.uint64)
        for k in (0, 3):
            out = decide_by_components(arr, k)
            assert same(out.decision, decide(self_join(arr, k)))
    out = decide_by_components(np.array([1, 2, 4], dtype=np.uint64), 3)
    assert (out.components, out.largest, out.joined, out.comparisons) == (1, 3, 0, 2)
    out = decide_by_components(np.arange(0, 2**40, 2**20, dtype=np.uint64)[:1], 3)
    assert (out.pairs, out.components, out.joined) == (0, 0, 0)
