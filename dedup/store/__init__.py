"""The persistent permuted-table store (Manku, Jain, Das Sarma, WWW 2007)."""

from .backends import Backend, MemoryBackend, SQLiteBackend, StoreError
from .layout import Layout, choose_layout, make_layout
from .redis_store import RedisSimhashStore, StoreUnavailable
from .store import Match, SimhashStore, StoreMismatchError

__all__ = ["Backend", "Layout", "Match", "MemoryBackend", "RedisSimhashStore", "SQLiteBackend", "SimhashStore", "StoreError",
           "StoreMismatchError", "StoreUnavailable", "choose_layout", "make_layout"]
