"""The durable frontier's file: the request queue and the seen set in one SQLite database.

``JOBDIR/frontier.sqlite3`` (WAL), written only by the crawl's thread. Rows of
``requests`` are queued (state 0) or in flight (state 1: handed to the
engine, not yet acknowledged; state 2: and its server has answered, its headers came;
state 3: and its page is being stored as new, so its outputs are going out);
``seen`` holds the request fingerprints of every URL ever queued. One
transaction is always open; ``commit()`` makes everything so far durable at
once, so the queue, the seen set and the acknowledgements never disagree
after a crash. On open, requests that were in flight go back to the queue with
their ``redelivered`` count raised; those that had stored their page are marked
``emit`` (their outputs may be half committed: the filter emits them again
rather than take the page for unchanged, until the request is done), and those whose
server had answered have their ``kills`` raised too (kills in a row that a
page may have caused: past a limit it is given up). A request that had not
stored its page produced nothing: fetched again, it is judged as any request
(a page an earlier, finished request stored is unchanged). A request still waiting
for its turn in the downloader (``DOWNLOAD_DELAY``, AutoThrottle) or for its
answer when the crawl was killed is not counted a kill: counting it gave such
requests up after a few kills, never fetched.

Costs: ``push`` and ``seen_add`` one B-tree insert each, ``pop`` one indexed
lookup and update, ``commit`` one WAL append (no fsync unless asked).
Memory: SQLite's page cache (a few MB) and a count of queued requests per
download slot; nothing per request.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import NamedTuple, cast

from scrapy_neardup.dedup.store.backends import private_file

from ..in_use import FRONTIER_LOCK, jobdir_in_use
from ..sqlite_files import FRONTIER, WrongFileError, open_readonly

# (2: state 2, a response arrived; 3: state 3, its page stored, and the emit column. A version that reads only
# an earlier format would leave such rows stuck)
FORMAT = "3"
READS = ("1", "2", "3")  # an earlier file is read as it is (it has no state 2, or 3) and marked 3 when opened

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY, slot TEXT NOT NULL, priority INTEGER NOT NULL, ord INTEGER NOT NULL,
    state INTEGER NOT NULL DEFAULT 0, redelivered INTEGER NOT NULL DEFAULT 0, data TEXT NOT NULL,
    kills INTEGER NOT NULL DEFAULT 0, emit INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS requests_next ON requests (slot, state, priority DESC, ord);
CREATE TABLE IF NOT EXISTS seen (fp BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS marks (name TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS feeds (
    path TEXT PRIMARY KEY, kind TEXT NOT NULL, doc_start INTEGER NOT NULL, committed INTEGER NOT NULL,
    inode INTEGER NOT NULL, header BLOB NOT NULL, closer BLOB NOT NULL, csv_header BLOB,
    open INTEGER NOT NULL DEFAULT 1);
"""
# (``feeds``: added after format 1 was released; CREATE IF NOT EXISTS adds it to an older file in place)


class FrontierError(RuntimeError):
    """The frontier file cannot be opened or written; the message names it and why."""


class Row(NamedTuple):
    id: int
    redelivered: int  # times it was in flight at a stop
    kills: int  # of those, the stops after its server had answered (past a limit it is given up)
    data: str
    emit: int = 0  # it had stored its page at a stop: its outputs may be half committed (emitted again)


class FeedRow(NamedTuple):
    """A local feed file as the frontier records it (see ``frontier.feeds``)."""

    path: str  # absolute
    kind: str  # json, jsonlines, csv or xml
    doc_start: int  # where the document this crawl writes begins in the file
    committed: int  # the end of the last item whose request is acknowledged
    inode: int  # the file's inode when it was opened (another file at the path is left alone)
    header: bytes  # what the exporter writes before the first item
    closer: bytes  # and after the last
    csv_header: bytes | None = None  # the header row of a CSV document, once written
    open: int = 1  # written to since the frontier last opened (to be cut and closed on the next open)


def _explain(path: Path, exc: BaseException) -> FrontierError:
    text = str(exc)
    low = text.lower()
    if "readonly" in low or "read-only" in low or isinstance(exc, PermissionError):
        why = "the file or its directory is read-only"
    elif "disk is full" in low or "no space" in low:
        why = "the disk is full"
    elif "not a database" in low or "malformed" in low or "corrupt" in low:
        why = "the file is damaged (restore JOBDIR from a copy, or start a new JOBDIR)"
    else:
        why = text
    return FrontierError(f"frontier {path}: {why} ({type(exc).__name__}: {text})")


def _check_format(path: Path, found: str | None) -> None:
    """``FrontierError`` unless ``found`` (the file's recorded format; None: none yet) is one of ``READS``."""
    if found is not None and found not in READS:
        raise FrontierError(f"frontier {path} has format {found}, this version reads {', '.join(READS)}")


