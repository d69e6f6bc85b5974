"""The compiled fsum against Python's math.fsum (the oracle): same value, bit for bit."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dedup.exact_sum import fsum


def _values(rng: random.Random, trial: int) -> list[float]:
    n = rng.randint(0, 80)
    kind = trial % 4
    if kind == 0:  # mixed magnitudes
        return [rng.uniform(-1, 1) * 10 ** rng.randint(-20, 20) for _ in range(n)]
    if kind == 1:  # the classic cancellation and half-even cases
        pool = [1.0, 1e16, 1e-16, -1e16, 0.1, 2.0**-1074, 2.0**53, -0.5, 1e308, -1e308, 1.5 * 2.0**-52]
        return [rng.choice(pool) for _ in range(n)]
    if kind == 2:  # weights as the features make them: counts x 1, 0.2, 0.05
        return [rng.randint(1, 100) * rng.choice([1.0, 0.2, 0.05, 0.04]) for _ in range(n)]
    return [math.ldexp(rng.random(), rng.randint(-1074, 1000)) * rng.choice([1, -1]) for _ in range(n)]


def test_equals_math_fsum_on_seeded_random_values():
    rng = random.Random(20261122)
    for trial in range(8000):
        xs = _values(rng, trial)
        try:
            want = math.fsum(xs)
        except OverflowError:
            with pytest.raises(ValueError, match="overflow"):
                fsum(np.array(xs, dtype=np.float64))
            continue
        got = fsum(np.array(xs, dtype=np.float64))
        assert got == want and math.copysign(1, got) == math.copysign(1, want), xs


def test_non_finite_values_are_refused():
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="non-finite"):
            fsum(np.array([1.0, bad]))


def test_empty_is_zero():
    assert fsum(np.empty(0)) == 0.0
