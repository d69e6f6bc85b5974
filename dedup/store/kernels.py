"""numba kernels for the permuted tables: permute, probe, merge, self-join.

Pure functions over numpy arrays; the ``PermutedTables`` class keeps the
arrays. Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64



@njit(cache=True, inline="always")
def popcount(x):
    # SWAR popcount; numba lowers this to a few integer ops
    x = x - ((x >> uint64(1)) & uint64(0x5555555555555555))
    x = (x & uint64(0x3333333333333333)) + ((x >> uint64(2)) & uint64(0x3333333333333333))
    x = (x + (x >> uint64(4))) & uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * uint64(0x0101010101010101)) >> uint64(56))


@njit(cache=True, inline="always")
def move_blocks(x, t, frm, to, mask):
    """Move each block j of table t from shift ``frm[t, j]`` to ``to[t, j]``."""
    out = uint64(0)
    for j in range(frm.shape[1]):
        out |= ((x >> frm[t, j]) & mask[t, j]) << to[t, j]
    return out


@njit(cache=True, inline="always")
def permute(x, t, src, dst, mask):
    return move_blocks(x, t, src, dst, mask)


@njit(cache=True, inline="always")
def unpermute(y, t, src, dst, mask):
    return move_blocks(y, t, dst, src, mask)


@njit(cache=True)
def move_all(xs, t, frm, to, mask):
    out = np.empty(xs.shape[0], dtype=np.uint64)
    for i in range(xs.shape[0]):
        out[i] = move_blocks(xs[i], t, frm, to, mask)
    return out


def permute_all(xs, t, src, dst, mask):
    return move_all(xs, t, src, dst, mask)


def unpermute_all(ys, t, src, dst, mask):
    return move_all(ys, t, dst, src, mask)


@njit(cache=True, inline="always")
def prefix_range_in(arr, lo, hi, y, shift):
    """[a, b) within sorted ``arr[lo:hi]`` of entries whose bits above ``shift`` equal y's."""
    if shift >= 64 or lo == hi:
        return lo, hi
    base = (y >> uint64(shift)) << uint64(shift)
    top = base | ((uint64(1) << uint64(shift)) - uint64(1))
    a, b = lo, hi
    while a < b:  # first entry >= base
        mid = (a + b) >> 1
        if arr[mid] < base:
            a = mid + 1
        else:
            b = mid
    first = a
    b = hi
    while a < b:  # first entry > top
        mid = (a + b) >> 1
        if arr[mid] <= top:
            a = mid + 1
        else:
            b = mid
    return first, a


@njit(cache=True, inline="always")
def prefix_range(arr, n, y, shift):
    """[lo, hi) of entries of sorted ``arr[:n]`` whose top bits (above ``shift``) equal y's."""
    return prefix_range_in(arr, np.int64(0), np.int64(n), y, shift)


@njit(cache=True)
def build_directory(level, dbits):
    """Per table, offsets of each value of the top ``dbits`` bits in the sorted
    rows of ``level``: entries [dir[t, v], dir[t, v + 1]) start with v."""
    T, n = level.shape
    size = 1 << dbits
    out = np.zeros((T, size + 1), dtype=np.uint32)
    counts = np.zeros(size + 1, dtype=np.int64)
    shift = uint64(64 - dbits) if dbits > 0 else uint64(63)
    for t in range(T):
        counts[:] = 0
        row = level[t]
        for i in range(n):
            v = np.int64(0)
            if dbits > 0:
                v = np.int64(row[i] >> shift)
            counts[v + 1] += 1
        for v in range(size):
            counts[v + 1] += counts[v]
        for v in range(size + 1):
            out[t, v] = counts[v]
    return out


@njit(cache=True, inline="always")
def main_range(arr, n, directory, t, dbits, y, shift):
    """``prefix_range`` in the main level, narrowed first by its directory."""
    if dbits > 0:
        v = np.int64(y >> uint64(64 - dbits))
        return prefix_range_in(arr, np.int64(directory[t, v]), np.int64(directory[t, v + 1]), y, shift)
    return prefix_range_in(arr, np.int64(0), np.int64(n), y, shift)


@njit(cache=True, inline="always")
def level_range(arr, li, sizes, directory, t, dbits, y, shift):
    """Candidates of level ``li`` in table t: main (0) through its directory, delta by binary search."""
    if li == 0:
        return main_range(arr, sizes[0], directory, t, dbits, y, shift)
    return prefix_range(arr, sizes[li], y, shift)


