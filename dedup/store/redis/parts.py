"""What the store's role modules (``buckets``, ``single``, ``cluster``,
``records``, ``invariants``) use of a ``RedisSimhashStore``: they take this
protocol, not the class, so that they do not depend on the module that
assembles them (``store``)."""

from __future__ import annotations

from typing import Protocol

from ..layout import Layout
from .connection import Connection
from .keys import KeySpace


class StoreParts(Protocol):
    location: str  # the store's URL, password redacted (for messages)
    cluster: bool  # a Redis Cluster (admission by reservations) or one Redis
    connection: Connection
    keyspace: KeySpace
    layout: Layout
    max_distance: int
    T: int  # tables (layout.n_tables)
    lease: float  # seconds a cluster reservation holds
    token: str  # this store's reservations

    def __len__(self) -> int: ...  # fingerprints stored
