"""Table layouts for Hamming-distance-k search (Manku et al., WWW 2007, 3.1).

Split the f = 64 bits into ``b > k`` blocks. Two fingerprints that differ in
at most ``k`` bits leave at least ``b - k`` blocks untouched, so for every
choice of ``b - k`` blocks one table sorts all fingerprints permuted to put
those blocks first: ``C(b, k)`` tables, each with a prefix of about
``64 (b - k) / b`` bits. A probe looks up the query's prefix in every table;
some table is certain to hold each neighbour within k bits under the
query's prefix (pigeonhole), so the search is exact.

More blocks give longer prefixes (fewer candidates to check per probe) and
more tables (more memory): with ``n`` stored fingerprints a probe of one
table checks about ``n / 2**prefix`` candidates. ``choose_layout`` takes the
fewest tables that keep that under ``max_candidates`` at the expected
capacity, as the paper's 3.1.1 does (k = 3: 4 tables of 16-bit prefixes up to
~16M fingerprints, 10 tables of 25-26 bits up to ~8G, 20 tables of 31-33
bits beyond).

>>> lay = choose_layout(3, 1_000_000)
>>> lay.n_tables, lay.min_prefix_bits, lay.blocks
(4, 16, (16, 16, 16, 16))
>>> choose_layout(3, 10**9).n_tables
10
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

import numpy as np

FP_BITS = 64
MAX_DISTANCE = 8


@dataclass(frozen=True)
class Layout:
    """``blocks``: widths from the most significant end; ``leads``: per table,
    the block indices that form its prefix (in order)."""

    k: int
    blocks: tuple[int, ...]
    leads: tuple[tuple[int, ...], ...]

    @property
    def n_tables(self) -> int:
        return len(self.leads)

    def prefix_bits(self, table: int) -> int:
        return sum(self.blocks[i] for i in self.leads[table])

    @property
    def min_prefix_bits(self) -> int:
        return min(self.prefix_bits(t) for t in range(self.n_tables))

    def order(self, table: int) -> tuple[int, ...]:
        """All block indices in the table's order: leading blocks, then the rest."""
        lead = self.leads[table]
        return lead + tuple(i for i in range(len(self.blocks)) if i not in lead)

    def bytes_per_fingerprint(self) -> int:
        """RAM per stored fingerprint: 8 bytes a table + a 4-byte row id."""
        return 8 * self.n_tables + 4

    def expected_candidates(self, n: int) -> float:
        """Expected fingerprints checked by one probe (all tables) among ``n`` random ones."""
        return sum(n / 2 ** self.prefix_bits(t) for t in range(self.n_tables))

    def to_json(self) -> str:
        return json.dumps({"k": self.k, "blocks": list(self.blocks), "leads": [list(x) for x in self.leads]})

    @classmethod
    def from_json(cls, text: str) -> Layout:
        d = json.loads(text)
        return cls(d["k"], tuple(d["blocks"]), tuple(tuple(x) for x in d["leads"]))

    def describe(self) -> str:
        return f"k={self.k}: {self.n_tables} tables, blocks {self.blocks}, prefixes {self.min_prefix_bits}+ bits"

    # -- permutations as shift/mask arrays for the kernels -------------------

    def shift_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src_shift, dst_shift, mask), each (tables, blocks) uint64: permuted
        value = OR over j of ((x >> src[t, j]) & mask[t, j]) << dst[t, j]."""
        nb = len(self.blocks)
        starts = []  # shift of each block's least significant bit in the original
        pos = FP_BITS
        for w in self.blocks:
            pos -= w
            starts.append(pos)
        src = np.zeros((self.n_tables, nb), dtype=np.uint64)
        dst = np.zeros_like(src)
        mask = np.zeros_like(src)
        for t in range(self.n_tables):
            pos = FP_BITS
            for j, blk in enumerate(self.order(t)):
                w = self.blocks[blk]
                pos -= w
                src[t, j] = starts[blk]
                dst[t, j] = pos
                mask[t, j] = (1 << w) - 1
        return src, dst, mask

    def first_clean_table(self) -> np.ndarray:
        """For each set of dirty blocks (bitmask over blocks), the first table
        whose leading blocks are all clean, or -1. Used to report each pair once."""
        nb = len(self.blocks)
        out = np.full(1 << nb, -1, dtype=np.int64)
        for dirty in range(1 << nb):
            for t, lead in enumerate(self.leads):
                if not any(dirty >> i & 1 for i in lead):
                    out[dirty] = t
                    break
        return out

    def prefixes(self, fps: np.ndarray) -> np.ndarray:
        """(tables, n) uint64: each fingerprint's prefix in each table (its
        leading blocks, concatenated): the bucket a fingerprint falls in.
        Two fingerprints within k bits share the prefix of some table."""
        fps = np.asarray(fps, dtype=np.uint64)
        src, _, mask = self.shift_arrays()
        out = np.zeros((self.n_tables, len(fps)), dtype=np.uint64)
        for t, lead in enumerate(self.leads):
            for j, blk in enumerate(lead):
                out[t] = (out[t] << np.uint64(self.blocks[blk])) | ((fps >> src[t, j]) & mask[t, j])
        return out

    def near_pairs(self, fps: np.ndarray, prefixes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The pairs of a small array within k bits, each once: index arrays
        (a, b), a < b. Candidates are the pairs sharing a prefix in some table
        (pigeonhole: every pair within k is one), checked exactly. For a batch
        sent to a shared store, not for a store's self-join (that is the
        compiled ``PermutedTables.row_pairs``). About n log n per table plus the
        candidates (n**2 / 2 when all n share a prefix).

        >>> lay = choose_layout(3, 1000)
        >>> a, b = lay.near_pairs(np.array([0, 2**64 - 1, 7], dtype=np.uint64))
        >>> a.tolist(), b.tolist()
        ([0], [2])
        """
        fps = np.asarray(fps, dtype=np.uint64)
        if prefixes is None:
            prefixes = self.prefixes(fps)
        parts_a, parts_b = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
        for row in prefixes:
            order = np.argsort(row, kind="stable")
            srt = row[order]
            starts = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]])
            counts = np.diff(np.r_[starts, len(srt)])
            two = starts[counts == 2]  # (nearly all groups, in random data: at once)
            parts_a.append(np.minimum(order[two], order[two + 1]))
            parts_b.append(np.maximum(order[two], order[two + 1]))
            for s, c in zip(starts[counts > 2].tolist(), counts[counts > 2].tolist()):
                members = np.sort(order[s : s + c])
                ia, ib = np.triu_indices(c, 1)
                parts_a.append(members[ia])
                parts_b.append(members[ib])
        a, b = np.concatenate(parts_a), np.concatenate(parts_b)
        if len(a):
            pairs = np.unique(np.stack([a, b], axis=1), axis=0)  # (a pair may share several tables' prefixes)
            a, b = pairs[:, 0], pairs[:, 1]
            near = np.bitwise_count(fps[a] ^ fps[b]) <= self.k
            a, b = a[near], b[near]
        return a, b

    def block_masks(self) -> np.ndarray:
        """uint64 mask of each block in the original bit order."""
        out = []
        pos = FP_BITS
        for w in self.blocks:
            pos -= w
            out.append(((1 << w) - 1) << pos)
        return np.array(out, dtype=np.uint64)


