"""Tokenise, hash and count a page's text in one compiled pass.

The kernel cuts the UTF-8 bytes of the normalised text into the runs
``tokens`` cuts (its character table is built from the same classes): Han
runs are segmented as jieba does (``han_segmenter``), kana runs give
overlapping bigrams, runs of the other scripts written without spaces (Thai,
Lao, Khmer, Myanmar, Tibetan) overlapping trigrams, and each other run of letters,
digits and marks is a word. It hashes each token with MurmurHash3
(``murmur``) and counts them, so no Python string is made per token. It gives
exactly what ``features.feature_vector`` + ``simhash.feature_hashes`` give
(tests compare them on real pages and generated text), with features
identified by their 64-bit hash: two tokens whose hashes collide, which
simhash could not tell apart anyway, count as one.

Its character table covers all of Unicode (planes 0-3 and 14 hold every
letter, digit and mark; the other planes are unassigned or private use).

Cost: O(bytes of text) for words and n-grams, O(n x 16) for a Han run of n
characters, plus a hash table of O(distinct tokens).
"""

from __future__ import annotations

import re

import numpy as np
import regex
from numba import njit, uint64

from .codepoints import SIZE, class_masks
from .han_segmenter import JIEBA_HAN_RANGES, han_route
from .murmur import murmur64
from .tokens import HAN_CLASS, NOSPACE_CLASS, TRIGRAM_CLASS, WORD_CLASS

# class bits of a code point
WORD, DIGIT, HAN, JIEBA_HAN, NOSPACE, TRIGRAM = 1, 2, 4, 8, 16, 32  # TRIGRAM: a NOSPACE script cut in trigrams


# (the code points the table describes: ``codepoints.RANGES``)
def _classes() -> np.ndarray:
    """uint8 class bits of every code point: the tokeniser's run classes
    (WORD, HAN, NOSPACE: each character in at most one), JIEBA_HAN for the Han
    that jieba-rs's DAG sees, and DIGIT for stdlib's ``\\d`` (what makes a
    number, as ``features`` tests it). Built from runs of matches (``codepoints``, ~50 ms)."""
    han, nospace, word, trigram, digit = class_masks(
        [*(regex.compile(f"{c}+", regex.V1) for c in (HAN_CLASS, NOSPACE_CLASS, WORD_CLASS, TRIGRAM_CLASS)),
         re.compile(r"\d+")])
    nospace &= ~han  # the tokeniser's alternation tries Han first
    word &= ~(han | nospace)
    table = np.zeros(SIZE, dtype=np.uint8)
    table[word] |= WORD
    table[han] |= HAN
    table[nospace] |= NOSPACE
    table[nospace & trigram] |= TRIGRAM
    table[digit] |= DIGIT
    jieba = np.zeros(SIZE, dtype=bool)
    for lo, hi in JIEBA_HAN_RANGES:
        jieba[lo : hi + 1] = True
    table[han & jieba] |= JIEBA_HAN
    return table


CLASSES = _classes()


