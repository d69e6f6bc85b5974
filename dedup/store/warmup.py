"""The warm-up of the store kernels (``jit`` group ``store``).

Runs every compiled step of the permuted tables once on a few thousand
random fingerprints: bulk adds and batch checks (sorting, merging), single
probes and adds past the buffer (flushes and merges), the self-join, the
invariants, a persistent store reopened from its snapshot (memory-mapped
arrays), as a resumed crawl does, and the batch self-join and greedy decision
of a corpus run (``self_join``, ``greedy``) past the size where they radix-sort. Importing this module registers it with
``jit``; ``jit.warm`` imports it by name.
"""

from __future__ import annotations

import tempfile

import numpy as np

from .. import jit
from .greedy import decide
from .self_join import RADIX_MIN_SIZE, self_join
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

    # the batch self-join (radix passes, the collapse of copies) and the greedy decision
    rng = np.random.default_rng(1)
    many = rng.integers(0, 2**63, RADIX_MIN_SIZE + 1000, dtype=np.uint64)
    many[-1000:] = many[:1000] ^ np.uint64(5)  # some pairs
    many[-10:] = many[:10]  # some copies
    decide(self_join(many, 3))


jit.register("store", warm_compiled)