@njit(cache=True, inline="always")
def push_distinct(out, cnt, v):
    """Append v to out[:cnt] unless already there; returns (count, out was full)."""
    for j in range(cnt):
        if out[j] == v:
            return cnt, False
    if cnt < out.shape[0]:
        out[cnt] = v
        return cnt + 1, False
    return cnt, True


@njit(cache=True)
def probe(q, k, levels, sizes, directory, dbits, shifts, src, dst, mask, buf, nbuf, out):
    """Fingerprints within ``k`` of ``q``: writes distinct matches to ``out``;
    returns their count, or -(count) - 1 when ``out`` is too small.

    ``levels``: (main, delta), 2D sorted arrays (tables x n); ``sizes``: their
    lengths; ``directory``/``dbits``: main's prefix directory (``build_directory``).
    ``buf``: unsorted raw fingerprints, scanned exhaustively.
    """
    cnt = 0
    overflow = False
    for i in range(nbuf):
        v = buf[i]
        if popcount(v ^ q) <= k:
            cnt, full = push_distinct(out, cnt, v)
            overflow |= full
    for t in range(src.shape[0]):
        y = permute(q, t, src, dst, mask)
        for li in range(len(levels)):
            arr = levels[li][t]
            lo, hi = level_range(arr, li, sizes, directory, t, dbits, y, shifts[t])
            for i in range(lo, hi):
                w = arr[i]
                if popcount(w ^ y) <= k:
                    cnt, full = push_distinct(out, cnt, unpermute(w, t, src, dst, mask))
                    overflow |= full
    return -cnt - 1 if overflow else cnt


@njit(cache=True)
def any_within(q, k, levels, sizes, directory, dbits, shifts, src, dst, mask, buf, nbuf):
    """Nearest distance of a stored fingerprint within ``k`` of q, or -1; the fingerprint."""
    # Buffer: a branch-free min pass (vectorisable), then find the entry only on a hit.
    best = k + 1
    best_v = uint64(0)
    m = 64
    for i in range(nbuf):
        m = min(m, popcount(buf[i] ^ q))
    if m < best:
        for i in range(nbuf):
            if popcount(buf[i] ^ q) == m:
                best = m
                best_v = buf[i]
                break
    for t in range(src.shape[0]):
        y = permute(q, t, src, dst, mask)
        for li in range(len(levels)):
            arr = levels[li][t]
            lo, hi = level_range(arr, li, sizes, directory, t, dbits, y, shifts[t])
            for i in range(lo, hi):
                d = popcount(arr[i] ^ y)
                if d < best:
                    best = d
                    best_v = unpermute(arr[i], t, src, dst, mask)
    if best > k:
        return -1, best_v
    return best, best_v


@njit(cache=True)
def merge_sorted(a, na, b, nb):
    out = np.empty(na + nb, dtype=np.uint64)
    i = j = o = 0
    while i < na and j < nb:
        if a[i] <= b[j]:
            out[o] = a[i]
            i += 1
        else:
            out[o] = b[j]
            j += 1
        o += 1
    while i < na:
        out[o] = a[i]
        i += 1
        o += 1
    while j < nb:
        out[o] = b[j]
        j += 1
        o += 1
    return out


@njit(cache=True)
def merge_sorted_ids(a, ai, na, b, bi, nb):
    out = np.empty(na + nb, dtype=np.uint64)
    oid = np.empty(na + nb, dtype=np.uint32)
    i = j = o = 0
    while i < na and j < nb:
        if a[i] <= b[j]:
            out[o] = a[i]
            oid[o] = ai[i]
            i += 1
        else:
            out[o] = b[j]
            oid[o] = bi[j]
            j += 1
        o += 1
    while i < na:
        out[o] = a[i]
        oid[o] = ai[i]
        i += 1
        o += 1
    while j < nb:
        out[o] = b[j]
        oid[o] = bi[j]
        j += 1
        o += 1
    return out, oid


@njit(cache=True, inline="always")
def first_sees(x, t, block_masks, first_clean):
    """Whether table t is the first to see a pair whose values differ by ``x``
    (unpermuted): the first table whose leading blocks ``x`` leaves clean."""
    dirty = 0
    for blk in range(block_masks.shape[0]):
        if x & block_masks[blk]:
            dirty |= 1 << blk
    return first_clean[dirty] == t


