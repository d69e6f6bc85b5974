"""Several processes race ``check_and_add`` on one shared store: of planted
clusters of near-duplicates submitted at the same moment by every process,
exactly one member of each is admitted, every round, on one Redis and on a
3-node Redis Cluster. And a process killed while it holds reservations
blocks the others no longer than the lease."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from scrapy_neardup.dedup.store import SimhashStore, StoreError, StoreUnavailable
from scrapy_neardup.dedup.store.redis import redact

PROCESSES = 4
ROUNDS = int(os.environ.get("NEARDUP_RACE_ROUNDS", "12"))
CLUSTERS = 40


def planted_clusters(seed: int, n: int) -> list[list[int]]:
    """n clusters of PROCESSES fingerprints, pairwise within 3 bits: a centre
    and flips of bits from a 3-bit set, the bits in one to three blocks (so the
    members share the buckets of one to three tables)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        centre = int(rng.integers(0, 2**64 - 1, dtype=np.uint64, endpoint=True))
        blocks = rng.choice(4, size=int(rng.integers(1, 4)), replace=False)
        bits: list[int] = []
        while len(bits) < 3:
            b = int(rng.choice(blocks)) * 16 + int(rng.integers(0, 16))
            if b not in bits:
                bits.append(b)
        members = []
        for mask in range(8):
            fp = centre
            for j, b in enumerate(bits):
                if mask >> j & 1:
                    fp ^= 1 << b
            members.append(fp)
        order = rng.permutation(8)
        out.append([members[i] for i in order[:PROCESSES]])
    return out


def racer(url: str, me: int, barrier, results) -> None:
    store = SimhashStore.open(url)
    for rnd in range(ROUNDS):
        clusters = planted_clusters(rnd, CLUSTERS)
        mine = [c[me] for c in clusters]
        keys = [f"r{rnd}c{i}p{me}" for i in range(CLUSTERS)]
        barrier.wait()
        # every third round all processes send pipelined batches (batches once held each
        # other's finished reservations hostage until the lease ran out: two admitted);
        # otherwise half of them batches, half single calls
        if rnd % 3 == 0 or (rnd + me) % 2:
            got = store.check_and_add_many(mine, keys)
        else:
            got = [store.check_and_add(fp, key) for fp, key in zip(mine, keys)]
        results.put((rnd, me, [m is None for m in got]))
    store.close()


def test_exactly_one_of_each_planted_cluster_is_admitted(shared_store_url):
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=racer, args=(shared_store_url, p, barrier, results)) for p in range(PROCESSES)]
    for p in procs:
        p.start()
    admitted = np.zeros((ROUNDS, CLUSTERS), dtype=int)
    try:
        for _ in range(ROUNDS * PROCESSES):
            rnd, _me, flags = results.get(timeout=240)
            admitted[rnd] += np.array(flags, dtype=int)
    finally:
        for p in procs:
            p.join(30)
            if p.exitcode is None:
                p.kill()
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    assert (admitted == 1).all(), f"clusters admitted other than once: {np.argwhere(admitted != 1).tolist()}"
    with SimhashStore.open(shared_store_url) as s:
        assert len(s) == ROUNDS * CLUSTERS
        s.check_invariants()
        s.drop()


def holder(url: str, fps: list[int], ready) -> None:
    """Reserve every table for ``fps``, then hang (to be killed) before committing."""
    from scrapy_neardup.dedup.store.redis import cluster

    store = SimhashStore.open(url)
    arr = np.array(fps, dtype=np.uint64)
    names = store.keyspace.names(store.layout.prefixes(arr), arr)
    cluster.commit = lambda *args, **kw: None  # (hold the reservations, never commit: this process only)
    dups = cluster.reserve(store, fps, [""] * len(fps), names, list(range(len(fps))))
    assert not dups
    ready.set()
    time.sleep(600)


def test_a_killed_processes_reservations_expire(shared_store_url):
    url = shared_store_url + "&lease=1.5"
    clusters = planted_clusters(99, 10)
    fps, near = [c[0] for c in clusters], [c[1] for c in clusters]
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=holder, args=(url, fps, ready))
    p.start()
    try:
        assert ready.wait(60)
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.join()
    with SimhashStore.open(url) as s:
        t0 = time.monotonic()
        got = s.check_and_add_many(near, [f"n{i}" for i in range(len(near))])
        waited = time.monotonic() - t0
        assert got == [None] * len(near)  # the dead process never committed: these are the first
        assert waited < 60  # (it waited for the lease to run out, not forever)
        s.check_invariants()
        s.drop()


def test_unreachable_or_refused_says_where_without_the_password(redis_server, tmp_path):
    from conftest import free_port
    from tests.fixtures.redis_servers import RedisServer

    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0?prefix=x"
    with pytest.raises(StoreUnavailable) as err:
        SimhashStore.open(url)
    assert "127.0.0.1" in str(err.value) and "s3cret" not in str(err.value)
    guarded = RedisServer(workdir=tmp_path, appendonly=False)
    try:
        guarded.cli("config", "set", "requirepass", "right")
        with pytest.raises(StoreError) as err:  # the wrong password
            SimhashStore.open(guarded.url.replace("redis://", "redis://:s3cret@") + "?prefix=x")
        assert "s3cret" not in str(err.value) and "credentials" in str(err.value)
        with SimhashStore.open(guarded.url.replace("redis://", "redis://:right@") + "?prefix=x") as s:
            assert s.check_and_add(5, "five") is None and "right" not in s.location
    finally:
        guarded.close()
    assert redact("redis://user:pw@h:1/0") == "redis://***@h:1/0"


