"""Feature hashes: MurmurHash3 x64-128 (its first 64 bits) of a feature's UTF-8 bytes.

``feature_hash`` is ``mmh3.hash64(s, seed, signed=False)[0]``. For many
strings, ``hash64_many`` computes the same in one compiled call (tests check
them equal); hashing a page's few hundred features one Python call at a time
cost more than the simhash itself. The word kernel inlines ``murmur64`` to
hash tokens it never makes into strings.

Cost: O(total UTF-8 bytes).

>>> import mmh3
>>> int(hash64_many(["simhash", "近似"])[1]) == mmh3.hash64("近似", 0, signed=False)[0]
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import mmh3
import numpy as np
from numba import njit, uint64

from .. import jit

_C1 = uint64(0x87C37B91114253D5)
_C2 = uint64(0x4CF5AD432745937F)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << uint64(r)) | (x >> uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix(k):
    k ^= k >> uint64(33)
    k *= uint64(0xFF51AFD7ED558CCD)
    k ^= k >> uint64(33)
    k *= uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> uint64(33)
    return k


@njit(cache=True, inline="always")
def _mix1(k):
    return _rotl(k * _C1, 31) * _C2


@njit(cache=True, inline="always")
def _mix2(k):
    return _rotl(k * _C2, 33) * _C1


@njit(cache=True, inline="always")
def _word(data, p, n):
    """Little-endian 64-bit word of the n (<= 8) bytes at data[p]."""
    k = uint64(0)
    for j in range(n):
        k |= uint64(data[p + j]) << uint64(8 * j)
    return k


@njit(cache=True, inline="always")
def murmur64(data, s, e, seed):
    """First 64 bits of MurmurHash3 x64-128 of the bytes data[s:e]."""
    length = e - s
    h1 = uint64(seed)
    h2 = uint64(seed)
    p = s
    for _ in range(length // 16):
        h1 ^= _mix1(_word(data, p, 8))
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * uint64(5) + uint64(0x52DCE729)
        h2 ^= _mix2(_word(data, p + 8, 8))
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * uint64(5) + uint64(0x38495AB5)
        p += 16
    rest = e - p
    if rest > 8:
        h2 ^= _mix2(_word(data, p + 8, rest - 8))
    if rest > 0:
        h1 ^= _mix1(_word(data, p, min(rest, 8)))
    h1 ^= uint64(length)
    h2 ^= uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    return h1 + h2


@njit(cache=True)
def _hash_spans(data, starts, ends, seed):
    out = np.empty(starts.shape[0], dtype=np.uint64)
    for t in range(starts.shape[0]):
        out[t] = murmur64(data, starts[t], ends[t], seed)
    return out


@njit(cache=True)
def _split_lines(data):
    """(starts, ends) of the \\n-separated parts of data."""
    n = data.shape[0]
    count = 1
    for i in range(n):
        if data[i] == 10:
            count += 1
    starts = np.empty(count, dtype=np.int64)
    ends = np.empty(count, dtype=np.int64)
    t = 0
    starts[0] = 0
    for i in range(n):
        if data[i] == 10:
            ends[t] = i
            t += 1
            starts[t] = i + 1
    ends[t] = n
    return starts, ends


def feature_hash(feature: str, seed: int = 0) -> int:
    """64-bit MurmurHash3 (x64, first half) of a feature's UTF-8 bytes."""
    return mmh3.hash64(feature, seed, signed=False)[0]


def feature_hashes(features: Iterable[str], seed: int = 0, compiled: bool | None = None) -> np.ndarray:
    """uint64 array of ``feature_hash`` for each feature: one compiled call
    (``hash64_many``), or mmh3 per feature when ``compiled`` is False (None:
    as ``jit.ready("fingerprint")`` says)."""
    strings = features if isinstance(features, list) else list(features)
    if compiled is None:
        compiled = jit.ready("fingerprint")
    if not compiled:
        return _mmh3_many(strings, seed)
    return hash64_many(strings, seed)


def _mmh3_many(strings: Sequence[str], seed: int) -> np.ndarray:
    h64 = mmh3.hash64
    return np.fromiter((h64(s, seed, signed=False)[0] for s in strings), dtype=np.uint64, count=len(strings))


def hash64_many(strings: Sequence[str], seed: int = 0) -> np.ndarray:
    """uint64 array of ``mmh3.hash64(s, seed, signed=False)[0]`` for each string."""
    if not strings:
        return np.empty(0, dtype=np.uint64)
    joined = "\n".join(strings)
    try:
        data = joined.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: mmh3's own rules decide
        data = None
    if data is None or joined.count("\n") != len(strings) - 1 or not 0 <= seed < 2**32:
        return _mmh3_many(strings, seed)
    buf = np.frombuffer(data, dtype=np.uint8)
    starts, ends = _split_lines(buf)
    return _hash_spans(buf, starts, ends, seed)
