"""The crawl's SQLite files, opened read-only for the commands that only read
them (``neardup search``, ``neardup rules``), with a one-line answer when a
path is not the kind of file asked for.

A crawl writes four kinds of SQLite file; each is known by its tables
(``KINDS``). ``open_readonly(path, kind)`` opens ``path`` with SQLite's
``mode=ro`` URI, so nothing it does can create a table, write a row or switch
the journal mode, and checks that the file holds the tables of ``kind``. (A
file in WAL mode gets SQLite's ``-wal``/``-shm`` companions beside it while it
is read, as any reader gives it; the file itself is not written. In a
directory where they cannot be made, the file is read as immutable: nothing
can be writing it there.)

>>> describe({"pages", "pages_fts", "pages_fts_data"})
'an index of kept pages'
>>> describe({"meta", "records"})
'a fingerprint store'
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

INDEX, RULE_BOOK, STORE, FRONTIER = "index", "rule book", "store", "frontier"

#: kind -> (the tables that make a file of that kind, what a person calls it)
KINDS: dict[str, tuple[frozenset[str], str]] = {
    INDEX: (frozenset({"pages", "pages_fts"}), "an index of kept pages"),
    RULE_BOOK: (frozenset({"rules", "forms", "avoided"}), "a URL rule book"),
    STORE: (frozenset({"meta", "records"}), "a fingerprint store"),
    FRONTIER: (frozenset({"meta", "requests", "seen"}), "a crawl frontier"),
}


class WrongFileError(ValueError):
    """The path is missing, a directory, not SQLite, or SQLite of another kind;
    the message says which, in one line, naming the path."""


def describe(tables: set[str]) -> str:
    """What a person calls an SQLite file with these tables."""
    for needed, name in KINDS.values():
        if needed <= tables:
            return name
    return "an empty SQLite file" if not tables else f"an SQLite file of other tables ({', '.join(sorted(tables))})"


def _connect(path: Path, immutable: bool) -> sqlite3.Connection:
    uri = path.resolve().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    db = sqlite3.connect(uri, uri=True)
    try:
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # (reads the header: not SQLite fails here)
    except BaseException:
        db.close()
        raise
    return db


#: below this much free space, a failure to open a file for writing is put down to a full disk
FULL_DISK_BYTES = 1 << 20


def cannot_open(path: str | Path, kind: str, exc: sqlite3.Error) -> sqlite3.OperationalError:
    """The error for a file of ``kind`` that could not be opened or made for writing: SQLite's
    own, naming the file and, when its file system has less than ``FULL_DISK_BYTES`` free,
    saying the disk is full (SQLite says "disk I/O error" or "unable to open database file").
    Still an ``OperationalError``, so whoever handles SQLite's errors handles it."""
    message = f"cannot open {KINDS[kind][1]} {path}: {exc}"
    try:
        free = shutil.disk_usage(Path(path).parent).free
        if free < FULL_DISK_BYTES:
            message += f" (the disk is full: {free:,} bytes free)"
    except OSError:  # (no such directory: SQLite's message says enough)
        pass
    return sqlite3.OperationalError(message)


def tables_of(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns_of(db: sqlite3.Connection, table: str) -> set[str]:
    """The names of ``table``'s columns (for a file made by an older version: migrated, or read as it is)."""
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def open_readonly(path: str | Path, kind: str, *, allow_empty: bool = False) -> sqlite3.Connection:
    """``path`` opened read-only, once it is known to be a file of ``kind``
    (a key of ``KINDS``); else ``WrongFileError``. O(1): reads the schema only.
    ``allow_empty``: an SQLite file of no tables yet (made by a crawl killed as
    it started) is taken too."""
    p = Path(path)
    wanted = KINDS[kind][1]
    if not p.exists():
        raise WrongFileError(f"{p}: no such file (it should be {wanted})")
    if p.is_dir():
        raise WrongFileError(f"{p} is a directory, not {wanted}")
    if not os.access(p, os.R_OK):
        raise WrongFileError(f"{p} cannot be read: permission denied")
    try:
        try:
            db = _connect(p, immutable=False)
        except sqlite3.OperationalError as exc:
            if "unable to open" not in str(exc):
                raise
            db = _connect(p, immutable=True)  # (WAL mode in a read-only directory: no -shm can be made)
    except sqlite3.OperationalError as exc:  # (locked, or unreadable even as immutable)
        raise WrongFileError(f"{p} cannot be read: {exc}") from None
    except sqlite3.DatabaseError as exc:  # ("file is not a database")
        raise WrongFileError(f"{p} is not an SQLite file, so not {wanted} ({exc})") from None
    except OSError as exc:
        raise WrongFileError(f"{p} cannot be read: {exc.strerror or exc}") from None
    try:
        tables = tables_of(db)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise WrongFileError(f"{p} cannot be read as SQLite, so not as {wanted} ({exc})") from None
    if not KINDS[kind][0] <= tables and not (allow_empty and not tables):
        db.close()
        raise WrongFileError(f"{p} is {describe(tables)}, not {wanted}")
    return db