def _check_spider(path: Path, found: str | None, spider: str | None) -> None:
    """``FrontierError`` when the file is the queue of another spider than ``spider`` (``found``: the one it
    records; None: none yet). Its requests name that spider's callbacks: this one could read none of them,
    and they would be dropped while their URLs stay seen."""
    if spider is not None and found is not None and found != spider:
        raise FrontierError(f"frontier {path} is the queue of spider {found!r}, not {spider!r}: resume it with the "
                            f"spider named {found!r}, or give spider {spider!r} a JOBDIR of its own")


def recorded_store_size(jobdir: str | os.PathLike[str]) -> int | None:
    """How many fingerprints the crawl's store held at the frontier's last commit (``FrontierDB.commit``
    records it, ``store_size``), or None: no frontier, or none recorded. O(1); reads the file read-only."""
    path = Path(jobdir) / FrontierDB.FILE
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        db = open_readonly(path, FRONTIER, allow_empty=True)
    except WrongFileError:
        return None  # (refuse_a_damaged_frontier says what it is)
    try:
        row = db.execute("SELECT value FROM meta WHERE name = 'store_size'").fetchone()
    except sqlite3.Error:
        row = None
    finally:
        db.close()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else None


def refuse_a_damaged_frontier(jobdir: str | os.PathLike[str], spider: str | None = None) -> None:
    """Raise ``FrontierError`` when ``jobdir`` holds a frontier file this crawl
    cannot resume from: not SQLite, another kind of SQLite file, or another
    format (or, given ``spider``, the queue of another spider). Called as Scrapy builds the crawl's components, before the engine
    exists (``frontier.ack_middlewares``), so such a crawl stops with one error
    rather than inside the engine's failing start, where Scrapy's scraper,
    stats and signal errors follow it. O(1): reads the schema and one row.
    (What only shows when the file is written, a full disk, still comes as the
    engine opens the frontier.)"""
    path = Path(jobdir) / FrontierDB.FILE
    if not path.is_file() or path.stat().st_size == 0:
        return  # (a new JOBDIR, or a file made by a crawl killed at once: FrontierDB makes its tables)
    try:
        db = open_readonly(path, FRONTIER, allow_empty=True)
    except WrongFileError as exc:
        raise FrontierError(f"frontier {path}: cannot resume from it: {exc} (restore JOBDIR from a copy, "
                            f"or start a new JOBDIR)") from None
    try:
        meta = dict(db.execute("SELECT name, value FROM meta WHERE name IN ('format', 'spider')").fetchall())
    except sqlite3.Error:
        meta = {}  # (no meta table yet: an empty file)
    finally:
        db.close()
    _check_format(path, meta.get("format"))
    _check_spider(path, meta.get("spider"), spider)


