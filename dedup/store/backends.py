"""Where a store's records live: the backend interface and its implementations.

A backend keeps the durable truth: the records ``(row, fingerprint, key)``
in row order, the store's metadata, and optionally a snapshot of the sorted
tables so that reopening does not re-sort. The tables themselves are
rebuilt from the records whenever a snapshot is missing or stale, so a
snapshot is only ever a cache.

* ``MemoryBackend``: nothing durable (``SimhashStore.open(None)``).
* ``SQLiteBackend``: a directory with ``store.sqlite3`` (WAL mode) and
  ``tables-<N>.npy`` / ``rows-<N>.npy`` snapshots, loaded memory-mapped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np


def private_file(path: str | os.PathLike[str]) -> None:
    """Create ``path`` readable and writable by its owner only, unless it exists:
    a store holds the URLs of a crawl, which are nobody else's business."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def to_sqlite_int(fp: int) -> int:
    """A 64-bit fingerprint as SQLite stores integers (signed 64-bit: the same bits)."""
    return fp - (1 << 64) if fp >= 1 << 63 else fp


def from_sqlite_int(value: int) -> int:
    """``to_sqlite_int`` undone."""
    return value & ((1 << 64) - 1)


class StoreError(RuntimeError):
    """A store cannot be opened or used as asked."""


class Backend(ABC):
    durable = False

    @abstractmethod
    def read_meta(self) -> dict[str, str]: ...

    @abstractmethod
    def write_meta(self, meta: dict[str, str]) -> None: ...

    @abstractmethod
    def count(self) -> int:
        """Committed and pending records."""

    @abstractmethod
    def append(self, first_row: int, fps: np.ndarray, keys: Sequence[str]) -> None:
        """Queue records ``first_row, first_row + 1, ...``; durable after ``commit``."""

    def append_one(self, row: int, fp: int, key: str) -> None:
        """``append`` of one record (backends may make this cheaper)."""
        self.append(row, np.array([fp], dtype=np.uint64), [key])

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def keys(self, rows: Sequence[int]) -> list[str]: ...

    @abstractmethod
    def fingerprints_from(self, row: int) -> np.ndarray:
        """uint64 fingerprints of rows >= ``row``, in row order (committed ones)."""

    def load_snapshot(self, n_tables: int) -> tuple[np.ndarray, np.ndarray] | None:
        return None

    def save_snapshot(self, main: np.ndarray, ids: np.ndarray) -> None:
        return None

    def close(self) -> None:
        return None


class MemoryBackend(Backend):
    def __init__(self) -> None:
        self._meta: dict[str, str] = {}
        self._keys: list[str] = []
        self._fps: list[np.ndarray] = []

    def read_meta(self) -> dict[str, str]:
        return dict(self._meta)

    def write_meta(self, meta: dict[str, str]) -> None:
        self._meta.update(meta)

    def count(self) -> int:
        return len(self._keys)

    def append(self, first_row: int, fps: np.ndarray, keys: Sequence[str]) -> None:
        if first_row != len(self._keys):
            raise StoreError(f"row {first_row} appended after {len(self._keys)} records")
        self._keys.extend(keys)
        self._fps.append(np.asarray(fps, dtype=np.uint64).copy())

    def commit(self) -> None:
        return None

    def keys(self, rows: Sequence[int]) -> list[str]:
        return [self._keys[r] for r in rows]

    def fingerprints_from(self, row: int) -> np.ndarray:
        allfps = np.concatenate(self._fps) if self._fps else np.empty(0, dtype=np.uint64)
        return allfps[row:]




def check_keys(keys: Iterable[object]) -> None:
    """Raise ``ValueError`` unless each key is a ``str`` that UTF-8 can hold (no lone surrogate, as an
    ``os.fsdecode`` of a non-UTF-8 file name has): said as the record is added, rather than at the commit,
    which a file store's whole group of pending records would then fail with (and every later one)."""
    for key in keys:
        if not isinstance(key, str):
            raise ValueError(f"a store key is a str (a URL, a record id), got {type(key).__name__} {key!r}")
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"a store key must be text UTF-8 can hold, got {key!r} (a lone surrogate)") from None


