"""``math.fsum`` in compiled code: the correctly rounded sum of float64 values.

The weight cap (``FeatureParams.max_share`` of the total weight) must be the
same in any feature order and on any machine, so the total is exact. Python's
``math.fsum`` gives that, but handing it a page's ~1,000 weights costs a list
of floats first (~0.08 ms a page with cold caches). This is CPython's
algorithm (Shewchuk's non-overlapping partials, then the half-even fix-up
across partials), so it returns the same value, bit for bit, for finite
inputs: the correctly rounded sum is unique. Tested against ``math.fsum``.

Cost: O(n * p) for n values and p partials (usually 1-3).

>>> import numpy as np
>>> float(fsum(np.array([0.1] * 10)))
1.0
>>> float(fsum(np.array([1e-16, 1.0, 1e16])))
1.0000000000000002e+16
"""

from __future__ import annotations

import numpy as np
from numba import njit

# The partials never overlap: they hold disjoint bit ranges of the float64
# range (2,098 bits), so there are never more than that, nor more than values.
_BIT_RANGE = 2100


@njit(cache=True)
def fsum(values):
    """Correctly rounded sum of the finite float64 ``values`` (as ``math.fsum``).
    Raises ValueError for a non-finite value or an intermediate overflow, where
    ``math.fsum`` would return inf/nan or raise."""
    p = np.empty(min(values.shape[0], _BIT_RANGE) + 1, dtype=np.float64)
    n = 0
    for k in range(values.shape[0]):
        x = values[k]
        if not np.isfinite(x):
            raise ValueError("fsum: non-finite value")
        i = 0
        for j in range(n):
            y = p[j]
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                p[i] = lo
                i += 1
            x = hi
        n = i
        if x != 0.0:
            if not np.isfinite(x):
                raise ValueError("fsum: intermediate overflow")
            p[n] = x
            n += 1
    hi = 0.0
    if n > 0:
        n -= 1
        hi = p[n]
        lo = 0.0
        # sum the partials from the top, until the sum becomes inexact
        while n > 0:
            x = hi
            n -= 1
            y = p[n]
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                break
        # half-even rounding across partials (CPython: so that the result does
        # not depend on the order of the values)
        if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            if y == x - hi:
                hi = x
    return hi
