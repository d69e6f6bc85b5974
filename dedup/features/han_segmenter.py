"""jieba's exact mode, compiled: dictionary DAG and maximum-probability route, HMM off.

``word_kernel`` segments each run of Han characters with ``han_route``, so a
Chinese page is segmented, hashed and counted in one compiled pass, with no
Python string per word. It gives the words rjieba (jieba-rs) gives, which
``tokens`` uses as the reference; tests compare the two on real pages and on
generated text. So the scheme does not change:

* the dictionary is jieba's own ``dict.txt`` (349,045 words). As in jieba-rs,
  a word listed twice keeps its last frequency and counts once in the total;
* a run is cut into blocks at the characters jieba-rs does not treat as Han
  (its ``RE_HAN_DEFAULT``: U+3400-4DBF, U+4E00-9FFF, U+F900-FAFF and
  extensions B-F). Each such character is a word by itself;
* in a block, from the right: ``route[i]`` is the best over dictionary words
  ``w = block[i:j]`` (or the single character, frequency 1) of
  ``(log freq(w) - log total) + route[j]``, ties going to the longer word (jieba
  and jieba-rs both take the max of (score, end) pairs).

The dictionary is a hash trie: one uint64 array whose entries pack (parent
node, code point) -> child node, about 500,000 nodes in 8 MiB, built from
dict.txt at first use (~0.3 s). A 512 KB bitset of the edges answers most
probes for an edge that is not there without touching the table (a probe of
the table misses the cache when the pages come between other work: 10% off
the kernel then). The log frequencies are computed by Python's
``math.log`` (the C library's ``log``, which jieba-rs's ``f64::ln`` also
calls), so every score is the same double as jieba-rs's.

Cost: O(n x L) for a block of n characters, L the longest word (16); each step
is one hash probe, about two per character on real text.

>>> segment("我们中出了一个叛徒")
['我们', '中', '出', '了', '一个', '叛徒']
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit, uint64

_GOLDEN = uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key x golden ratio
# The build-time trie numbers nodes in 20 bits: an edge is (parent << 16 | code point) << 20 | child.
_BUILD_CHILD_BITS = 20
_BUILD_CHILD_MASK = uint64((1 << _BUILD_CHILD_BITS) - 1)
# The compact trie the kernels read: only nodes with children get an id (18 bits; a
# leaf is LEAF), a character after the first is a dense id (13 bits) and a node's
# score is one of the distinct scores (13 bits), so an edge (parent, character)
# -> (child, score) fits one uint64 and a probe reads one cache line.
_NODE_BITS, _CHAR_BITS, _CLASS_BITS = 18, 13, 13
LEAF = (1 << _NODE_BITS) - 1
_CLASS_MASK = (1 << _CLASS_BITS) - 1
_VALUE_MASK = uint64((1 << 32) - 1)
# jieba-rs's RE_HAN_DEFAULT: the characters its dictionary DAG sees
JIEBA_HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0x2CEB0, 0x2EBEF), (0x2F800, 0x2FA1F))


class Dictionary(NamedTuple):
    """The compact trie as arrays (what the kernels take). A node's *value* is
    ``child id << 13 | score class`` (class 0: no word ends there)."""

    root: np.ndarray  # int32 per BMP code point: the value of the root's edge by it, or -1
    chars: np.ndarray  # int16 per BMP code point: its id after a word's first character, 0 if never
    table: np.ndarray  # uint64 entries (parent id << 13 | char id) << 32 | value; 0 = empty
    shift: int  # 64 - log2(len(table)): slot = (key * golden) >> shift
    logp: np.ndarray  # float64 per score class: log(freq) - log(total); [0] unused
    unknown: float  # the score of a character that is no word: log(1) - log(total)
    edges: np.ndarray  # uint64 bitset: bit _edge_bit(key) set for every key in ``table``


@njit(cache=True, inline="always")
def _slot(key, shift):
    return (key * _GOLDEN) >> uint64(shift)


_EDGE_MULT = uint64(0xD6E8FEB86659FD93)  # another odd multiplier: the bitset's hash is not the table's
_EDGE_BITS = 22  # 4M bits (512 KB) for ~490,000 edges: ~11% of absent edges pass


@njit(cache=True, inline="always")
def _edge_bit(key):
    return (key * _EDGE_MULT) >> uint64(64 - _EDGE_BITS)


@njit(cache=True, inline="always")
def trie_child(table, shift, node, char_id, edges):
    """The value of ``node``'s edge by ``char_id``, or -1. Most absent edges
    are told by the bitset, which is 16x smaller than the table and so stays
    in cache (a probe of the table is a cache miss when it comes cold)."""
    key = (uint64(node) << uint64(_CHAR_BITS)) | uint64(char_id)
    bit = _edge_bit(key)
    if (edges[bit >> uint64(6)] >> (bit & uint64(63))) & uint64(1) == 0:
        return np.int64(-1)
    mask = uint64(table.shape[0] - 1)
    slot = _slot(key, shift)
    while True:
        e = table[slot]
        if e == 0:
            return np.int64(-1)
        if (e >> uint64(32)) == key:
            return np.int64(e & _VALUE_MASK)
        slot = (slot + uint64(1)) & mask


@njit(cache=True)
def _insert_all(keys, values, bits):
    table = np.zeros(1 << bits, dtype=np.uint64)
    shift = 64 - bits
    mask = uint64((1 << bits) - 1)
    for k in range(keys.shape[0]):
        key = uint64(keys[k])
        slot = _slot(key, shift)
        while table[slot] != 0:
            slot = (slot + uint64(1)) & mask
        table[slot] = (key << uint64(32)) | uint64(values[k])
    return table


@njit(cache=True)
def _parse_dict(data):
    """Words of dict.txt (UTF-8 uint8: ``word freq [tag]`` lines) into trie edges.

    Returns (edge keys, edge children, freq per node: -1 where no word ends,
    number of nodes, ok); not ok when a word has a character beyond the BMP
    or a line has no valid frequency."""
    n = data.shape[0]
    # nodes <= characters in the file, and fewer than 2**20 (else not ok, below): the arrays and the
    # table are sized by the smaller, not by the bytes (5 MB of dict.txt made ~250 MB of them, for a moment)
    cap = min(n + 1, 1 << _BUILD_CHILD_BITS)
    freq = np.full(cap, -1, dtype=np.int64)
    keys = np.empty(cap, dtype=np.int64)
    children = np.empty(cap, dtype=np.int64)
    # a growing open-addressing table while building (keys -> child)
    bits = 22
    while (1 << bits) < 2 * cap:
        bits += 1
    table = np.zeros(1 << bits, dtype=np.uint64)
    shift = 64 - bits
    mask = uint64((1 << bits) - 1)
    nodes = 1
    edges = 0
    i = 0
    while i < n:
        # one line: the word runs to the first space or tab
        node = 0
        while i < n and data[i] != 32 and data[i] != 9 and data[i] != 10 and data[i] != 13:
            b = data[i]
            if b < 0x80:
                cp, ln = np.int64(b), 1
            elif b >= 0xF0:
                return keys[:0], children[:0], freq[:0], 0, False
            elif b >= 0xE0 and i + 2 < n:
                cp, ln = np.int64(((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)), 3
            elif b >= 0xC0 and i + 1 < n:
                cp, ln = np.int64(((b & 0x1F) << 6) | (data[i + 1] & 0x3F)), 2
            else:
                return keys[:0], children[:0], freq[:0], 0, False
            i += ln
            key = (uint64(node) << uint64(16)) | uint64(cp)
            slot = _slot(key, shift)
            child = -1
            while table[slot] != 0:
                if (table[slot] >> uint64(_BUILD_CHILD_BITS)) == key:
                    child = np.int64(table[slot] & _BUILD_CHILD_MASK)
                    break
                slot = (slot + uint64(1)) & mask
            if child < 0:
                child = nodes
                nodes += 1
                if nodes >= (1 << _BUILD_CHILD_BITS):
                    return keys[:0], children[:0], freq[:0], 0, False
                table[slot] = (key << uint64(_BUILD_CHILD_BITS)) | uint64(child)
                keys[edges] = np.int64(key)
                children[edges] = child
                edges += 1
            node = child
        # the frequency: digits after the separating spaces
        while i < n and (data[i] == 32 or data[i] == 9):
            i += 1
        f = np.int64(0)
        digits = 0
        while i < n and 48 <= data[i] <= 57:
            f = f * 10 + (data[i] - 48)
            digits += 1
            i += 1
        if node != 0:
            if digits == 0:
                return keys[:0], children[:0], freq[:0], 0, False
            freq[node] = f  # a word listed twice keeps its last frequency
        while i < n and data[i] != 10:
            i += 1
        i += 1
    return keys[:edges].copy(), children[:edges].copy(), freq[:nodes].copy(), nodes, True


def dictionary_path() -> str:
    """jieba's dict.txt, from the installed jieba package."""
    import importlib.util

    spec = importlib.util.find_spec("jieba")
    if spec is None or not spec.origin:
        raise RuntimeError("jieba is not installed: its dict.txt is the Han segmenter's dictionary")
    return os.path.join(os.path.dirname(spec.origin), "dict.txt")