#: The file in a store's directory whose exclusive lock its one writer holds
WRITER_LOCK = "writer.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (row INTEGER PRIMARY KEY, fp INTEGER NOT NULL, key TEXT NOT NULL);
"""


class SQLiteBackend(Backend):
    """Records in SQLite (WAL, synchronous=NORMAL: a committed transaction
    survives a crash of the process; ``synchronous=FULL`` via ``fsync=True``
    also survives power loss). One writer per directory, enforced by an
    exclusive lock on ``WRITER_LOCK``; any number of readers."""

    durable = True
    DB = "store.sqlite3"

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, fsync: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._lock_fd: int | None = None
        if readonly:
            if not (self.path / self.DB).exists():
                raise StoreError(f"no store at {self.path} to open read-only")
            uri = f"file:{(self.path / self.DB).as_posix()}?mode=ro"
            self.db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        else:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._lock_fd = os.open(self.path / WRITER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(self._lock_fd)
                self._lock_fd = None
                raise StoreError(
                    f"the store at {self.path} is open for writing by another process (a crawl, or a neardup "
                    "dedup run); wait for it to end, or share one store between processes with a redis:// URL "
                    "(from Python, SimhashStore.open(..., readonly=True) reads it meanwhile)"
                ) from None
            private_file(self.path / self.DB)  # (SQLite gives its -wal and -shm files the same mode)
            self.db = sqlite3.connect(self.path / self.DB, check_same_thread=False, isolation_level=None)
        self._pending: list[tuple[int, int, str]] = []
        try:
            if not readonly:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
                self.db.executescript(_SCHEMA)
            self._count = self.db.execute("SELECT COALESCE(MAX(row) + 1, 0) FROM records").fetchone()[0]
        except BaseException:  # (a damaged file): let go of the lock and the connection
            self.close()
            raise

    @property
    def lock_fd(self) -> int | None:
        """The descriptor holding the writer's lock (None: read-only, or closed). A process forked
        from the writer must close it, or the lock outlives the writer while the child runs."""
        return self._lock_fd

    def read_meta(self) -> dict[str, str]:
        try:
            return dict(self.db.execute("SELECT name, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            return {}

    def write_meta(self, meta: dict[str, str]) -> None:
        with self._transaction():
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta.items())

    @contextlib.contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def count(self) -> int:
        return self._count + len(self._pending)

    def append(self, first_row: int, fps: np.ndarray, keys: Sequence[str]) -> None:
        if self.readonly:
            raise StoreError("store opened read-only")
        if first_row != self.count():
            raise StoreError(f"row {first_row} appended after {self.count()} records")
        signed = np.asarray(fps, dtype=np.uint64).view(np.int64).tolist()
        self._pending.extend(zip(range(first_row, first_row + len(signed)), signed, keys))

    def append_one(self, row: int, fp: int, key: str) -> None:
        if self.readonly:
            raise StoreError("store opened read-only")
        if row != self._count + len(self._pending):
            raise StoreError(f"row {row} appended after {self.count()} records")
        self._pending.append((row, to_sqlite_int(fp), key))

    def commit(self) -> None:
        if not self._pending:
            return
        with self._transaction():
            self.db.executemany("INSERT INTO records (row, fp, key) VALUES (?, ?, ?)", self._pending)
        self._count += len(self._pending)
        self._pending = []

    def refresh_count(self) -> int:
        self._count = self.db.execute("SELECT COALESCE(MAX(row) + 1, 0) FROM records").fetchone()[0]
        return self._count

    def keys(self, rows: Sequence[int]) -> list[str]:
        found: dict[int, str] = {}
        pending_base = self._count
        todo = []
        for r in rows:
            if r >= pending_base and r - pending_base < len(self._pending):
                found[r] = self._pending[r - pending_base][2]
            else:
                todo.append(r)
        uniq = sorted(set(todo))
        for i in range(0, len(uniq), 900):  # SQLite's bound-parameter limit
            chunk = uniq[i : i + 900]
            q = f"SELECT row, key FROM records WHERE row IN ({','.join('?' * len(chunk))})"
            found.update(self.db.execute(q, chunk).fetchall())
        return [found[r] for r in rows]

    def all_keys(self) -> list[str]:
        self.commit()
        return [k for (k,) in self.db.execute("SELECT key FROM records ORDER BY row")]

    def fingerprints_from(self, row: int) -> np.ndarray:
        cur = self.db.execute("SELECT fp FROM records WHERE row >= ? ORDER BY row", (row,))
        arr = np.fromiter((r[0] for r in cur), dtype=np.int64)
        return arr.view(np.uint64)

    # -- snapshots ------------------------------------------------------------

    def load_snapshot(self, n_tables: int) -> tuple[np.ndarray, np.ndarray] | None:
        meta = self.read_meta()
        n = int(meta.get("snapshot_rows", 0))
        if n <= 0 or n > self._count:
            return None
        tables_p, rows_p = self.path / f"tables-{n}.npy", self.path / f"rows-{n}.npy"
        try:
            # copy-on-write maps: the pages load lazily from the file, and the
            # arrays have the same (writable) type as in-memory ones for numba
            main = np.asarray(np.load(tables_p, mmap_mode="c"))
            ids = np.asarray(np.load(rows_p, mmap_mode="c"))
        except (OSError, ValueError):
            return None
        if main.shape != (n_tables, n) or ids.shape != (n,) or main.dtype != np.uint64:
            return None
        return main, ids

    def save_snapshot(self, main: np.ndarray, ids: np.ndarray) -> None:
        """Atomically: write files under temp names, fsync, rename, then record in meta."""
        if self.readonly:
            return
        self.commit()  # the snapshot must not cover uncommitted rows
        n = main.shape[1]
        old = int(self.read_meta().get("snapshot_rows", 0))
        if n == old:
            return
        for name, arr in ((f"tables-{n}.npy", main), (f"rows-{n}.npy", ids)):
            tmp = self.path / (name + ".tmp")
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path / name)
        self.write_meta({"snapshot_rows": str(n)})
        for f in self.path.glob("tables-*.npy"):
            if f.name != f"tables-{n}.npy":
                f.unlink(missing_ok=True)
        for f in self.path.glob("rows-*.npy"):
            if f.name != f"rows-{n}.npy":
                f.unlink(missing_ok=True)

    def close(self) -> None:
        try:
            if not self.readonly:
                self.commit()
            self.db.close()
        finally:
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None
