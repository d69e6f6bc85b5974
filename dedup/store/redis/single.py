"""Admission on one Redis: check and commit all tables in one Lua step per chunk.

A fingerprint with no committed neighbour in the buckets read
(``buckets.read``) goes to ``CHECK_AND_COMMIT``, which appends it to its T
buckets, scans whatever another process appended since the read (usually
nothing: APPEND's new length says so), and writes its record; or, finding a
neighbour there, undoes the appends. One Redis runs one script at a time,
so the step is atomic across every process sharing the store.

Round trips per new fingerprint: 2 (read, check-and-commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import scripts
from .buckets import read, verdict
from .keys import CHUNK

if TYPE_CHECKING:
    from .parts import StoreParts


def check_and_commit(store: StoreParts, fps: list[int], keys: Sequence[str], where: tuple,
                     idx: list[int]) -> dict[int, dict[int, int]]:
    """Read and scan the buckets here, then check what was committed since
    and commit, all tables in one Lua step per chunk
    (``scripts.CHECK_AND_COMMIT``). Returns the duplicates' neighbours,
    {index: {stored fingerprint: distance}}."""
    seen, found = read(store, fps, where, idx)
    todo = [i for i in idx if i not in found]
    calls, order = [], []
    for c in range(0, len(todo), CHUNK):
        chunk = todo[c : c + CHUNK]
        calls.append((scripts.CHECK_AND_COMMIT, [where[1][0][chunk[0]]], [
            str(store.max_distance), str(store.T), b"".join(where[2][i] for i in chunk),
            " ".join(where[1][t][i] for i in chunk for t in range(store.T)),
            " ".join(map(str, seen[:, chunk].T.ravel().tolist())),
            b"".join(where[3][i].to_bytes(8, "big") for i in chunk), *(keys[i].encode("utf-8") for i in chunk)]))
        order.append(chunk)
    for chunk, raw in zip(order, store.connection.run(calls) if calls else []):
        pos = 0
        for i in chunk:  # "1": committed by another process since the read
            _, pos = verdict(raw, pos, fps[i], found, i)
    return found