def test_a_redis_restart_is_survived(tmp_path):
    """The server goes away and comes back (appendonly: with its data): calls
    while it is down raise StoreUnavailable; the same store object works after."""
    from tests.fixtures.redis_servers import RedisServer, available

    if (why := available()) is not None:
        pytest.skip(why)
    server = RedisServer(workdir=tmp_path)
    try:
        s = SimhashStore.open(server.url + "?prefix=restart")
        assert s.check_and_add(1, "one") is None
        time.sleep(1.2)  # (appendfsync everysec)
        server.stop()
        with pytest.raises(StoreUnavailable, match="127.0.0.1"):
            s.check_and_add(0xF0F0F0F0F0F0F0F0, "two")
        server.start()
        assert s.check_and_add(1 ^ 0b11, "again").key == "one"
        assert s.check_and_add(0xF0F0F0F0F0F0F0F0, "two") is None
        s.check_invariants()
        s.close()
    finally:
        server.close()


def test_a_store_with_another_key_format_is_refused(redis_url):
    """A Redis store written with another key layout (here: format 1, records
    hashes not keyed by fingerprint) is refused, saying so, not misread."""
    import redis

    from scrapy_neardup.dedup.store import StoreMismatchError

    with SimhashStore.open(redis_url) as s:
        assert s.check_and_add(7, "seven") is None
        meta = s.meta_key
    client = redis.Redis.from_url(redis_url.split("?")[0])
    client.hdel(meta, "redis_format")
    try:
        with pytest.raises(StoreMismatchError, match="key format 1"):
            SimhashStore.open(redis_url)
    finally:
        client.close()


def test_a_neighbour_committed_between_read_and_commit_is_found(shared_store_url, monkeypatch):
    """Another process admits a near-copy after this one read the buckets: the
    commit step finds it in what was appended since, calls this one a
    duplicate of it, and leaves no trace of this one (on one Redis: its
    appends undone)."""
    from scrapy_neardup.dedup.store.redis import buckets, cluster, single

    a = SimhashStore.open(shared_store_url)
    b = SimhashStore.open(shared_store_url)
    fps = [0x0123456789ABCDEF, 0xFEDCBA9876543210]

    def read_then_race(store, *args):
        out = buckets.read(store, *args)
        if store is a:  # (b's own reads go on as usual)
            b.check_and_add_many([fps[0] ^ 0b101, fps[1] ^ 1], ["b0", "b1"])
        return out

    with monkeypatch.context() as patch:  # the read of both admission paths
        patch.setattr(single, "read", read_then_race)
        patch.setattr(cluster, "read", read_then_race)
        got = a.check_and_add_many(fps, ["a0", "a1"])
    assert [(m.key, m.distance) for m in got] == [("b0", 2), ("b1", 1)]
    assert len(a) == 2 and a.check_and_add(fps[0], "again").key == "b0"
    a.check_invariants()
    a.close()
    b.close()


def test_a_check_and_add_sent_twice_is_this_calls_own_record_not_a_duplicate(shared_store_url):
    """redis-py sends a step again when the connection breaks or times out after the server ran it: the
    second check-and-add finds the record the first committed. Taken for a duplicate of itself, a page was
    stored and never emitted. That record has this call's sequence number: stored, not a match. A record of
    the same key from an earlier call (another process's fetch of the same URL, a commit before an outage)
    is still a match. On a cluster, whose commit is a step of its own, a commit sent twice writes once (the
    record of this call's own sequence number is there already, the fingerprint in its bucket)."""
    store = SimhashStore.open(shared_store_url)
    run = store.connection.run
    store.connection.run = lambda calls: (run(calls), run(calls))[1]  # (each step sent twice)
    try:
        assert store.check_and_add(0x0123456789ABCDEF, "sent-twice") is None
        assert store.check_and_add_many([0x1111222233334444, 0x5555666677778888], ["b0", "b1"]) == [None, None]
    finally:
        store.connection.run = run
    assert len(store) == 3
    store.check_invariants()
    again = store.check_and_add(0x0123456789ABCDEF ^ 1, "sent-twice")  # (a later call, the same URL)
    assert again is not None and (again.key, again.distance) == ("sent-twice", 1)
    store.close()


def test_two_stores_storing_one_page_in_the_same_microsecond_do_not_both_keep_it(redis_url, monkeypatch):
    """Two processes fetch one URL and store its fingerprint at once, their clocks at the same microsecond:
    a record is a call's own only with the call's own sequence number (``_admit``), and the numbers were the
    microseconds alone, so each took the other's record for its own and both emitted the page. Each store's
    numbers carry bits of its own: the second call finds the first's record, a match."""
    from scrapy_neardup.dedup.store.redis import store as redis_store

    now = time.time_ns()
    monkeypatch.setattr(redis_store.time, "time_ns", lambda: now)  # (both draw the same microsecond)
    a, b = SimhashStore.open(redis_url), SimhashStore.open(redis_url)
    assert a._seq_tag != b._seq_tag  # (counted at open, not drawn: random 12 bits met once in 4096 runs)
    fp = 0x0123456789ABCDEF
    assert a.check_and_add(fp, "https://h.test/same") is None
    got = b.check_and_add(fp, "https://h.test/same")
    assert got is not None and (got.key, got.distance) == ("https://h.test/same", 0)
    assert b.check_and_add_many([fp ^ 1], ["https://h.test/same"])[0] is not None
    a.check_invariants()
    a.close()
    b.close()
