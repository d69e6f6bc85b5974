"""The warm-up of the store kernels (``jit`` group ``store``).

Runs every compiled step of the permuted tables once on a few thousand
random fingerprints: bulk adds and batch checks (sorting, merging), single
probes and adds past the buffer (flushes and merges), the self-join, the
invariants, and a persistent store reopened from its snapshot (memory-mapped
arrays), as a resumed crawl does. (The corpus run's batch self-join and
decision are group ``batch``: ``batch_warmup``.) Importing this module
registers it with ``jit``; ``jit.warm`` imports it by name.
"""

from __future__ import annotations

import tempfile

import numpy as np

from .. import jit
from .store import SimhashStore


def warm_compiled() -> None:
    """Run every store kernel on small inputs (compiling it, or loading it from the cache)."""
    fps = np.random.default_rng(0).integers(0, 2**63, 3000, dtype=np.uint64)
    with SimhashStore.open(None, capacity=10_000, compiled=True) as store:
        store.add_many(fps[:1000], [str(i) for i in range(1000)])
        store.check_and_add_many(fps[1000:], [str(i) for i in range(1000, 3000)])
        store.query(int(fps[0]))
        store.query_many(fps[:10])
        store.check_and_add(int(fps[1]) ^ 1, "x")
        for i in range(600):  # single adds past the buffer: flushes and merges
            store.check_and_add(int(fps[i]) ^ 0xFFFF0000, f"y{i}")
        list(store.pairs())
        store.check_invariants()
    # a persistent store reopened from its snapshot (memory-mapped arrays), as a resumed crawl does
    with tempfile.TemporaryDirectory(prefix="neardup-warmup-") as tmp:
        with SimhashStore.open(tmp, capacity=10_000, compiled=True) as store:
            store.add_many(fps[:2000], [str(i) for i in range(2000)])
        with SimhashStore.open(tmp, capacity=10_000, compiled=True) as store:
            store.check_and_add(int(fps[5]) ^ 3, "z")
            store.query(int(fps[6]))



jit.register("store", warm_compiled)
