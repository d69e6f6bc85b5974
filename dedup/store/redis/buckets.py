"""What both admission paths (``single``, ``cluster``) and the queries share:
reading a batch's buckets and scanning them here, reading the scripts'
verdicts, and committing fingerprints into their buckets.

Reading first, with no write, settles most of a crawl's pages: a committed
neighbour within k makes a fingerprint a duplicate at the cost of one
pipelined round of MGETs (one per slot chunk), scanned with numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import scripts

if TYPE_CHECKING:
    from .parts import StoreParts


def read(store: StoreParts, fps: list[int], where: tuple,
         idx: list[int]) -> tuple[np.ndarray, dict[int, dict[int, int]]]:
    """Read the T buckets of ``idx`` (one pipelined round of MGETs, one per
    slot chunk) and scan them here, with numpy. Returns (the bucket lengths
    read, (T, len(fps)) by batch index, {index: {stored fingerprint within k:
    distance}} for those with a committed neighbour)."""
    commands, order = [], []
    for t in range(store.T):
        for chunk in store.keyspace.group(where[0][t], idx):
            commands.append(("MGET", *(where[1][t][i] for i in chunk)))
            order.append((t, chunk))
    seen = np.zeros((store.T, len(fps)), dtype=np.int64)
    blobs, owners, counts = [], [], []
    for (t, chunk), values in zip(order, store.connection.pipe(commands)):
        values = [v or b"" for v in values]
        sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        seen[t, chunk] = sizes
        blobs += values
        owners.append(np.array(chunk, dtype=np.int64))
        counts.append(sizes // 8)
    found: dict[int, dict[int, int]] = {}
    stored = np.frombuffer(b"".join(blobs), dtype=">u8").astype(np.uint64)
    if len(stored):
        owner = np.repeat(np.concatenate(owners), np.concatenate(counts))
        dist = np.bitwise_count(stored ^ np.array(fps, dtype=np.uint64)[owner])
        for j in np.flatnonzero(dist <= store.max_distance).tolist():
            found.setdefault(int(owner[j]), {})[int(stored[j])] = int(dist[j])
    return seen, found


def verdict(raw: bytes, pos: int, fp: int, found: dict[int, dict[int, int]], i: int) -> tuple[int, int]:
    """Read one fingerprint's verdict at ``raw[pos]`` ("0", "2", or "1" + a 2-byte
    count + that many 8-byte neighbours, put in ``found[i]``); returns it and the next position."""
    v = raw[pos] - 48
    pos += 1
    if v == 1:
        n = raw[pos] * 256 + raw[pos + 1]
        pos += 2
        hits = found.setdefault(i, {})
        for j in range(n):
            other = int.from_bytes(raw[pos + 8 * j : pos + 8 * j + 8], "big")
            hits[other] = (other ^ fp).bit_count()
        pos += 8 * n
    return v, pos


def commit(store: StoreParts, keys: Sequence[str], where: tuple, idx: list[int],
           repair: bool = False, once: bool = False) -> None:
    """Commit fingerprints ``idx`` of a batch into every table: table 0
    (with the records) first, so no table shows a fingerprint without its key.
    (One pipeline on one Redis, whose connection keeps the order; on a
    cluster the nodes run concurrently, so table 0 goes in a round of its own.)
    ``repair``: finish a record this process half-committed before an outage.
    ``once``: reserved fingerprints (no committed one within k, so none in its
    buckets), whose commit, sent again by redis-py after a lost answer, writes
    once (``scripts.COMMIT``; the same fingerprint added unconditionally between
    the reservation and the commit, by ``add``, is then in the other tables'
    buckets once for its two records: found all the same)."""
    if not idx:
        return
    head = [store.token, "1" if repair else "2" if once else "0"]
    first, _ = store.keyspace.calls(scripts.COMMIT, 0, idx, where, head,
                                    lambda chunk: [b"".join(where[3][i].to_bytes(8, "big") for i in chunk)]
                                    + [keys[i].encode("utf-8") for i in chunk])
    rest = [c for t in range(1, store.T) for c in store.keyspace.calls(scripts.COMMIT, t, idx, where, head)[0]]
    if store.cluster:
        store.connection.run(first)
        if rest:
            store.connection.run(rest)
    else:
        store.connection.run(first + rest)
