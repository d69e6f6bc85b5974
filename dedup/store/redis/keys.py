"""Every key of a Redis store, and which keys go together in one server-side step.

A fingerprint lives in one *bucket* per table, the bucket named by its
prefix in that table (``Layout.prefixes``). Keys, with ``S`` shards per
table (``?shards=``, default 64) and shard ``s = prefix mod S``::

    {NAME:t.s}:b:<prefix hex>   the bucket: stored fingerprints, 8 bytes each, appended
    {NAME:t.s}:b:<prefix hex>:p a cluster's reservations in flight in this bucket (a hash; usually absent)
    {NAME:0.s}:b:<prefix hex>:r table 0 only: records, field fingerprint -> its (seq, key) records
    {NAME:0.s}:n                table 0 only: records in this shard
    NAME:meta                   settings and layout

The ``{...}`` hash tag puts one table shard in one Redis Cluster slot, so the
``T * S`` shards spread over the cluster's nodes and the store grows with it,
while every server-side step touches one slot only: a script call takes the
fingerprints of one slot *chunk* (``KeySpace.group``), at most ``CHUNK``.

>>> keys = KeySpace("crawl", shards=64, cluster=False)
>>> keys.bucket(2, 0xBEEF), keys.count_key(5), keys.meta_key
('{crawl:2.47}:b:beef', '{crawl:0.5}:n', 'crawl:meta')
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

REDIS_FORMAT = "2"  # the keys' layout (2: records hashes keyed by fingerprint)
CHUNK = 1000  # fingerprints per script call (at most: a call blocks Redis for its duration)

#: a script call: (the script's source, its keys, its arguments)
ScriptCall = tuple[str, list, list]


def meta_key(name: str) -> str:
    """The store's metadata hash (settings and layout)."""
    return f"{name}:meta"


def fp8(fp: int) -> bytes:
    """A fingerprint as the store keeps it: 8 bytes, big-endian."""
    return int(fp).to_bytes(8, "big")


class KeySpace:
    """The keys of the store named ``name`` with ``shards`` shards per table."""

    def __init__(self, name: str, shards: int, cluster: bool) -> None:
        self.name = name
        self.shards = shards
        self.cluster = cluster  # (on one Redis any keys go together in a step: no need to group them)
        self.meta_key = meta_key(name)

    def tag(self, t: int, prefix: int) -> str:
        """The hash tag (one table shard, one cluster slot) of ``prefix``'s bucket in table ``t``."""
        return f"{self.name}:{t}.{prefix % self.shards}"

    def bucket(self, t: int, prefix: int) -> str:
        return f"{{{self.tag(t, prefix)}}}:b:{prefix:x}"

    def count_key(self, shard: int) -> str:
        return f"{{{self.name}:0.{shard}}}:n"

    def records_pattern(self) -> str:
        """SCAN pattern of every records hash."""
        return f"{{{self.name}:0.*}}:b:*:r"

    def table_pattern(self, t: int) -> str:
        """SCAN pattern of table ``t``'s keys (its buckets, and their ``:p`` and ``:r`` hashes)."""
        return f"{{{self.name}:{t}.*}}:b:*"

    def every_pattern(self) -> str:
        """SCAN pattern of every key of the store but its metadata."""
        return f"{{{self.name}:*"

    def names(self, prefixes: np.ndarray, fps: np.ndarray) -> tuple[list[list[str]], list[list[str]], list[bytes]]:
        """Per table, each fingerprint's hash tag (on a cluster only: ``group``
        needs them there) and bucket name (as ``tag`` and ``bucket`` make them,
        here in one pass); and each fingerprint's 8 bytes."""
        tags, names, S = [], [], self.shards
        for t in range(len(prefixes)):
            row = prefixes[t].tolist()
            if self.cluster:
                tag = [f"{self.name}:{t}.{p % S}" for p in row]
                tags.append(tag)
                names.append([f"{{{g}}}:b:{p:x}" for g, p in zip(tag, row)])
            else:
                tags.append([])
                names.append([f"{{{self.name}:{t}.{p % S}}}:b:{p:x}" for p in row])
        return tags, names, [fp8(v) for v in fps.tolist()]

    def group(self, tags: Sequence[str], idx: Iterable[int]) -> list[list[int]]:
        """Indices ``idx`` in chunks that each stay within one slot (grouped by
        their hash tag ``tags[i]``; on a single Redis, any keys go together)."""
        if not self.cluster:
            idx = list(idx)
            return [idx[i : i + CHUNK] for i in range(0, len(idx), CHUNK)]
        groups: dict[str, list[int]] = defaultdict(list)
        for i in idx:
            groups[tags[i]].append(i)
        return [g[i : i + CHUNK] for g in groups.values() for i in range(0, len(g), CHUNK)]

    def calls(self, script: str, t: int, idx: list[int], where: tuple, head: list[Any],
              tail: Callable[[list[int]], list[Any]] | None = None) -> tuple[list[ScriptCall], list[list[int]]]:
        """Script calls over fingerprints ``idx`` in table ``t``, one per slot
        chunk (``where``: ``names``): ARGV = head + [fingerprints blob, bucket
        names] (+ ``tail(chunk)``). Returns the calls and each one's chunk."""
        tags, names = where[0][t], where[1][t]
        calls, order = [], []
        for chunk in self.group(tags, idx):
            args = [*head, b"".join(where[2][i] for i in chunk), " ".join(names[i] for i in chunk)]
            calls.append((script, [names[chunk[0]]], args + (tail(chunk) if tail else [])))
            order.append(chunk)
        return calls, order
