"""The Redis store's self-check, for tests: the buckets agree with the records.

Scans the whole store (SCAN, then GET or HGETALL of every key): O(records * T)
round-trip-bound work, not for a live crawl.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from .records import all_records

if TYPE_CHECKING:
    from .parts import StoreParts


def check_invariants(store: StoreParts) -> None:
    """Raise unless every record's fingerprint is in its bucket of every
    table exactly as often as it has records, nothing else is in a bucket,
    and the counts add up."""
    records = all_records(store)
    want: defaultdict[int, int] = defaultdict(int)
    for _, fp, _ in records:
        want[fp] += 1
    if len(store) != len(records):
        raise AssertionError(f"counts say {len(store)} records, {len(records)} found")
    fps = np.array(sorted(want), dtype=np.uint64)
    prefixes = store.layout.prefixes(fps)
    for t in range(store.T):
        names = [n for n in store.connection.scan(store.keyspace.table_pattern(t)) if not n.endswith((b":p", b":r"))]
        seen: defaultdict[int, int] = defaultdict(int)
        for name, raw in zip(names, store.connection.each("GET", names)):
            for v in np.frombuffer(raw or b"", dtype=">u8").tolist():
                seen[v] += 1
                i = int(np.searchsorted(fps, np.uint64(v)))
                if i >= len(fps) or int(fps[i]) != v:
                    raise AssertionError(f"table {t}: {v:016x} in {name!r} has no record")
                if name.decode() != store.keyspace.bucket(t, int(prefixes[t, i])):
                    raise AssertionError(f"table {t}: {v:016x} in the wrong bucket {name!r}")
        if dict(seen) != dict(want):
            raise AssertionError(f"table {t} holds other fingerprints than the records")
