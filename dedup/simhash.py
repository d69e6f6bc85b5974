"""Charikar's simhash over weighted features, vectorised with numpy.

Each feature has an ``f``-bit hash. For every bit position the weight of a
feature is added where its hash has a 1 and subtracted where it has a 0; the
fingerprint has a 1 where the sum is > 0. Similar weighted feature sets give
fingerprints a few bits apart: for unit-norm weight vectors at angle theta,
each bit differs with probability theta/pi.

Bit order: position 0 of a vector is the most significant bit, so that
``format(fp, "0{f}b")`` reads in vector order (as the worked examples in the
tests write them).

Cost: O(n * f) for n features, done as one (n x f) numpy product, exact (see
``_exact_sums``): the fingerprint does not depend on the order of the features.

>>> h = {"美国": 0b100101, "51区": 0b101011}
>>> simhash_vector([h["美国"], h["51区"]], [4, 5], bits=6).tolist()
[9.0, -9.0, 1.0, -1.0, 1.0, 9.0]
>>> format(simhash([h["美国"], h["51区"]], [4, 5], bits=6), "06b")
'101011'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
from numba import njit

from . import jit
from .features.murmur import feature_hashes

FP_BITS = 64
_MASK64 = (1 << 64) - 1


def _bit_matrix(hashes: np.ndarray, bits: int) -> np.ndarray:
    """(n, bits) 0/1 matrix; column 0 is the most significant of ``bits``."""
    h = np.ascontiguousarray(hashes, dtype=np.uint64)
    # little-endian bytes, little bit order: column j is bit j of the integer
    m = np.unpackbits(h.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    return m[:, bits - 1 :: -1]  # MSB of the f-bit value first


def _exact_sums(hashes: Sequence[int] | np.ndarray, weights: Sequence[float] | np.ndarray,
                bits: int) -> tuple[np.ndarray, int]:
    """(V x 2**scale as integer-valued float64, scale). Every partial sum is an
    integer below 2**53, so the float arithmetic is exact and V does not depend
    on the order of the features nor on how BLAS orders its sums (which differs
    between CPUs). Without this, a bit whose sum is exactly 0 (weights like 0.2
    and 0.05 cancel) comes out 0 or 1 by rounding: 3 of the 1,016 real pages
    in the benchmarks had such a bit."""
    if not 1 <= bits <= 64:
        raise ValueError(f"bits must be 1..64, got {bits}")
    h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
    if h.size == 0:
        if np.asarray(weights).size:
            raise ValueError(f"0 hashes but {np.asarray(weights).size} weights")
        return np.zeros(bits), 0
    q, scale = _rounded_weights(h, weights)
    m = _bit_matrix(h, bits).astype(np.float64)
    # sum of +w where bit = 1, -w where bit = 0  ==  2 * (w @ m) - sum(w)
    return 2.0 * (q @ m) - q.sum(), scale


def _rounded_weights(h: np.ndarray, weights: Sequence[float] | np.ndarray) -> tuple[np.ndarray, int]:
    """(weights x 2**scale rounded to integers, as float64; scale)."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if h.shape != w.shape:
        raise ValueError(f"{h.size} hashes but {w.size} weights")
    if not np.isfinite(w).all():
        raise ValueError("weights must be finite")
    # the largest scale that keeps n * max|w| (>= sum |w|) times 2**scale below 2**51:
    # weights rounded to about 2**-40 of the largest, far below anything that moves a
    # bit. max and one product: the scale, too, is the same in any order.
    scale = 51 - (int(float(np.abs(w).max()) * w.size) + 1).bit_length()
    return np.rint(np.ldexp(w, scale)), scale


def simhash_vector(hashes: Sequence[int] | np.ndarray, weights: Sequence[float] | np.ndarray,
                   bits: int = FP_BITS) -> np.ndarray:
    """The per-bit sums V (float64, length ``bits``, most significant first),
    computed exactly on the weights rounded to 2**-scale (see ``_exact_sums``)."""
    v, scale = _exact_sums(hashes, weights, bits)
    return np.ldexp(v, -scale)