@njit(cache=True, inline="always")
def prefix_run_end(arr, i, n, shift):
    """The end of the run of ``arr[i:n]`` that shares ``arr[i]``'s prefix (its bits
    above ``shift``; all of ``arr`` when ``shift`` is 64): a bucket of a self-join."""
    base = arr[i] >> uint64(shift) if shift < 64 else uint64(0)
    j = i + 1
    while j < n and (arr[j] >> uint64(shift) if shift < 64 else uint64(0)) == base:
        j += 1
    return j


@njit(cache=True)
def self_join_table(arr, t, k, shift, src, dst, mask, block_masks, first_clean, out_a, out_b, out_d, start):
    """Pairs of distinct *values* in sorted unique ``arr`` (table t) within k that
    table t is the first to see (by the dirty-block rule), appended at ``start``.
    Returns the new count, or -1 when the output arrays are full."""
    n = arr.shape[0]
    cnt = start
    cap = out_a.shape[0]
    i = 0
    while i < n:
        j = prefix_run_end(arr, i, n, shift)
        for a in range(i, j):
            for b in range(a + 1, j):
                d = popcount(arr[a] ^ arr[b])
                if d <= k:
                    va = unpermute(arr[a], t, src, dst, mask)
                    vb = unpermute(arr[b], t, src, dst, mask)
                    if first_sees(va ^ vb, t, block_masks, first_clean):
                        if cnt >= cap:
                            return -1
                        out_a[cnt] = va
                        out_b[cnt] = vb
                        out_d[cnt] = d
                        cnt += 1
        i = j
    return cnt


@njit(cache=True)
def check_batch(qs, start, k, levels, sizes, directory, dbits, shifts, src, dst, mask, buf, nbuf, out_d, out_v):
    """Sequential check-and-add of ``qs[start:]``: each query is checked against
    the levels and the buffer (which holds the batch's earlier additions); a
    query with no match within k is appended to the buffer. Stops when the
    buffer is full. Returns (next index, new nbuf); ``out_d[i]`` is the
    distance of query i's nearest match or -1 if it was added."""
    i = start
    cap = buf.shape[0]
    while i < qs.shape[0] and nbuf < cap:
        d, v = any_within(qs[i], k, levels, sizes, directory, dbits, shifts, src, dst, mask, buf, nbuf)
        out_d[i] = d
        out_v[i] = v
        if d < 0:
            buf[nbuf] = qs[i]
            nbuf += 1
        i += 1
    return i, nbuf


@njit(cache=True)
def unique_sorted(arr):
    """Distinct values of a sorted array, O(n) (np.unique would sort again)."""
    n = arr.shape[0]
    out = np.empty(n, dtype=np.uint64)
    m = 0
    for i in range(n):
        if i == 0 or arr[i] != arr[i - 1]:
            out[m] = arr[i]
            m += 1
    return out[:m]


@njit(cache=True, inline="always")
def uf_find(parent, i):
    """Root of i in the union-find ``parent`` (path halving: amortised near O(1))."""
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@njit(cache=True)
def uf_roots(parent, items):
    """Root of each of ``items`` (compressing the paths on the way)."""
    out = np.empty(items.shape[0], dtype=parent.dtype)
    for x in range(items.shape[0]):
        out[x] = uf_find(parent, items[x])
    return out


@njit(cache=True)
def self_join_table_union(arr, idx, t, k, shift, src, dst, mask, block_masks, first_clean, parent, linked):
    """``self_join_table``'s pairs, merged as they are found instead of listed:
    ``arr`` is table t's permuted values sorted by prefix, ``idx`` their
    positions; each pair table t is the first to see joins its two positions'
    sets in the union-find ``parent`` (the smaller root wins) and marks both
    ``linked``. Returns the number of pairs. Memory O(1) beyond the arrays."""
    n = arr.shape[0]
    cnt = 0
    i = 0
    while i < n:
        j = prefix_run_end(arr, i, n, shift)
        for a in range(i, j):
            for b in range(a + 1, j):
                x = arr[a] ^ arr[b]
                if popcount(x) <= k and first_sees(unpermute(x, t, src, dst, mask), t, block_masks, first_clean):
                    pa = idx[a]
                    pb = idx[b]
                    linked[pa] = True
                    linked[pb] = True
                    ra = uf_find(parent, pa)
                    rb = uf_find(parent, pb)
                    if ra < rb:
                        parent[rb] = ra
                    elif rb < ra:
                        parent[ra] = rb
                    cnt += 1
        i = j
    return cnt
