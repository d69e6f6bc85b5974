"""A stored fingerprint's records (its keys, oldest first), and matches from them.

A records hash ``{NAME:0.s}:b:<prefix hex>:r`` (``keys``) has a field per
fingerprint (its 8 bytes), the value that fingerprint's records, each an
8-byte sequence number, a 4-byte key length and the key. One HGET (in
``scripts.RECORDS``, one call per slot chunk) reads a fingerprint's records.
The sequence numbers order records by age: the nearest match wins, the
oldest of equally near ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backends import StoreError
from ..match import Match
from . import scripts

if TYPE_CHECKING:
    from .parts import StoreParts


def entries(raw: bytes) -> list[tuple[int, str]]:
    """A fingerprint's records as a records hash holds them (an 8-byte sequence
    number, a 4-byte key length and the key, each), as (seq, key) oldest first."""
    out, pos = [], 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos + 8 : pos + 12], "big")
        out.append((int.from_bytes(raw[pos : pos + 8], "big"), raw[pos + 12 : pos + 12 + size].decode("utf-8")))
        pos += 12 + size
    out.sort()
    return out


def _hash_items(reply: Any) -> Iterable[tuple[bytes, bytes]]:
    """HGETALL's reply as (field, value) pairs (redis-py gives a dict, or a flat list when raw)."""
    return reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])


def records_of(store: StoreParts, values: Iterable[int]) -> dict[int, list[tuple[int, str]]]:
    """{fingerprint: [(seq, key), ...] oldest first} for stored fingerprints:
    each fingerprint's field in its table-0 records hash (one Lua call per
    slot chunk: ``scripts.RECORDS``)."""
    values = sorted(set(values))
    if not values:
        return {}
    arr = np.array(values, dtype=np.uint64)
    tags, names, fp8s = store.keyspace.names(store.layout.prefixes(arr)[:1], arr)
    calls, order = [], []
    for chunk in store.keyspace.group(tags[0], range(len(values))):
        recs = [names[0][i] + ":r" for i in chunk]
        calls.append((scripts.RECORDS, [recs[0]], [b"".join(fp8s[i] for i in chunk), " ".join(recs)]))
        order.append(chunk)
    out: dict[int, list[tuple[int, str]]] = {}
    for chunk, raw in zip(order, store.connection.run(calls)):
        pos = 0
        for i in chunk:
            size = int.from_bytes(raw[pos : pos + 4], "big")
            if size:
                out[values[i]] = entries(raw[pos + 4 : pos + 4 + size])
            pos += 4 + size
    return out


def all_records(store: StoreParts) -> list[tuple[int, int, str]]:
    """(seq, fingerprint, key) of every record, oldest first. Scans the store."""
    out = []
    for rec in store.connection.each("HGETALL", store.connection.scan(store.keyspace.records_pattern())):
        for field, raw in _hash_items(rec):
            fp = int.from_bytes(field, "big")
            out += [(seq, fp, key) for seq, key in entries(raw)]
    out.sort()
    return out


def ranked(store: StoreParts, found: list[dict[int, int]]) -> list[list[Match]]:
    """The records of each {fingerprint: distance} as matches, nearest first (ties: the oldest)."""
    records = records_of(store, (v for f in found for v in f))
    out = []
    for f in found:
        ms = sorted((d, seq, v, key) for v, d in f.items() for seq, key in records.get(v, ()))
        out.append([Match(key, v, d) for d, _, v, key in ms])
    return out


def nearest(store: StoreParts, found: list[dict[int, int]]) -> list[Match]:
    """The nearest record (ties: the oldest) of each {fingerprint: distance}."""
    out = []
    for ms in ranked(store, found):
        if not ms:  # (only if its neighbour was deleted behind the store's back)
            raise StoreError(f"the Redis store at {store.location} lost a record")
        out.append(ms[0])
    return out
