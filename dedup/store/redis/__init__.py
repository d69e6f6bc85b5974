"""The permuted tables on Redis (or Redis Cluster), shared by many processes.

``SimhashStore.open("redis://[:password@]host:port/db?prefix=NAME")`` gives
this store: the same answers as the embedded one (the same contract tests run
over both), for crawler processes on many machines at once.

Layout (``k = 3`` at 1M: 4 tables of 16-bit prefixes): a fingerprint lives
in one *bucket* per table, the bucket named by its prefix in that table
(``Layout.prefixes``). Two fingerprints within k bits share the prefix of
some table (pigeonhole), so probing the T buckets of a fingerprint finds
every stored neighbour. A table is split in shards, each a hash tag, so
one Redis Cluster slot (the keys: ``keys``).

Every ``check_and_add`` first reads the fingerprint's T buckets (one MGET
per slot chunk) and scans them here with numpy (``buckets``): a committed
neighbour makes it a duplicate with no write at all. Otherwise it must be
admitted atomically across processes: on one Redis by one Lua step per
chunk (``single``); on a Redis Cluster, where a step may touch one slot
only, by reserving its T buckets, then committing (``cluster``).

Costs: a probe reads T buckets of about ``n / 2**prefix`` fingerprints (15 at
1M). Round trips per ``check_and_add``: a duplicate 2 (read, records: one
HGET of its field); a new fingerprint 2 on one Redis (read,
check-and-commit), 3-4 on a cluster (read, reserve, commit table 0, commit
the rest), more when it waits. Batches pipeline all of it, grouped by slot;
on one Redis a big batch goes in two halves from two threads, so that one
half's Python work overlaps the other's wait on Redis (``BENCHMARKS.md``).

The modules, one role each: ``url`` (the store URL, without its password
for messages), ``connection`` (connecting, redis-py's errors as the
store's, commands and scripts pipelined), ``keys`` (every key's name, and
which go together in a step), ``scripts`` (the Lua steps), ``buckets``
(reading and committing buckets), ``single`` and ``cluster`` (the two
admission paths), ``records`` (a fingerprint's keys, matches),
``invariants`` (the self-check for tests), ``store`` (``RedisSimhashStore``).
"""

from .connection import StoreUnavailable, connect, redis_errors
from .store import RedisSimhashStore
from .url import is_redis_url, redact, split_url

__all__ = ["RedisSimhashStore", "StoreUnavailable", "connect", "is_redis_url", "redact", "redis_errors", "split_url"]