def build_dictionary(data: bytes) -> Dictionary:
    """The trie of a jieba-format dictionary (UTF-8 ``word freq [tag]`` lines)."""
    keys, children, freq, nodes, ok = _parse_dict(np.frombuffer(data, dtype=np.uint8))
    if not ok:
        raise ValueError("dictionary: a line without a frequency, or a word beyond the BMP or of over 2**20 nodes")
    words = freq >= 0
    total = int(freq[words].sum())
    if total <= 0:
        raise ValueError("dictionary: no word with a positive frequency")
    logtotal = math.log(total)
    # Python's math.log per distinct frequency, as jieba-rs computes ln(freq) - ln(total)
    distinct, inverse = np.unique(freq[words], return_inverse=True)
    logp = np.array([math.nan] + [math.log(f) - logtotal if f > 0 else -math.inf for f in distinct.tolist()])
    score_class = np.zeros(nodes, dtype=np.int64)
    score_class[words] = inverse.reshape(-1) + 1
    parent, cp = keys >> 16, keys & 0xFFFF
    node_id = np.full(nodes, LEAF, dtype=np.int64)
    internal = np.flatnonzero(np.bincount(parent, minlength=nodes))  # the root (0) first: id 0
    node_id[internal] = np.arange(len(internal))
    deep = parent != 0
    deep_chars = np.unique(cp[deep])
    if len(internal) >= LEAF or len(deep_chars) >= 1 << _CHAR_BITS or len(logp) > 1 << _CLASS_BITS:
        raise ValueError(f"dictionary: too large for the compact trie ({len(internal):,} inner nodes, "
                         f"{len(deep_chars):,} characters, {len(logp) - 1:,} frequencies)")
    chars = np.zeros(0x10000, dtype=np.int16)
    chars[deep_chars] = np.arange(1, len(deep_chars) + 1)
    value = (node_id[children] << _CLASS_BITS) | score_class[children]
    root = np.full(0x10000, -1, dtype=np.int32)
    root[cp[~deep]] = value[~deep]
    table_keys = (node_id[parent[deep]] << _CHAR_BITS) | chars[cp[deep]]
    bits = 4
    while (1 << bits) < 2 * max(len(table_keys), 1):  # at most half full
        bits += 1
    table = _insert_all(table_keys, value[deep], bits)
    return Dictionary(root, chars, table, 64 - bits, logp, 0.0 - logtotal, _edge_bitset(table_keys))


