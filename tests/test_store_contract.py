"""One contract, every backend: the in-memory, embedded (SQLite) and Redis
stores (one redis-server, and a real 3-node Redis Cluster) give the same
answers, equal to a brute-force Hamming scan."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_neardup.dedup.store import SimhashStore, StoreMismatchError, make_layout
from tests.test_store import assert_pairs_equal_brute, assert_query_equals_brute, flip, planted_set

BACKENDS = ["memory", "sqlite", "redis", "cluster"]


@pytest.fixture(params=BACKENDS)
def open_store(request, tmp_path):
    """open_store(**kw) opens a new store of the backend under test (the same
    one again on each call)."""
    opened = []
    if request.param == "memory":
        location = None
    elif request.param == "sqlite":
        location = tmp_path / "store"
    elif request.param == "redis":
        location = request.getfixturevalue("redis_url")
    else:
        location = request.getfixturevalue("redis_cluster_url")

    def opener(**kw):
        if location is None and opened:
            return opened[0]
        s = SimhashStore.open(location, **kw)
        opened.append(s)
        return s

    opener.kind = request.param
    yield opener
    for s in opened:
        if getattr(s, "drop", None) and s.client is not None:
            s.drop()
        s.close()


@pytest.mark.parametrize("k,blocks", [(3, 4), (2, 4), (5, 6)])
def test_queries_equal_brute_force(open_store, k, blocks):
    rng = np.random.default_rng(2000 + k)
    layout = make_layout(k, blocks)
    fps, planted = planted_set(rng, 1200, k, layout)
    s = open_store(max_distance=k, layout=layout)
    keys = [f"u{i}" for i in range(len(fps))]
    for i in range(100):
        s.add(int(fps[i]), keys[i])
    s.add_many(fps[100:], keys[100:])
    s.check_invariants()
    assert len(s) == len(fps)
    queries = np.concatenate([fps[:150], np.array(planted[:150], dtype=np.uint64),
                              np.array([flip(p, [0]) for p in planted[:50]], dtype=np.uint64)])
    for q, got in zip(queries.tolist(), s.query_many(queries)):
        assert_query_equals_brute(got, fps, q, k)
    assert_pairs_equal_brute(s, fps, k)
    assert np.array_equal(s.fingerprints(), fps)


def test_check_and_add_many_equals_one_by_one(open_store):
    rng = np.random.default_rng(78)
    layout = make_layout(3, 4)
    fps, _ = planted_set(rng, 1500, 3, layout)
    rng.shuffle(fps)
    keys = [f"d{i}" for i in range(len(fps))]
    one = SimhashStore.open(None, max_distance=3, layout=layout)
    expected = [one.check_and_add(int(x), key) for x, key in zip(fps.tolist(), keys)]
    s = open_store(max_distance=3, layout=layout)
    got = s.check_and_add_many(fps[:700], keys[:700]) + [s.check_and_add(int(x), kk) for x, kk in
                                                         zip(fps[700:800].tolist(), keys[700:800])]
    got += s.check_and_add_many(fps[800:], keys[800:])
    assert [None if m is None else (m.distance, m.key, m.fingerprint) for m in got] == \
        [None if m is None else (m.distance, m.key, m.fingerprint) for m in expected]
    s.check_invariants()
    assert np.array_equal(s.fingerprints(), one.fingerprints())


def test_exact_duplicates_and_nearest_oldest_match(open_store):
    s = open_store()
    assert s.check_and_add(7, "a") is None
    s.add(7, "b")
    assert [m.key for m in s.query(7)] == ["a", "b"]
    assert s.check_and_add(7, "b").key == "a"  # equally near: the oldest
    assert s.check_and_add(7 ^ 0b111, "c").key == "a"
    assert s.check_and_add(7 ^ 0b1111, "d") is None  # 4 bits: stored
    assert sorted(s.pairs()) == [("a", "b", 0)]
    assert len(s) == 3
    with pytest.raises(ValueError):
        s.add(2**64, "x")


def test_all_64_bits_are_exact(open_store):
    """Fingerprints above 2**53 that differ only in low bits (a double, as a
    sorted-set score, would merge them) stay apart."""
    s = open_store()
    top = 2**64 - 1
    assert s.check_and_add(top, "top") is None
    assert s.check_and_add(top ^ 0b1111, "four") is None  # 4 bits from top: kept
    m = s.check_and_add(top ^ 0b1110000, "three")  # 3 bits from top, 7 from four
    assert (m.key, m.distance, m.fingerprint) == ("top", 3, top)
    assert {m.fingerprint for m in s.query(top ^ 0b11)} == {top, top ^ 0b1111}
    assert sorted(s.fingerprints().tolist()) == [top ^ 0b1111, top]


def test_settings_are_the_stores(open_store):
    if open_store.kind == "memory":
        pytest.skip("an in-memory store has nothing to reopen")
    s = open_store(max_distance=3, scheme="A", capacity=1000)
    s.add(1, "one")
    s.flush()
    if open_store.kind == "sqlite":
        s.close()
    with pytest.raises(StoreMismatchError, match="max_distance=3"):
        open_store(max_distance=4)
    with pytest.raises(StoreMismatchError, match="scheme"):
        open_store(scheme="B")
    with pytest.raises(StoreMismatchError, match="layout"):
        open_store(layout=make_layout(3, 5))
    again = open_store(scheme="A", capacity=10**9)  # an existing store keeps its own layout
    assert again.layout == s.layout and again.query(1)[0].key == "one"


def test_a_key_the_store_cannot_hold_is_refused_as_it_is_added(open_store):
    """A key that is not text, or text UTF-8 cannot hold (a lone surrogate: an ``os.fsdecode`` of a
    non-UTF-8 file name), is refused at once with ``ValueError``, on every backend. The file store took
    it, then failed its whole group of pending records at the commit (and every later one): the good
    records around it were lost too."""
    GOOD, GOOD2, BAD = 0x0F0F0F0F0F0F0F0F, 0xF0F0F0F0F0F0F0F0, 0x00FF00FF00FF00FF  # (32 bits apart, each pair)
    s = open_store(max_distance=3, scheme="A")
    s.add(GOOD, "good")
    for bad in ("a\udc80b", None, 123):
        for add in (lambda k: s.add(BAD, k), lambda k: s.add_many([BAD], [k]), lambda k: s.check_and_add(BAD, k),
                    lambda k: s.check_and_add_many([BAD], [k])):
            with pytest.raises(ValueError, match="store key"):
                add(bad)
    s.add(GOOD2, "good2")
    s.flush()
    assert [m.key for m in s.query(GOOD)] == ["good"] and [m.key for m in s.query(GOOD2)] == ["good2"]
    if open_store.kind == "sqlite":
        s.close()
        again = open_store(max_distance=3, scheme="A")
        assert len(again) == 2 and again.query(BAD) == []