@njit(cache=True)
def _simhash64(hashes, q):
    """The 64-bit fingerprint of uint64 ``hashes`` with integer-valued float64
    weights ``q`` (``_exact_sums``'s rounding): the same sums, in int64,
    without the (n x 64) bit matrix. Every partial sum stays below 2**53."""
    ones = np.zeros(64, dtype=np.int64)  # per bit: the weight of the features whose hash has it
    total = 0
    for k in range(hashes.shape[0]):
        h = hashes[k]
        w = np.int64(q[k])
        total += w
        for b in range(64):
            ones[b] += w * np.int64((h >> np.uint64(b)) & np.uint64(1))
    fp = np.uint64(0)
    for b in range(64):
        if 2 * ones[b] - total > 0:  # V_b = (+w where the bit is 1) - (w where it is 0)
            fp |= np.uint64(1) << np.uint64(b)
    return fp


@njit(cache=True)
def _simhash64_weights(hashes, w):
    """(done, fingerprint): ``_simhash64`` of ``w`` rounded as ``_rounded_weights``
    rounds them, in one compiled call (the numpy steps cost ~0.05 ms a page
    with cold caches). done is False, and the caller takes the Python path,
    for weights that are not finite or too large for int64 arithmetic."""
    n = w.shape[0]
    top = 0.0
    for k in range(n):
        x = w[k]
        if not np.isfinite(x):
            return False, np.uint64(0)
        if abs(x) > top:
            top = abs(x)
    span = top * n  # (the same float product as the Python version)
    if span >= 2.0**62:
        return False, np.uint64(0)
    v = np.int64(span) + 1
    bit_length = 0
    while v:
        bit_length += 1
        v >>= 1
    factor = 2.0 ** (51 - bit_length)  # an exact power of two: x * factor rounds as ldexp does
    q = np.empty(n, dtype=np.float64)
    for k in range(n):
        q[k] = np.rint(w[k] * factor)
    return True, _simhash64(hashes, q)


def simhash(hashes: Sequence[int] | np.ndarray, weights: Sequence[float] | np.ndarray,
            bits: int = FP_BITS, compiled: bool | None = None) -> int:
    """Fingerprint of weighted features given their ``bits``-wide hashes: bit i
    is 1 where V_i > 0. A function of the multiset of (hash, weight) pairs only.

    ``compiled``: sum in a numba loop (True) or as a numpy product with the bit
    matrix (False); None: as ``jit.ready("fingerprint")`` says. Both are exact,
    so they give the same fingerprint (tested)."""
    if compiled is None:
        compiled = jit.ready("fingerprint")
    if (compiled and bits == 64 and isinstance(hashes, np.ndarray) and hashes.dtype == np.uint64
            and hashes.size):
        if (isinstance(weights, np.ndarray) and weights.dtype == np.float64 and weights.shape == hashes.shape
                and hashes.ndim == 1):
            done, fp = _simhash64_weights(hashes, weights)
            if done:
                return int(fp)
        q, _ = _rounded_weights(hashes, weights)
        return int(_simhash64(hashes, q))  # (bit b of the integer is vector position 63 - b, as below)
    v, _ = _exact_sums(hashes, weights, bits)
    packed = np.packbits(v > 0)  # big-endian bit order: vector order
    return int.from_bytes(packed.tobytes(), "big") >> (len(packed) * 8 - bits)


def simhash_features(features: dict[str, float] | Iterable[tuple[str, float]], seed: int = 0,
                     compiled: bool | None = None) -> int:
    """64-bit simhash of ``{feature: weight}`` with mmh3 feature hashes."""
    items = list(features.items()) if isinstance(features, dict) else list(features)
    if not items:
        raise ValueError("no features")
    names, weights = zip(*items)
    return simhash(feature_hashes(names, seed, compiled), np.fromiter(weights, dtype=np.float64, count=len(weights)),
                   compiled=compiled)


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two fingerprints."""
    return ((a ^ b) & _MASK64).bit_count()


def hamming_many(fp: int, fps: np.ndarray) -> np.ndarray:
    """Hamming distances from ``fp`` to each of a uint64 array (numpy >= 2)."""
    return np.bitwise_count(np.asarray(fps, dtype=np.uint64) ^ np.uint64(fp & _MASK64))


_HEX64 = re.compile(r"[0-9a-fA-F]{1,16}")


def to_hex(fp: int) -> str:
    return f"{fp & _MASK64:016x}"


def from_hex(text: str) -> int:
    """The fingerprint ``to_hex`` wrote: 1-16 hex digits (ASCII only: ``int`` would also take ``_``,
    signs, white space and other scripts' digits). Raises ``ValueError``.

    >>> from_hex("00000000000000ff"), from_hex("ff")
    (255, 255)
    """
    if not _HEX64.fullmatch(text):
        raise ValueError(f"not a 64-bit fingerprint (1-16 hex digits): {text!r}")
    return int(text, 16)