def even_blocks(n_blocks: int) -> tuple[int, ...]:
    q, r = divmod(FP_BITS, n_blocks)
    return tuple(q + 1 if i < r else q for i in range(n_blocks))


def make_layout(k: int, n_blocks: int) -> Layout:
    """The layout with ``n_blocks`` near-equal blocks and all C(b, k) tables.

    Tables are listed in lexicographic order of their leading blocks, so
    table 0 leads with blocks 0..b-k-1: the identity permutation.
    """
    if not 0 <= k <= MAX_DISTANCE:
        raise ValueError(f"max_distance must be 0..{MAX_DISTANCE}, got {k}")
    if k == 0:
        return Layout(0, (FP_BITS,), ((0,),))
    if not k < n_blocks <= FP_BITS:
        raise ValueError(f"need more blocks than k={k}, got {n_blocks}")
    blocks = even_blocks(n_blocks)
    leads = tuple(itertools.combinations(range(n_blocks), n_blocks - k))
    return Layout(k, blocks, leads)


def choose_layout(k: int, capacity: int, *, max_candidates: float = 256.0, max_tables: int = 64) -> Layout:
    """Fewest tables with at most ``max_candidates`` per table probe at ``capacity``.

    Without one within ``max_tables``, the layout with the most tables allowed.
    """
    if capacity < 1:
        raise ValueError("capacity must be >= 1")
    if k == 0:
        return make_layout(0, 1)
    best = make_layout(k, k + 1)
    for b in range(k + 1, FP_BITS + 1):
        if math.comb(b, k) > max_tables:
            break
        lay = make_layout(k, b)
        best = lay
        if capacity / 2 ** lay.min_prefix_bits <= max_candidates:
            break
    return best
