"""The warm-up of the batch kernels (``jit`` group ``batch``): the corpus
run's self-join (``self_join``: radix passes, the collapse of exact copies)
and its input-order decision (``greedy``, and ``component_decide``'s linking
pass, which holds no pair list), past the size where they
radix-sort. A group of its own so that a crawl, which never self-joins a
batch, neither compiles nor runs them (its worker warms ``store`` and
``fingerprint`` only); ``neardup warmup`` and a corpus run warm every group.
Importing this module registers it with ``jit``; ``jit.warm`` imports it by name.
"""

from __future__ import annotations

import numpy as np

from .. import jit
from .component_decide import decide_by_components
from .greedy import decide
from .self_join import RADIX_MIN_SIZE, self_join


def warm_compiled() -> None:
    """Run the self-join and the decision once on ~66,000 random fingerprints
    with some pairs and some copies (compiling them, or loading them from the cache)."""
    rng = np.random.default_rng(1)
    many = rng.integers(0, 2**63, RADIX_MIN_SIZE + 1000, dtype=np.uint64)
    many[-1000:] = many[:1000] ^ np.uint64(5)  # some pairs
    many[-10:] = many[:10]  # some copies
    decide(self_join(many, 3))
    decide_by_components(many, 3)


jit.register("batch", warm_compiled)