# (The branch order below, three-byte characters first and one return per
# branch, compiles to a loop ~7x faster than testing four-byte leads first.)
@njit(cache=True, inline="always")
def _char_at(data, i, n, classes):
    """(class bits, byte length, code point) of the UTF-8 character at data[i]
    (a cut or malformed sequence: class 0, code point -1)."""
    b = np.int64(data[i])
    if b < 0x80:
        return classes[b], 1, b
    if 0xE0 <= b < 0xF0 and i + 2 < n:
        cp = ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F)
        return classes[cp], 3, cp
    if 0xC0 <= b < 0xE0 and i + 1 < n:
        cp = ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F)
        return classes[cp], 2, cp
    if b >= 0xF0 and i + 3 < n:
        cp = min(((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
                 | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F), 0x10FFFF)
        return classes[cp], 4, cp
    if b >= 0xF0:
        return 0, n - i, np.int64(-1)
    return 0, 1, np.int64(-1)


@njit(cache=True, inline="always")
def _class_at(data, i, n, classes):
    """(class bits, byte length) of the UTF-8 character at data[i] (see ``_char_at``)."""
    b = data[i]
    if b < 0x80:
        return classes[b], 1
    if 0xE0 <= b < 0xF0 and i + 2 < n:
        return classes[((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)], 3
    if 0xC0 <= b < 0xE0 and i + 1 < n:
        return classes[((b & 0x1F) << 6) | (data[i + 1] & 0x3F)], 2
    if b >= 0xF0 and i + 3 < n:
        return classes[min(((b & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6)
                           | (data[i + 3] & 0x3F), 0x10FFFF)], 4
    if b >= 0xF0:
        return 0, n - i
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


@njit(cache=True, inline="always")
def _script_run(data, i, n, nospace, classes, cps, pos, score, route_end, tok_start, tok_end, tok_digit,
                trie_root, trie_chars, trie, trie_shift, logp, unknown, edges):
    """The tokens of the Han or no-space run at data[i], as byte spans in
    tok_start/tok_end (tok_digit: has a digit). A no-space run is kana
    (bigrams) or of the trigram scripts (``TRIGRAM``), never both, as the
    reference's ``_RUNS`` cuts them. Returns (index after the run, number of
    tokens)."""
    r = 0
    kind = NOSPACE if nospace else HAN
    tri = _class_at(data, i, n, classes)[0] & TRIGRAM
    while i < n:
        cls, ln, cp = _char_at(data, i, n, classes)
        if not cls & kind or (nospace and cls & TRIGRAM != tri):
            break
        cps[r] = cp
        pos[r] = i
        r += 1
        i += ln
    pos[r] = i
    nt = 0
    if nospace and tri:
        # overlapping trigrams of the run; a run of one or two characters is its own token
        if r < 3:
            tok_start[0], tok_end[0] = pos[0], pos[r]
            tok_digit[0] = (classes[cps[0]] | classes[cps[r - 1]]) & DIGIT != 0
            return i, 1
        for q in range(r - 2):
            tok_start[q], tok_end[q] = pos[q], pos[q + 3]
            tok_digit[q] = (classes[cps[q]] | classes[cps[q + 1]] | classes[cps[q + 2]]) & DIGIT != 0
            nt += 1
        return i, nt
    if nospace:
        # overlapping bigrams of the run; a one-character run is its own token
        if r == 1:
            tok_start[0], tok_end[0], tok_digit[0] = pos[0], pos[1], classes[cps[0]] & DIGIT != 0
            nt = 1
        for q in range(r - 1):
            tok_start[q], tok_end[q] = pos[q], pos[q + 2]
            tok_digit[q] = (classes[cps[q]] | classes[cps[q + 1]]) & DIGIT != 0
            nt += 1
        return i, nt
    # blocks of the Han jieba's DAG sees; any other Han character is a word alone
    b = 0
    while b < r:
        if not classes[cps[b]] & JIEBA_HAN:
            e = b + 1
            route_end[b] = e
        else:
            e = b + 1
            while e < r and classes[cps[e]] & JIEBA_HAN:
                e += 1
            han_route(cps, b, e, trie_root, trie_chars, trie, trie_shift, logp, unknown, edges, score, route_end)
        x = b
        while x < e:
            y = route_end[x]
            tok_start[nt], tok_end[nt], tok_digit[nt] = pos[x], pos[y], False
            nt += 1
            x = y
        b = e
    return i, nt


@njit(cache=True)
def word_counts(data, starts, ends, parts, furniture_weight, classes, seed, term_hashes, term_factors, number_weight,
                trie_root, trie_chars, trie, trie_shift, logp, unknown, edges):
    """Distinct tokens of the spans data[starts[i]:ends[i]] (UTF-8 uint8), in
    order of first occurrence; ``parts[i]`` is 0 for content, 1 for furniture.
    ``term_hashes``: the sorted hashes of the tokens damped for being common,
    ``term_factors`` their term weights; ``trie_root``
    .. ``edges``: the fields of a ``han_segmenter.Dictionary``.

    Returns (hashes uint64, counts float64 = content count + furniture weight x
    furniture count, term weights float64: ``term_factors`` for a common
    token, else number_weight for a token with a digit, else 1; number of tokens).
    """
    total = 0
    for t in range(starts.shape[0]):
        total += ends[t] - starts[t]
    cap = 64  # distinct tokens <= half the bytes: the table stays at most half full
    while cap < total + 16:
        cap *= 2
    slots = np.full(cap, -1, dtype=np.int64)  # open addressing: index into the arrays below
    mask = uint64(cap - 1)
    hashes = np.empty(cap // 2, dtype=np.uint64)
    c_count = np.zeros(cap // 2, dtype=np.int64)
    f_count = np.zeros(cap // 2, dtype=np.int64)
    digit = np.zeros(cap // 2, dtype=np.bool_)
    # a Han or no-space run's code points, their byte offsets and jieba's route
    # (those characters take 3 bytes). Allocated here, not at the first run:
    # an array made inside the loop slows the whole loop down 4x.
    size = total // 3 + 2  # (Han and no-space characters take 3 or 4 bytes)
    cps = np.empty(size, dtype=np.int64)
    pos = np.empty(size, dtype=np.int64)
    score = np.empty(size, dtype=np.float64)
    route_end = np.empty(size, dtype=np.int64)
    tok_start = np.empty(size, dtype=np.int64)
    tok_end = np.empty(size, dtype=np.int64)
    tok_digit = np.empty(size, dtype=np.bool_)
    m, tokens = _count_tokens(data, starts, ends, parts, classes, seed, trie_root, trie_chars, trie, trie_shift, logp,
                              unknown, edges, slots, mask, hashes, c_count, f_count, digit, cps, pos, score, route_end,
                              tok_start, tok_end, tok_digit)
    weights = np.empty(m, dtype=np.float64)
    term = np.empty(m, dtype=np.float64)
    _weights(m, hashes, c_count, f_count, digit, term_hashes, term_factors, number_weight, furniture_weight, weights, term)
    return hashes[:m], weights, term, tokens


# The loops below run without numba's reference counting (_nrt=False: they
# allocate nothing): its atomic increfs and decrefs of the arrays took ~40% of
# the kernel's time on Chinese pages (seen by sampling the stack).
@njit(cache=True, _nrt=False)
def _count_tokens(data, starts, ends, parts, classes, seed, trie_root, trie_chars, trie, trie_shift, logp, unknown,
                  edges,
                  slots, mask, hashes, c_count, f_count, digit, cps, pos, score, route_end, tok_start, tok_end,
                  tok_digit):
    """Tokenise, hash and count into the tables; returns (distinct tokens, tokens)."""
    m = 0
    tokens = 0
    for t in range(starts.shape[0]):
        part = parts[t]
        i = starts[t]
        n = ends[t]
        while i < n:
            cls, ln = _class_at(data, i, n, classes)
            if cls & (HAN | NOSPACE):
                i, nt = _script_run(data, i, n, cls & NOSPACE, classes, cps, pos, score, route_end,
                                    tok_start, tok_end, tok_digit, trie_root, trie_chars, trie, trie_shift, logp, unknown, edges)
            elif cls & WORD:
                s = i
                has_digit = False
                while i < n:
                    cls, ln = _class_at(data, i, n, classes)
                    if not cls & WORD:
                        break
                    if cls & DIGIT:
                        has_digit = True
                    i += ln
                tok_start[0], tok_end[0], tok_digit[0] = s, i, has_digit
                nt = 1
            else:
                i += ln
                continue
            tokens += nt
            for q in range(nt):
                h = murmur64(data, tok_start[q], tok_end[q], seed)
                slot = (h ^ (h >> uint64(29))) & mask
                while slots[slot] >= 0 and hashes[slots[slot]] != h:
                    slot = (slot + uint64(1)) & mask
                k = slots[slot]
                if k < 0:
                    k = m
                    slots[slot] = k
                    hashes[k] = h
                    digit[k] = tok_digit[q]
                    m += 1
                if part == 0:
                    c_count[k] += 1
                else:
                    f_count[k] += 1
    return m, tokens


@njit(cache=True, _nrt=False)
def _weights(m, hashes, c_count, f_count, digit, term_hashes, term_factors, number_weight, furniture_weight,
             weights, term):
    for k in range(m):
        at = np.searchsorted(term_hashes, hashes[k])
        if at < term_hashes.shape[0] and term_hashes[at] == hashes[k]:
            term[k] = term_factors[at]
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
