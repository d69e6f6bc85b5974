"""The store on its own, killed with SIGKILL at random moments while it writes
(batches, single adds, snapshots of merged tables): on reopen every
acknowledged record is there, in order, and the tables are consistent (issue 14)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from scrapy_neardup.dedup.store import SimhashStore

WRITER = r"""
import sys, numpy as np
from scrapy_neardup.dedup.store import SimhashStore
path, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
s = SimhashStore.open(path, capacity=200_000, commit_every=10**9, commit_interval=1e9)
n = len(s)
while True:
    size = int(rng.integers(1, 3000))
    fps = rng.integers(0, 2**63, size=size, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    if size % 2:
        s.add_many(fps, [f"k{n + i}" for i in range(size)])
    else:
        for i, fp in enumerate(fps.tolist()):
            s.add(fp, f"k{n + i}")
    n += size
    s.flush()
    print(n, flush=True)  # acknowledged: n records
"""




@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_killed_writer_keeps_every_acknowledged_record(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "store"
    acked = 0
    before = np.empty(0, np.uint64)
    for run in range(3):  # three writers in a row on one store, each killed mid-write
        wseed = seed * 100 + run
        p = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(wseed)], stdout=subprocess.PIPE, text=True)
        start = acked
        want = rng.randint(2, 40)  # batches acknowledged before the kill
        for _ in range(want):
            line = p.stdout.readline()
            if not line:
                break
            acked = int(line)
        time.sleep(rng.uniform(0, 0.05))  # kill somewhere inside the next batch
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        p.stdout.close()
        with SimhashStore.open(path) as s:
            assert len(s) >= acked, f"seed {seed} run {run}: {len(s)} records, {acked} acknowledged"
            s.check_invariants()
            got = s.fingerprints()
            assert np.array_equal(got[: len(before)], before), f"seed {seed} run {run}: older records changed"
            # this writer's records are its sequence, from where the last one stopped
            rng_w = np.random.default_rng(wseed)
            seq = []
            while sum(map(len, seq)) < len(got) - start:
                size = int(rng_w.integers(1, 3000))
                seq.append(rng_w.integers(0, 2**63, size=size, dtype=np.int64).astype(np.uint64) * np.uint64(2)
                           + np.uint64(1))
            mine = np.concatenate(seq)[: len(got) - start] if seq else np.empty(0, np.uint64)
            assert np.array_equal(got[start:], mine), f"seed {seed} run {run}: records differ from what was written"
            acked = len(s)  # what a reopen sees is what the next writer builds on
            before = got.copy()