@njit(cache=True)
def _edge_bitset(keys):
    edges = np.zeros(1 << (_EDGE_BITS - 6), dtype=np.uint64)
    for k in range(keys.shape[0]):
        bit = _edge_bit(uint64(keys[k]))
        edges[bit >> uint64(6)] |= uint64(1) << (bit & uint64(63))
    return edges


def check_dictionary(d: Dictionary, data: bytes, sample: int | None = None) -> None:
    """Invariants of a trie built from ``data``: raises AssertionError.

    Every word (or every ``sample``-th) is found with its own score, and every
    proper prefix of it is found too; exactly the distinct words have a score;
    the table is at most half full and every entry lies after its home slot
    with no empty slot between.
    """
    lines = [line.split() for line in data.decode("utf-8").splitlines() if line.strip()]
    freq = {parts[0]: int(parts[1]) for parts in lines}  # the last frequency wins
    logtotal = math.log(sum(freq.values()))
    assert d.unknown == 0.0 - logtotal
    scored = int(np.count_nonzero(d.root[d.root >= 0] & _CLASS_MASK))
    scored += int(np.count_nonzero((d.table[d.table != 0] & np.uint64(_CLASS_MASK)) != 0))
    assert scored == len(freq), "nodes with a score != distinct words"
    filled = np.flatnonzero(d.table)
    assert len(filled) * 2 <= len(d.table), "table over half full"
    assert len(d.table) == 1 << (64 - d.shift)
    for k, (word, f) in enumerate(freq.items()):
        if sample and k % sample:
            continue
        value = int(d.root[ord(word[0])])
        for ch in word[1:]:
            assert value >= 0 and value >> _CLASS_BITS != LEAF and d.chars[ord(ch)] > 0, f"{word!r} not in the trie"
            value = int(trie_child(d.table, d.shift, value >> _CLASS_BITS, d.chars[ord(ch)], d.edges))
        assert value >= 0, f"{word!r} not in the trie"
        assert d.logp[value & _CLASS_MASK] == math.log(f) - logtotal, word
    keys = d.table[filled] >> np.uint64(32)
    bits = (keys * _EDGE_MULT) >> np.uint64(64 - _EDGE_BITS)
    assert ((d.edges[bits >> np.uint64(6)] >> (bits & np.uint64(63))) & np.uint64(1)).all(), "an edge missing from the bitset"
    mask = len(d.table) - 1
    for slot in filled[:: max(1, len(filled) // 5000)].tolist():
        key = int(d.table[slot]) >> 32
        home = ((key * int(_GOLDEN)) % 2**64) >> d.shift
        while home != slot:
            assert d.table[home] != 0, "a gap between an entry and its home slot"
            home = (home + 1) & mask


@lru_cache(maxsize=1)
def default_dictionary() -> Dictionary:
    """jieba's default dictionary, built once per process."""
    with open(dictionary_path(), "rb") as f:
        return build_dictionary(f.read())


@njit(cache=True, inline="always")
def han_route(cps, b, e, root, chars, table, shift, logp, unknown, edges, score, route_end):
    """jieba's route over the block cps[b:e]: fills route_end[i] (b <= i < e),
    the end of the word that starts at i; ``score`` is scratch (length > e)."""
    score[e] = 0.0
    for i in range(e - 1, b - 1, -1):
        cp = cps[i]
        value = np.int64(root[cp]) if cp < root.shape[0] else np.int64(-1)  # no word starts beyond the BMP
        best = 0.0
        best_end = -1
        j = i
        while value >= 0:
            cls = value & _CLASS_MASK
            if cls:  # a word ends here
                cand = logp[cls] + score[j + 1]
                if best_end < 0 or cand >= best:  # ties: the longer word
                    best = cand
                    best_end = j + 1
            node = value >> _CLASS_BITS
            j += 1
            if node == LEAF or j >= e:
                break
            c = chars[cps[j]] if cps[j] < chars.shape[0] else 0
            if c == 0:  # in no word after the first character
                break
            value = trie_child(table, shift, node, c, edges)
        if best_end < 0:
            best = unknown + score[i + 1]
            best_end = i + 1
        score[i] = best
        route_end[i] = best_end


def _in_jieba_han(cp: int) -> bool:
    return any(a <= cp <= b for a, b in JIEBA_HAN_RANGES)


@njit(cache=True)
def _segment_cps(cps, jhan, root, chars, table, shift, logp, unknown, edges):
    n = cps.shape[0]
    score = np.empty(n + 1, dtype=np.float64)
    route_end = np.empty(n + 1, dtype=np.int64)
    ends = np.empty(n, dtype=np.int64)
    m = 0
    b = 0
    while b < n:
        if not jhan[b]:
            ends[m] = b + 1
            m += 1
            b += 1
            continue
        e = b
        while e < n and jhan[e]:
            e += 1
        han_route(cps, b, e, root, chars, table, shift, logp, unknown, edges, score, route_end)
        x = b
        while x < e:
            x = route_end[x]
            ends[m] = x
            m += 1
        b = e
    return ends[:m]


def segment(run: str, dictionary: Dictionary | None = None) -> list[str]:
    """The words of a run of Han characters, as rjieba.cut(run, False) gives them.

    For tests and tools; ``word_kernel`` calls ``han_route`` directly.
    """
    d = dictionary or default_dictionary()
    cps = np.array([ord(c) for c in run], dtype=np.int64)
    jhan = np.array([_in_jieba_han(int(c)) for c in cps], dtype=np.bool_)
    ends = _segment_cps(cps, jhan, *d).tolist()
    return [run[a:b] for a, b in zip([0, *ends], ends)]
