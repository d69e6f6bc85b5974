"""SimhashStore: exact against a brute-force Hamming scan, persistent, guarded."""

from __future__ import annotations

import math
import os
import multiprocessing as mp

import numpy as np
import pytest

from scrapy_neardup.dedup.store import SimhashStore, StoreError, StoreMismatchError, choose_layout, make_layout
from scrapy_neardup.dedup.store.tables import PermutedTables


def flip(x: int, bits) -> int:
    for b in bits:
        x ^= 1 << int(b)
    return x


def planted_set(rng, n_random: int, k: int, layout) -> tuple[np.ndarray, list[int]]:
    """Random fingerprints plus, for some, neighbours at every distance 0..k+1,
    with the flipped bits drawn inside each block in turn."""
    base = rng.integers(0, 2**64 - 1, size=n_random, dtype=np.uint64, endpoint=True)
    starts, pos = [], 64
    for w in layout.blocks:
        pos -= w
        starts.append((pos, w))
    extra = []
    for i, x in enumerate(base[: max(1, n_random // 4)].tolist()):
        d = i % (k + 2)
        lo, w = starts[i % len(starts)]
        # flips concentrated in one block when it is wide enough, else anywhere
        pool = np.arange(lo, lo + w) if w >= d else np.arange(64)
        extra.append(flip(x, rng.choice(pool, size=d, replace=False)))
    return np.concatenate([base, np.array(extra, dtype=np.uint64)]), extra


def brute(fps: np.ndarray, q: int, k: int) -> set[int]:
    return set(np.flatnonzero(np.bitwise_count(fps ^ np.uint64(q)) <= k).tolist())


def assert_query_equals_brute(got, fps: np.ndarray, q: int, k: int) -> None:
    """A query's matches (keys "u<index>") are brute force's, nearest first, with true distances."""
    assert {int(m.key[1:]) for m in got} == brute(fps, q, k), q
    assert [m.distance for m in got] == sorted(m.distance for m in got)
    assert all(m.distance == (m.fingerprint ^ q).bit_count() <= k for m in got)


def assert_pairs_equal_brute(store, fps: np.ndarray, k: int) -> None:
    """``store.pairs()`` (keys "u<index>") is every pair within k, each once."""
    dist = np.bitwise_count(fps[:, None] ^ fps[None, :])
    ii, jj = np.nonzero(np.triu(dist <= k, 1))
    expect = {(f"u{a}", f"u{b}", int(dist[a, b])) for a, b in zip(ii.tolist(), jj.tolist())}
    got_pairs = list(store.pairs())
    assert len(got_pairs) == len(set(got_pairs))
    assert {(a, b, d) if int(a[1:]) < int(b[1:]) else (b, a, d) for a, b, d in got_pairs} == expect


CASES = [(0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6), (4, 6), (6, 8), (8, 9)]


@pytest.mark.parametrize("k,blocks", CASES)
def test_queries_and_pairs_equal_brute_force(k, blocks):
    rng = np.random.default_rng(1000 + 10 * k + blocks)
    layout = make_layout(k, blocks)
    fps, planted = planted_set(rng, 1500, k, layout)
    store = SimhashStore.open(None, max_distance=k, layout=layout)
    store.tables.buffer_size = 64  # small levels: exercise buffer, delta and main merges
    store.tables.buf = np.empty(64, dtype=np.uint64)
    keys = [f"u{i}" for i in range(len(fps))]
    half = len(fps) // 2
    for i in range(half):
        store.add(int(fps[i]), keys[i])
        if i % 211 == 0:
            store.check_invariants()
    store.add_many(fps[half:], keys[half:])
    store.check_invariants()
    queries = np.concatenate([fps[:300], np.array(planted, dtype=np.uint64),
                              np.array([flip(p, [0]) for p in planted[:50]], dtype=np.uint64)])
    for q in queries.tolist():
        assert_query_equals_brute(store.query(q), fps, q, k)
    assert_pairs_equal_brute(store, fps, k)


@pytest.mark.parametrize("k,blocks", CASES)
def test_near_pairs_of_a_batch_equal_brute_force(k, blocks):
    """``Layout.near_pairs`` (a batch's own pairs, for the shared store's waves)
    is every pair within k, each once, exact repeats included."""
    rng = np.random.default_rng(2000 + 10 * k + blocks)
    layout = make_layout(k, blocks)
    fps, _ = planted_set(rng, 600, k, layout)
    fps = np.concatenate([fps, fps[:5], fps[:2]])  # exact repeats, one value three times
    dist = np.bitwise_count(fps[:, None] ^ fps[None, :])
    ii, jj = np.nonzero(np.triu(dist <= k, 1))
    a, b = layout.near_pairs(fps)
    assert sorted(zip(a.tolist(), b.tolist())) == sorted(zip(ii.tolist(), jj.tolist()))
    assert layout.near_pairs(fps[:1])[0].tolist() == []


def test_query_many_matches_query():
    rng = np.random.default_rng(5)
    fps = rng.integers(0, 2**64 - 1, size=500, dtype=np.uint64)
    with SimhashStore.open(None) as s:
        s.add_many(fps, [str(i) for i in range(500)])
        qs = np.array([flip(int(x), [3, 40]) for x in fps[:50]], dtype=np.uint64)
        assert s.query_many(qs) == [s.query(int(q)) for q in qs]


def test_layout_choice_follows_the_paper():
    assert (choose_layout(3, 10**6).n_tables, choose_layout(3, 10**6).min_prefix_bits) == (4, 16)
    assert choose_layout(3, 10**9).n_tables == 10
    lay = choose_layout(3, 2**34)
    assert lay.n_tables == 20 and lay.min_prefix_bits >= 31
    assert choose_layout(0, 10).n_tables == 1
    for k in range(9):
        lay = choose_layout(k, 10**6)
        assert lay.n_tables == math.comb(len(lay.blocks), k)
    with pytest.raises(ValueError):
        make_layout(9, 10)


def test_invariant_check_catches_corruption():
    t = PermutedTables(make_layout(3, 4), buffer_size=8)
    t.add_many(np.arange(100, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    t.compact()
    t.check_invariants()
    t.main[2, 5], t.main[2, 6] = t.main[2, 6], t.main[2, 5]
    with pytest.raises(AssertionError):
        t.check_invariants()


def test_bad_fingerprints_rejected():
    with SimhashStore.open(None) as s:
        for bad in (-1, 2**64):
            with pytest.raises(ValueError):
                s.add(bad, "x")
        with pytest.raises(ValueError):
            s.add_many([1, 2], ["only one"])


# -- persistence ---------------------------------------------------------------


def test_reopen_restores_everything(tmp_path):
    rng = np.random.default_rng(9)
    fps = rng.integers(0, 2**64 - 1, size=5000, dtype=np.uint64)
    path = tmp_path / "store"
    with SimhashStore.open(path, scheme="s1", capacity=10_000) as s:
        s.add_many(fps[:4000], [f"k{i}" for i in range(4000)])
        for i in range(4000, 5000):
            s.add(int(fps[i]), f"k{i}")
    with SimhashStore.open(path, scheme="s1") as s:
        assert len(s) == 5000
        s.check_invariants()
        assert np.array_equal(s.fingerprints(), fps)
        assert s.query(int(fps[4500]))[0].key == "k4500"
        s.add(12345, "new")
    with SimhashStore.open(path) as s:
        assert len(s) == 5001 and s.query(12345)[0].key == "new"


def test_flushed_records_survive_a_crash(tmp_path):
    """A process killed without close(): every flushed record is there on reopen."""
    path = tmp_path / "store"
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_write_then_die, args=(str(path),))
    p.start()
    p.join(60)
    assert p.exitcode == 9
    with SimhashStore.open(path) as s:
        assert len(s) >= 3000  # 3000 flushed; the unflushed tail may or may not be there
        s.check_invariants()
        assert s.query(2999 * 0x9E3779B97F4A7C15 % 2**64)[0].key == "k2999"


def _write_then_die(path: str) -> None:
    import os

    s = SimhashStore.open(path, commit_every=10**9, commit_interval=1e9)
    for i in range(3000):
        s.add(i * 0x9E3779B97F4A7C15 % 2**64, f"k{i}")
    s.flush()
    for i in range(3000, 3100):
        s.add(i * 0x9E3779B97F4A7C15 % 2**64, f"k{i}")
    os._exit(9)


def test_stale_or_missing_snapshot_is_rebuilt(tmp_path):
    path = tmp_path / "store"
    fps = np.arange(1, 70_001, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    with SimhashStore.open(path) as s:
        s.add_many(fps, [str(i) for i in range(len(fps))])
    snaps = list(path.glob("tables-*.npy"))
    assert snaps
    for f in snaps:
        f.write_bytes(b"garbage")
    with SimhashStore.open(path) as s:
        assert len(s) == len(fps)
        s.check_invariants()


def test_mismatched_settings_refused(tmp_path):
    path = tmp_path / "store"
    SimhashStore.open(path, max_distance=3, scheme="A").close()
    with pytest.raises(StoreMismatchError, match="max_distance=3"):
        SimhashStore.open(path, max_distance=4)
    with pytest.raises(StoreMismatchError, match="scheme"):
        SimhashStore.open(path, scheme="B")
    with pytest.raises(StoreMismatchError, match="layout"):
        SimhashStore.open(path, layout=make_layout(3, 5))
    SimhashStore.open(path, scheme="A").close()


def test_one_writer_many_readers(tmp_path):
    path = tmp_path / "store"
    w = SimhashStore.open(path)
    w.add(1, "one")
    w.flush()
    with pytest.raises(StoreError, match="open for writing by another process"):
        SimhashStore.open(path)
    r = SimhashStore.open(path, readonly=True)
    assert r.query(1)[0].key == "one"
    w.add(2**40, "two")
    w.flush()
    assert r.refresh() == 1
    assert r.query(2**40)[0].key == "two"
    with pytest.raises(StoreError, match="read-only"):
        r.add(5, "x")
    r.close()
    w.close()
    SimhashStore.open(path).close()  # the lock is released


@pytest.mark.parametrize("k", [0, 3, 5])
def test_check_and_add_many_equals_one_by_one(k):
    rng = np.random.default_rng(77 + k)
    layout = make_layout(k, k + 1 if k else 1)
    fps, _ = planted_set(rng, 3000, k, layout)
    rng.shuffle(fps)
    keys = [f"d{i}" for i in range(len(fps))]
    one = SimhashStore.open(None, max_distance=k, layout=layout)
    expected = [one.check_and_add(int(x), key) for x, key in zip(fps.tolist(), keys)]
    batch = SimhashStore.open(None, max_distance=k, layout=layout)
    got = batch.check_and_add_many(fps[:1000], keys[:1000]) + batch.check_and_add_many(fps[1000:], keys[1000:])
    assert [None if m is None else (m.distance, m.key) for m in got] == \
        [None if m is None else (m.distance, m.key) for m in expected]
    batch.check_invariants()
    assert np.array_equal(batch.fingerprints(), one.fingerprints())


@pytest.mark.parametrize("k,blocks", [(0, 1), (3, 4), (5, 7)])
def test_without_kernels_equals_brute_force_and_hands_over(k, blocks):
    """The path a crawl takes while the store's kernels compile (exhaustive
    scans, adds kept in the buffer) gives the brute-force answers, and the
    first calls after the kernels are ready sort its buffer in, mid-batch too."""
    rng = np.random.default_rng(500 + k)
    layout = make_layout(k, blocks)
    fps, planted = planted_set(rng, 1200, k, layout)
    rng.shuffle(fps)
    keys = [f"u{i}" for i in range(len(fps))]
    ref = SimhashStore.open(None, max_distance=k, layout=layout, compiled=True)
    store = SimhashStore.open(None, max_distance=k, layout=layout, compiled=False)
    store.tables.buffer_size = 64
    for phase, (lo, hi) in enumerate([(0, 300), (300, 700), (700, len(fps))]):
        if phase == 1:
            store.tables.compiled = True  # the kernels became ready: the grown buffer is sorted in
        if phase == 2:
            store.tables.compiled = None  # and follows dedup.jit from here on (ready in tests)
        expected = ref.check_and_add_many(fps[lo:hi], keys[lo:hi])
        got = [store.check_and_add(int(x), key) for x, key in zip(fps[lo:hi].tolist(), keys[lo:hi])] \
            if phase == 0 else store.check_and_add_many(fps[lo:hi], keys[lo:hi])
        assert [None if m is None else m.distance for m in got] == \
            [None if m is None else m.distance for m in expected]
        stored = store.fingerprints()
        for q in np.concatenate([fps[lo:lo + 50], np.array(planted[:30], dtype=np.uint64)]).tolist():
            got_q = store.query(q)
            assert {m.key for m in got_q} == {m.key for m in ref.query(q)}
            assert len(got_q) == len(brute(stored, q, k))
        store.check_invariants()
    assert np.array_equal(store.fingerprints(), ref.fingerprints())


def test_store_files_are_the_owners_only(tmp_path):
    where = tmp_path / "store"
    with SimhashStore.open(where) as store:
        store.add_many(np.arange(2000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15), [f"k{i}" for i in range(2000)])
        store.flush()
    assert where.stat().st_mode & 0o777 == 0o700
    files = [p for p in where.iterdir()]
    assert any(p.suffix == ".npy" for p in files) and any(p.name == "store.sqlite3" for p in files)
    for p in files:
        assert p.stat().st_mode & 0o077 == 0, p.name


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_store_is_a_clear_error(tmp_path, damage):
    where = tmp_path / "store"
    with SimhashStore.open(where) as store:
        store.add_many(np.arange(5000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15), [f"k{i}" for i in range(5000)])
    db = where / "store.sqlite3"
    if damage == "garbage":
        db.write_bytes(b"this is not a database" * 100)
    else:
        os.truncate(db, db.stat().st_size // 3)
    with pytest.raises(StoreError, match=f"the store at {where} is damaged"):
        SimhashStore.open(where)
    # and the lock is released: once the damage is repaired, it opens
    db.unlink()
    SimhashStore.open(where).close()
