"""The persistent permuted-table store (Manku, Jain, Das Sarma, WWW 2007).

``store`` holds ``SimhashStore`` (embedded: in memory or SQLite, over a
``backends`` backend), ``tables`` the permuted tables (compiled steps in
``kernels``), ``layout`` their shape, ``meta`` the rules a store is opened
under, ``redis`` the same store on Redis, shared by many processes.
``warmup`` compiles the kernels (``jit`` group ``store``).
"""

from .backends import Backend, MemoryBackend, SQLiteBackend, StoreError
from .layout import Layout, choose_layout, make_layout
from .match import Match
from .meta import StoreMismatchError
from .redis import RedisSimhashStore, StoreUnavailable
from .store import SimhashStore

__all__ = ["Backend", "Layout", "Match", "MemoryBackend", "RedisSimhashStore", "SQLiteBackend", "SimhashStore", "StoreError",
           "StoreMismatchError", "StoreUnavailable", "choose_layout", "make_layout"]