class FrontierDB:
    """See the module docstring. ``lifo``: newest first within a priority (Scrapy's
    default depth-first order); else oldest first (breadth-first with ``DEPTH_PRIORITY``)."""

    FILE = "frontier.sqlite3"

    def __init__(self, jobdir: str | os.PathLike[str], *, lifo: bool = True, fsync: bool = False,
                 spider: str | None = None) -> None:
        self.dir = Path(jobdir)
        self.path = self.dir / self.FILE
        self.lifo = lifo
        self._lock_fd: int | None = None
        self._db: sqlite3.Connection | None = None
        self._broken: str | None = None  # why a write failed: nothing is committed from then on (_fault)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.dir / FRONTIER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise _explain(self.path, exc) from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise FrontierError(f"frontier {self.path}: {jobdir_in_use(self.dir)}") from None
        try:
            private_file(self.path)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            self.db.executescript(_SCHEMA)
            meta = dict(self.db.execute("SELECT name, value FROM meta").fetchall())
            _check_format(self.path, meta.get("format"))
            _check_spider(self.path, meta.get("spider"), spider)
            here = str(self.dir.resolve())
            #: where the JOBDIR was when a run last opened it, if elsewhere (moved or copied since): the feed
            #: files its runs wrote at their recorded paths are not this one's to cut (``frontier.feeds``)
            self.moved_from: str | None = meta["jobdir"] if meta.get("jobdir") not in (None, here) else None
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('jobdir', ?)", (here,))
            if spider is not None:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('spider', ?)", (spider,))
            #: the requests in flight at the last stop, by their stored form (a few: at most the requests
            #: the crawl had under way), for ``taken_back``
            self.in_flight_at_stop: dict[str, list[int]] = {}
            for rid, data in self.db.execute("SELECT id, data FROM requests WHERE state != 0"):
                self.in_flight_at_stop.setdefault(data, []).append(rid)
            columns = {c[1] for c in self.db.execute("PRAGMA table_info(requests)")}
            format_1 = "kills" not in columns
            if format_1:  # (its counts were of every stop, answered or not: nothing told them apart)
                self.db.execute("ALTER TABLE requests ADD COLUMN kills INTEGER NOT NULL DEFAULT 0")
                self.db.execute("UPDATE requests SET kills = redelivered")
            before_3 = "emit" not in columns
            if before_3:  # (a request redelivered before was emitted again: it still is, until done)
                self.db.execute("ALTER TABLE requests ADD COLUMN emit INTEGER NOT NULL DEFAULT 0")
                self.db.execute("UPDATE requests SET emit = 1 WHERE redelivered > 0")
            # every request in flight is queued again; a kill counts against it only once its server had
            # answered (a format-1 file has no state 2: each counts, as format 1 counted it), and it is emitted
            # again only if it had stored its page (formats 1 and 2 have no state 3: each is, as they had it)
            answered = "1" if format_1 else "(state >= 2)"
            stored = "1" if before_3 else "(state = 3)"
            self.redelivered = self.db.execute(
                f"UPDATE requests SET redelivered = redelivered + 1, kills = kills + {answered}, "
                f"emit = MAX(emit, {stored}), state = 0 WHERE state != 0").rowcount
            self.db.execute("COMMIT")
            self._seq = self.db.execute("SELECT COALESCE(MAX(ABS(ord)), 0) FROM requests").fetchone()[0]
            self.queued: Counter[str] = Counter(dict(self.db.execute(
                "SELECT slot, COUNT(*) FROM requests GROUP BY slot").fetchall()))
            self.seen_count = self.db.execute("SELECT COUNT(*) FROM seen").fetchone()[0]
            self.db.execute("BEGIN IMMEDIATE")
        except FrontierError:
            self.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise _explain(self.path, exc) from exc

    @property
    def db(self) -> sqlite3.Connection:
        """The open connection (``FrontierError`` once closed)."""
        if self._db is None:
            raise FrontierError(f"frontier {self.path} is closed")
        return self._db

    def __len__(self) -> int:
        """Requests queued (not in flight)."""
        return self.queued.total()

    def seen_add(self, fp: bytes) -> bool:
        """Record ``fp``; True if it was new."""
        try:
            new = self.db.execute("INSERT OR IGNORE INTO seen VALUES (?)", (fp,)).rowcount == 1
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc
        self.seen_count += new
        return new

    def mark_once(self, name: str) -> bool:
        """Record ``name`` in the same transaction as the requests queued with it;
        True if it was new. For a caller that queues requests once whatever the
        kills (a retired URL rule's avoided requests: ``filter.learned_rules``)."""
        try:
            return self.db.execute("INSERT OR IGNORE INTO marks VALUES (?)", (name,)).rowcount == 1
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    def marks_under(self, prefix: str) -> list[str]:
        """The marks (``mark_once``) that start with ``prefix``, committed or in the open transaction."""
        return [name for (name,) in self._run("SELECT name FROM marks WHERE name >= ? AND name < ?",
                                               (prefix, prefix + "\U0010ffff"))]

    def push(self, slot: str, priority: int, data: str) -> int:
        self._seq += 1
        try:
            cur = self.db.execute("INSERT INTO requests (slot, priority, ord, data) VALUES (?, ?, ?, ?)",
                                  (slot, priority, -self._seq if self.lifo else self._seq, data))
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc
        self.queued[slot] += 1
        return cast(int, cur.lastrowid)  # set by every INSERT

    def pop(self, slot: str) -> Row | None:
        """The next queued request of ``slot`` (highest priority, then by ``lifo``), now in flight."""
        try:
            row = self.db.execute("SELECT id, redelivered, kills, data, emit FROM requests WHERE slot = ? AND state = 0 "
                                  "ORDER BY priority DESC, ord LIMIT 1", (slot,)).fetchone()
            if row is None:
                self.queued.pop(slot, None)
                return None
            self.db.execute("UPDATE requests SET state = 1 WHERE id = ?", (row[0],))
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc
        self.queued[slot] -= 1
        if self.queued[slot] <= 0:
            del self.queued[slot]
        return Row(*row)

    def taken_back(self, data: str) -> bool:
        """Whether ``data`` (a start request's stored form) is one of the requests in flight at the last
        stop, queued again from the file and still there: a spider's start requests are made again at
        every start, and are ``dont_filter``, so one that was in flight at a kill would be fetched twice,
        and emitted twice, once new and once as a redelivery. Each such row answers once; a row done
        since (fetched, or acknowledged in place of a copy) answers no more."""
        rows = self.in_flight_at_stop.get(data)
        while rows:
            rid = rows.pop()
            if self.data_of(rid) == data:  # (ids of acknowledged rows can be reused)
                return True
        return False

    def reached(self, rid: int) -> None:
        """Request ``rid``'s server has answered (its headers came): a kill from now on counts against
        it. Committed at once (one WAL append), before its body is read on, so a page that kills the
        crawl as its body is read, inflated or processed is counted at every kill, however soon it kills."""
        self._run("UPDATE requests SET state = 2 WHERE id = ? AND state = 1", (rid,))
        self.commit()

    def storing(self, rid: int) -> None:
        """Request ``rid``'s page is about to be stored as new, and its outputs to go out: committed at once,
        before the store's add, so that a kill from now on has it emitted again (never taken for unchanged
        by the page it stored itself), while a request killed before this, which produced nothing, is
        judged afresh (a page an earlier, finished request stored is unchanged, its items out once)."""
        self._run("UPDATE requests SET state = 3 WHERE id = ? AND state IN (1, 2)", (rid,))
        self.commit()

    def stored_nothing(self, rid: int) -> None:
        """Request ``rid``'s page, marked ``storing``, was not stored after all (another process of a shared
        store had stored it first): back to state 2, committed with the next commit (a kill before it
        only emits the page again)."""
        self._run("UPDATE requests SET state = 2 WHERE id = ? AND state = 3", (rid,))

    def ack(self, ids: list[int]) -> None:
        """Forget requests that are done."""
        try:
            self.db.executemany("DELETE FROM requests WHERE id = ?", [(i,) for i in ids])
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    def data_of(self, rid: int) -> str | None:
        """The stored request of row ``rid`` (None: acknowledged, or never queued)."""
        row = self._run("SELECT data FROM requests WHERE id = ?", (rid,)).fetchone()
        return None if row is None else row[0]

    def commit(self, store_size: int | None = None) -> None:
        """Commit; ``store_size``: the crawl's store's fingerprints now (all committed), recorded with it, so
        that a resume finds out a store that lost some (``recorded_store_size``)."""
        if self._broken is not None:
            raise FrontierError(f"frontier {self.path}: takes no more writes after {self._broken}")
        try:
            if store_size is not None:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('store_size', ?)", (str(store_size),))
            self.db.execute("COMMIT")
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    # -- feed files (``frontier.feeds``); written in the open transaction, like the acknowledgements

    def feeds(self) -> list[FeedRow]:
        return [FeedRow(*r) for r in self._run("SELECT * FROM feeds ORDER BY path").fetchall()]

    def feed(self, path: str) -> FeedRow | None:
        row = self._run("SELECT * FROM feeds WHERE path = ?", (path,)).fetchone()
        return None if row is None else FeedRow(*row)

    def feed_drop(self, path: str) -> None:
        self._run("DELETE FROM feeds WHERE path = ?", (path,))

    def feed_put(self, row: FeedRow) -> None:
        self._run("INSERT OR REPLACE INTO feeds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", tuple(row))

    def feed_committed(self, path: str, committed: int, csv_header: bytes | None) -> None:
        self._run("UPDATE feeds SET committed = ?, csv_header = COALESCE(csv_header, ?) WHERE path = ?",
                  (committed, csv_header, path))

    def feed_closed(self, path: str) -> None:
        self._run("UPDATE feeds SET open = 0 WHERE path = ?", (path,))

    def _fault(self, exc: sqlite3.Error) -> FrontierError:
        """The error for a failed statement or commit, after which nothing more is committed.
        On a full disk SQLite may roll the open transaction back and leave the connection
        committing each later statement on its own, or keep the part before the failure for the
        next commit (the close's): either way a request could be marked seen and never queued, or
        a parent acknowledged without its outlinks. So the transaction is rolled back, and what
        follows goes into one that is never committed (``commit`` raises, ``close`` rolls back):
        the file keeps what was committed before the failure, for the resume."""
        error = _explain(self.path, exc)
        if self._broken is None:
            self._broken = str(error).removeprefix(f"frontier {self.path}: ")
            db = self._db
            if db is not None:
                try:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    db.execute("BEGIN")
                except sqlite3.Error:  # (BEGIN writes nothing: short of a closed connection it does not fail)
                    pass
        return error

    def _run(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, args)
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    def in_flight(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM requests WHERE state != 0").fetchone()[0]

    def close(self) -> None:
        """Commit and let go of the file (and the JOBDIR's lock)."""
        try:
            if self._db is not None:
                try:
                    if self._db.in_transaction:
                        self._db.execute("COMMIT" if self._broken is None else "ROLLBACK")
                finally:
                    self._db.close()
                    self._db = None
        finally:
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None
