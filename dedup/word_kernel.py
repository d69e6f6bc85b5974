"""Tokenise, hash and count space-delimited text in one compiled pass.

For text that ``tokens`` cuts into plain words (no Han, no script written
without spaces, no combining mark: most pages), the words are the runs of
letters and digits (``str.isalnum``). This kernel finds those runs in the
UTF-8 bytes of the normalised text, hashes each with MurmurHash3 (``murmur``)
and counts them, so no Python string is made per token. It gives exactly
what ``features.feature_vector`` + ``simhash.feature_hashes`` give (tests
compare them on real pages and generated text), with features identified by
their 64-bit hash: two words whose hashes collide, which simhash could not
tell apart anyway, count as one.

Cost: O(bytes of text), plus a hash table of O(distinct words).
"""

from __future__ import annotations

import re

import numpy as np
from numba import njit, uint64

from .murmur import murmur64

WORD, DIGIT = 1, 2


def _bmp_classes() -> np.ndarray:
    """uint8 class bits of every BMP code point: WORD for ``[^\\W_]`` (the
    tokeniser's word characters), DIGIT for ``\\d`` (what makes a number)."""
    cps = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    chars = "".join(map(chr, cps))
    table = np.zeros(0x10000, dtype=np.uint8)
    table[[cps[m.start()] for m in re.finditer(r"[^\W_]", chars)]] |= WORD
    table[[cps[m.start()] for m in re.finditer(r"\d", chars)]] |= DIGIT
    return table


CLASSES = _bmp_classes()


@njit(cache=True, inline="always")
def _class_at(data, i, n, classes):
    """(class bits, byte length) of the UTF-8 character at data[i]; code
    points beyond the BMP have class 0 (the caller checked none is a word character)."""
    b = data[i]
    if b < 0x80:
        return classes[b], 1
    if b >= 0xF0:
        return 0, 4 if i + 4 <= n else n - i
    if b >= 0xE0 and i + 2 < n:
        return classes[((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)], 3
    if b >= 0xC0 and i + 1 < n:
        return classes[((b & 0x1F) << 6) | (data[i + 1] & 0x3F)], 2
    return 0, 1


@njit(cache=True)
def utf8_offsets(data):
    """Byte offset of each code point of UTF-8 ``data``, and of its end (length n_cp + 1)."""
    n = data.shape[0]
    count = 0
    for i in range(n):
        if (data[i] & 0xC0) != 0x80:
            count += 1
    out = np.empty(count + 1, dtype=np.int64)
    c = 0
    for i in range(n):
        if (data[i] & 0xC0) != 0x80:
            out[c] = i
            c += 1
    out[count] = n
    return out


@njit(cache=True)
def word_counts(data, starts, ends, parts, furniture_weight, classes, seed, stop_hashes, stop_weight, number_weight):
    """Distinct words of the spans data[starts[i]:ends[i]] (UTF-8 uint8), in
    order of first occurrence; ``parts[i]`` is 0 for content, 1 for furniture.
    ``stop_hashes``: the sorted hashes of the stop words.

    Returns (hashes uint64, counts float64 = content count + furniture weight x
    furniture count, term weights float64: stop_weight for a stop word, else
    number_weight for a word with a digit, else 1; number of tokens).
    """
    total = 0
    for t in range(starts.shape[0]):
        total += ends[t] - starts[t]
    cap = 64  # distinct words <= half the bytes: the table stays at most half full
    while cap < total + 16:
        cap *= 2
    slots = np.full(cap, -1, dtype=np.int64)  # open addressing: index into the arrays below
    mask = uint64(cap - 1)
    hashes = np.empty(cap // 2, dtype=np.uint64)
    c_count = np.zeros(cap // 2, dtype=np.int64)
    f_count = np.zeros(cap // 2, dtype=np.int64)
    digit = np.zeros(cap // 2, dtype=np.bool_)
    m = 0
    tokens = 0
    for t in range(starts.shape[0]):
        part = parts[t]
        i = starts[t]
        n = ends[t]
        while i < n:
            cls, ln = _class_at(data, i, n, classes)
            if not cls & WORD:
                i += ln
                continue
            s = i
            has_digit = False
            while i < n:
                cls, ln = _class_at(data, i, n, classes)
                if not cls & WORD:
                    break
                if cls & DIGIT:
                    has_digit = True
                i += ln
            h = murmur64(data, s, i, seed)
            tokens += 1
            slot = (h ^ (h >> uint64(29))) & mask
            while slots[slot] >= 0 and hashes[slots[slot]] != h:
                slot = (slot + uint64(1)) & mask
            k = slots[slot]
            if k < 0:
                k = m
                slots[slot] = k
                hashes[k] = h
                digit[k] = has_digit
                m += 1
            if part == 0:
                c_count[k] += 1
            else:
                f_count[k] += 1
    weights = np.empty(m, dtype=np.float64)
    term = np.empty(m, dtype=np.float64)
    for k in range(m):
        at = np.searchsorted(stop_hashes, hashes[k])
        if at < stop_hashes.shape[0] and stop_hashes[at] == hashes[k]:
            term[k] = stop_weight
        elif digit[k]:
            term[k] = number_weight
        else:
            term[k] = 1.0
        # the same float operations as the Python reference: count + furniture count * weight
        if f_count[k] == 0:
            weights[k] = float(c_count[k])
        elif c_count[k] == 0:
            weights[k] = float(f_count[k]) * furniture_weight
        else:
            weights[k] = float(c_count[k]) + float(f_count[k]) * furniture_weight
    return hashes[:m], weights, term, tokens
