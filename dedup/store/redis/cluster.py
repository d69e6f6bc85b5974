"""Admission on a Redis Cluster: reservations, since a step may touch one slot only.

A fingerprint *reserves* itself in each of its T buckets (``RESERVE``:
unless a committed fingerprint, or another process's live reservation, is
within k). A committed neighbour makes it a duplicate (it gives back its
reservations); a reservation within k makes it wait and retry. Holding all
T, it commits them at once (table 0 first, with the record). Of two
near-duplicates racing, both need the bucket they share and only one can
hold it: exactly one is admitted. Waiting at table t, a fingerprint first
gives back what it holds from t on, so waits follow table order and cannot
deadlock. A reservation whose process died expires after ``lease`` seconds
(``?lease=``, default 30); a process that stalls longer than that between
reserving and committing could let a near-copy in (documented).

Round trips per new fingerprint: 3-4 (read, reserve, commit table 0, commit
the rest), more when it waits.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..backends import StoreError
from . import scripts
from .buckets import commit, read, verdict
from .keys import ScriptCall

if TYPE_CHECKING:
    from .parts import StoreParts


def reserve(store: StoreParts, fps: list[int], keys: Sequence[str], where: tuple,
            idx: list[int]) -> dict[int, dict[int, int]]:
    """Reserve every table for ``idx``: all tables in one pipelined round
    when nothing conflicts, committing each as soon as it holds them all.

    Safety needs only that a fingerprint is admitted while holding all T
    reservations (two near-duplicates cannot both hold the bucket they
    share). Liveness needs table order when waiting: a fingerprint told to
    wait at table t first gives back what it holds from t on, and goes on
    from t, so it waits only on one that holds a later table; and a
    fingerprint holding all T is committed at once, never kept waiting for
    the rest of its batch (two batches would otherwise each hold what the
    other waits for, until the lease ran out). Commits as it goes;
    returns {duplicate: {stored fingerprint: distance}}."""
    head = [str(store.max_distance), store.token, str(int(store.lease * 1000))]
    seen, found = read(store, fps, where, idx)  # committed neighbours: duplicates without a reservation
    start = {i: 0 for i in idx if i not in found}  # the first table not yet held
    pause, waited = 0.001, 0.0
    while start:
        calls: list[ScriptCall] = []
        order: list[tuple[int, list[int]]] = []
        for t in range(store.T):
            def lengths_read(chunk: list[int], t: int = t) -> list[Any]:  # RESERVE scans only what follows
                return [" ".join(map(str, seen[t, chunk].tolist()))]

            c, o = store.keyspace.calls(scripts.RESERVE, t, [i for i, s in start.items() if s <= t], where, head,
                                        lengths_read)
            calls += c
            order += [(t, chunk) for chunk in o]
        verdicts: dict[int, dict[int, int]] = {i: {} for i in start}  # i -> {table: verdict}
        for (t, chunk), raw in zip(order, store.connection.run(calls)):
            pos = 0
            for i in chunk:
                verdicts[i][t], pos = verdict(raw, pos, fps[i], found, i)
        give_back: list[tuple[int, int]] = []  # (index, table) reservations to release
        waiting = False
        admitted = []
        for i, vs in verdicts.items():
            held = [t for t, v in vs.items() if v == 0]
            if i in found:  # a duplicate: give back everything, earlier rounds' too
                give_back += [(i, t) for t in range(start[i])] + [(i, t) for t in held]
                del start[i]
                continue
            stuck = min((t for t, v in vs.items() if v == 2), default=None)
            if stuck is None:
                admitted.append(i)
                del start[i]
            else:
                give_back += [(i, t) for t in held if t > stuck]
                start[i] = stuck
                waiting = True
        if give_back:
            release(store, give_back, where)
        commit(store, keys, where, sorted(admitted), once=True)
        if waiting:
            if waited > 4 * store.lease:
                raise StoreError(f"the Redis store at {store.location}: a reservation did not clear in "
                                 f"{waited:.0f} s")
            time.sleep(pause * (0.5 + random.random()))
            waited += pause
            pause = min(pause * 2, 0.05)
    return found


def release(store: StoreParts, pairs: list[tuple[int, int]], where: tuple) -> None:
    """Give back reservations, given as (batch index, table)."""
    by_table: dict[int, list[int]] = defaultdict(list)
    for i, t in pairs:
        by_table[t].append(i)
    calls = [c for t, idx in by_table.items()
             for c in store.keyspace.calls(scripts.RELEASE, t, idx, where, [store.token])[0]]
    if calls:
        store.connection.run(calls)
