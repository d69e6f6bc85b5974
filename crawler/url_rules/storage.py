"""Where a rule book keeps its state: SQLite (a file, or memory) or Redis
(beside a shared store, so that every crawler process learns from all).

The book (``book.RuleBook``) decides; a storage only keeps, with operations
that are safe when several processes share it: counters are incremented,
never written whole; a form's first page and an avoided request are set only
if absent. ``open_storage(location)`` picks the implementation: None (memory),
a file path, or a ``redis://`` URL (with ``?prefix=``: the store's name, so
the keys sit beside the store's as ``NAME:rules:*``). ``read_book(location)``
reads a book without writing to it, for ``neardup rules``.

>>> s = open_storage(None)
>>> s.create("param h sid", "h"), s.create("param h sid", "h")
(True, False)
>>> s.bump("param h sid", evidence=2)["evidence"]
2
>>> s.set_forms([("param h sid", "http://h/a", "http://h/a?sid=1", 7), ("param h sid", "http://h/a", "x", 8)])
[None, ('http://h/a?sid=1', 7)]
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import mmh3

from scrapy_neardup.dedup.fingerprint.window import HEAD_BYTES
from scrapy_neardup.dedup.store.backends import from_sqlite_int, private_file, to_sqlite_int

from ..sqlite_files import columns_of
from .rules import UrlRule

COUNTERS = ("evidence", "counter", "avoided")


class Avoided(NamedTuple):
    """A request a rule avoided: its URL, the request as the caller can make it
    again (None: it could not be stored), and whether it had passed the dupe
    filter already (``scheduled``: made again with ``dont_filter``, once), with
    the durable frontier's id of the request left out (``frontier_id``: that
    request, if not acknowledged yet, is acknowledged in the transaction that
    queues it again, so that a kill never leaves both); and the note's own token
    (``nonce``, random, made when it was noted): a frontier that queues it
    under a mark (``redis_scheduler.push_marked``) tells it from a later note
    of the same URL by the same rule (a process that had not yet seen the
    rule retired)."""

    url: str
    request: str | None
    scheduled: bool
    frontier_id: int | None = None
    nonce: str = ""


COMMIT_EVERY = 1.0  # seconds (SQLite; Redis commits every call)


class Storage(Protocol):
    def rules(self) -> list[dict[str, Any]]:
        """Every rule, oldest first: spec, host, the ``COUNTERS``, example, counter_example,
        if_range_off (``set_if_range_off``)."""

    def create(self, spec: str, host: str) -> bool:
        """Add a rule (no evidence yet); False if it is there already."""

    def bump(self, spec: str, example: str | None = None, counter_example: str | None = None,
             **counts: int) -> dict[str, int]:
        """Add to a rule's counters (and keep its first example, its last
        counter-example); returns its counters now."""

    def set_if_range_off(self, spec: str) -> None:
        """Note that the rule's ranged GETs go without ``If-Range`` (a copy came whole under
        it: its pages' ETags do not follow their content), for good; committed by the caller."""

    def add_page(self, host: str, url: str, fp: int, path: str | None = None) -> None:
        """A page seen; ``path``: its path as ``rules.parts_of`` has it (kept by a
        storage that can search by it, for ``pages``)."""

    def pages(self, host: str, limit: int, touching: UrlRule | None = None) -> list[tuple[str, int]]:
        """Up to ``limit`` of the host's pages (url, fingerprint), the latest if there
        are more; with ``touching``, of those only the ones whose path it touches
        (``rules.touches``) if the storage can tell (it may give more)."""

    def fetched(self, urls: list[str]) -> list[bool]:
        """For each URL, in one round: whether it is a page seen (``add_page``)."""

    def forms(self, asks: list[tuple[str, str]]) -> list[tuple[str, int] | None]:
        """For each (spec, form), in one round: the first page (url, fingerprint)
        seen of the form under the rule, or None."""

    def set_forms(self, asks: list[tuple[str, str, str, int]]) -> list[tuple[str, int] | None]:
        """For each (spec, form, url, fp), in one round: make (url, fp) the form's
        first page unless it has one; None, or the one it has."""

    def judge_once(self, asks: list[tuple[str, str]]) -> list[bool]:
        """For each (spec, page: its URL and fingerprint), in one round: whether this is the first time
        the page is judged against its form's first under the rule, in any process of the book. A
        process that learns of a rule another made judges the pages it met before
        (``RuleBook.refresh``), which the other may have judged already: a pair counts once."""

    def drop_forms(self, spec: str) -> None: ...

    def query_forms(self, spec: str) -> list[tuple[str, str, int]]:
        """The rule's forms whose first page has a query: (form, url, fingerprint).
        O(the rule's forms): for a parameter rule's retirement, which is rare."""

    def drop_form_keys(self, spec: str, forms: list[str]) -> None:
        """Delete these forms of the rule (their first pages are forgotten)."""

    def avoid_once(self, spec: str, url: str, target: str, request: str | None, scheduled: bool = False,
                   params: tuple[str, ...] = (), frontier_id: int | None = None) -> bool:
        """Note an avoided request; False if the URL was avoided before.
        ``scheduled``: it had passed the dupe filter (left out just before its
        download), kept on the URL's note even when it was avoided before, with
        its ``frontier_id`` (the durable frontier's row, if it came from one).
        ``params``: the parameters parameter rules stripped to make it the form
        of a path rule (it depends on those rules too)."""

    def release(self, spec: str, names: tuple[str, ...] = (), claim: bool = True) -> list[Avoided]:
        """The requests a rule avoided (as given to ``avoid_once``), and those
        whose avoidance stripped one of ``names`` (the rule's, for a parameter
        rule), taken (``claim``) or left until ``forget``."""

    def forget(self, urls: list[str]) -> None:
        """Delete these avoided requests (after ``release(claim=False)``)."""

    def set_heads(self, rows: list[tuple[int, int, str | None]]) -> None:
        """Keep, per fetched page (the 64-bit hash of its URL), what a ranged GET
        confirming a copy of it is checked against (``LearnedRules``: its length, the
        places of windows of its text and their hashes, one int of ``HEAD_BYTES``, ``window.page_head``) and
        its strong ``ETag`` (or None; sent as ``If-Range``): a few dozen bytes a page, read back after a resume."""

    def heads(self, keys: list[int]) -> list[tuple[int, str | None] | None]:
        """For each key, in one round: the (head, ETag) ``set_heads`` kept, or None."""

    def save_settings(self, values: dict[str, str]) -> None:
        """Keep the settings the book acts under (its evidence threshold, the
        pinned and forbidden rules), so that a listing shows each rule's state
        as the crawl had it."""

    def settings(self) -> dict[str, str]: ...

    def setting_once(self, name: str, value: str) -> str:
        """Keep setting ``name`` as ``value`` unless it has one; the one it has now (the first writer's,
        whichever process of a shared book it was). Committed by the caller."""

    def maybe_commit(self) -> None: ...

    def commit(self) -> None: ...

    def close(self) -> None: ...


def read_book(location: str | Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A rule book's rules (as ``Storage.rules``) and settings (as
    ``Storage.settings``), read without writing anything: a SQLite file is
    opened read-only and must be a rule book (else ``WrongFileError``, naming
    what it is); a ``redis://`` URL is only read."""
    from scrapy_neardup.dedup.store.redis import is_redis_url

    from ..sqlite_files import RULE_BOOK, open_readonly, tables_of

    if is_redis_url(str(location)):
        store = RedisStorage(str(location))
        try:
            return store.rules(), store.settings()
        finally:
            store.close()
    db = open_readonly(location, RULE_BOOK)
    try:
        settings = dict(db.execute("SELECT name, value FROM settings")) if "settings" in tables_of(db) else {}
        return _rule_rows(db), settings
    finally:
        db.close()


def open_storage(location: str | Path | None) -> Storage:
    from scrapy_neardup.dedup.store.redis import is_redis_url

    if location is not None and is_redis_url(str(location)):
        return RedisStorage(str(location))
    return SqliteStorage(location)


# -- SQLite --------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rules (id INTEGER PRIMARY KEY, spec TEXT UNIQUE NOT NULL, host TEXT NOT NULL,
    evidence INTEGER NOT NULL DEFAULT 0, counter INTEGER NOT NULL DEFAULT 0,
    avoided INTEGER NOT NULL DEFAULT 0, example TEXT, counter_example TEXT,
    if_range_off INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS pages (url TEXT PRIMARY KEY, host TEXT NOT NULL, fp INTEGER NOT NULL, seq INTEGER,
    path TEXT);
CREATE INDEX IF NOT EXISTS pages_by_host ON pages (host, seq);
CREATE TABLE IF NOT EXISTS forms (rule INTEGER, form TEXT, url TEXT NOT NULL, fp INTEGER NOT NULL,
    PRIMARY KEY (rule, form)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS avoided (url TEXT PRIMARY KEY, rule INTEGER, target TEXT, request TEXT,
    scheduled INTEGER NOT NULL DEFAULT 0, params TEXT NOT NULL DEFAULT '', frontier_id INTEGER,
    nonce TEXT NOT NULL DEFAULT '') WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS heads (key INTEGER PRIMARY KEY, head INTEGER NOT NULL, etag TEXT);
"""


def _rule_rows(db: sqlite3.Connection) -> list[dict[str, Any]]:
    keys = ("spec", "host", *COUNTERS, "example", "counter_example", "if_range_off")
    # (a book written before the column, read without migrating it: no rule has If-Range off)
    off = "if_range_off" if "if_range_off" in columns_of(db, "rules") else "0"
    return [dict(zip(keys, (*row[:-1], bool(row[-1])))) for row in db.execute(
        f"SELECT spec, host, {', '.join(COUNTERS)}, example, counter_example, {off} FROM rules ORDER BY id")]


class SqliteStorage:
    """One process's rule book in SQLite (WAL), committed every second and on demand."""

    def __init__(self, location: str | Path | None) -> None:
        if location is not None:
            Path(location).parent.mkdir(parents=True, exist_ok=True)
            private_file(location)
        # (used by one thread at a time, but not always the one that made it: `scrapy shell` builds the
        # crawl in its main thread and runs it in the reactor's)
        self.db = sqlite3.connect(":memory:" if location is None else str(location), isolation_level=None,
                                  check_same_thread=False)
        self._open = True
        try:
            self._prepare()
        except sqlite3.OperationalError as exc:  # (a full disk, a read-only directory: name the file)
            if location is None:
                raise
            from ..sqlite_files import RULE_BOOK, cannot_open

            raise cannot_open(location, RULE_BOOK, exc) from exc
        self._committed = time.monotonic()
        self._seq = self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM pages").fetchone()[0]
        self._ids = dict(self.db.execute("SELECT spec, id FROM rules"))

    def _prepare(self) -> None:
        """The journal mode, the tables (older books migrated in place), and the first transaction."""
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        columns = columns_of(self.db, "avoided")
        # (a book written before: migrated in place; its rows were outlinks never queued)
        if "scheduled" not in columns:
            self.db.execute("ALTER TABLE avoided ADD COLUMN scheduled INTEGER NOT NULL DEFAULT 0")
        if "params" not in columns:
            self.db.execute("ALTER TABLE avoided ADD COLUMN params TEXT NOT NULL DEFAULT ''")
        if "frontier_id" not in columns:
            self.db.execute("ALTER TABLE avoided ADD COLUMN frontier_id INTEGER")
        if "nonce" not in columns:
            self.db.execute("ALTER TABLE avoided ADD COLUMN nonce TEXT NOT NULL DEFAULT ''")
        if "if_range_off" not in columns_of(self.db, "rules"):
            self.db.execute("ALTER TABLE rules ADD COLUMN if_range_off INTEGER NOT NULL DEFAULT 0")
        if "path" not in columns_of(self.db, "pages"):
            self.db.execute("ALTER TABLE pages ADD COLUMN path TEXT")  # (NULL for the pages before: any rule's)
        self.db.execute("BEGIN")

    def rules(self) -> list[dict[str, Any]]:
        return _rule_rows(self.db)

    def create(self, spec: str, host: str) -> bool:
        cur = self.db.execute("INSERT OR IGNORE INTO rules (spec, host) VALUES (?, ?)", (spec, host))
        if cur.rowcount:
            self._ids[spec] = cur.lastrowid
        return bool(cur.rowcount)

    def bump(self, spec: str, example: str | None = None, counter_example: str | None = None,
             **counts: int) -> dict[str, int]:
        sets = [f"{name} = {name} + ?" for name in counts]
        args: list[Any] = list(counts.values())
        if example:
            sets.append("example = COALESCE(example, ?)")
            args.append(example)
        if counter_example:
            sets.append("counter_example = ?")
            args.append(counter_example)
        if sets:
            self.db.execute(f"UPDATE rules SET {', '.join(sets)} WHERE spec = ?", (*args, spec))
        row = self.db.execute(f"SELECT {', '.join(COUNTERS)} FROM rules WHERE spec = ?", (spec,)).fetchone()
        return dict(zip(COUNTERS, row))

    def set_if_range_off(self, spec: str) -> None:
        self.db.execute("UPDATE rules SET if_range_off = 1 WHERE spec = ?", (spec,))

    def add_page(self, host: str, url: str, fp: int, path: str | None = None) -> None:
        self._seq += 1
        self.db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
                        (url, host, to_sqlite_int(fp), self._seq, path))

    def fetched(self, urls: list[str]) -> list[bool]:
        return [self.db.execute("SELECT 1 FROM pages WHERE url = ?", (url,)).fetchone() is not None
                for url in urls]

    def pages(self, host: str, limit: int, touching: UrlRule | None = None) -> list[tuple[str, int]]:
        # (a prefix or suffix rule touches few of a host's pages: they are picked out in SQLite,
        # not turned into Python objects by the thousand for each new rule)
        where, args = "", []
        if touching is not None and touching.kind != "param" and "" not in (touching.a, touching.b):
            cut = "substr(path, 1, ?) = ?" if touching.kind == "prefix" else "substr(path, -?) = ?"
            where = f" WHERE path IS NULL OR {cut} OR {cut}"
            args = [len(touching.a), touching.a, len(touching.b), touching.b]
        rows = self.db.execute("SELECT url, fp FROM (SELECT url, fp, path, seq FROM pages WHERE host = ? "
                               f"ORDER BY seq DESC LIMIT ?){where} ORDER BY seq DESC", (host, limit, *args)).fetchall()
        return [(url, from_sqlite_int(fp)) for url, fp in reversed(rows)]

    def _form(self, spec: str, form: str) -> tuple[str, int] | None:
        row = self.db.execute("SELECT url, fp FROM forms WHERE rule = ? AND form = ?",
                              (self._ids[spec], form)).fetchone()
        return None if row is None else (row[0], from_sqlite_int(row[1]))

    def forms(self, asks: list[tuple[str, str]]) -> list[tuple[str, int] | None]:
        return [self._form(spec, form) for spec, form in asks]

    def set_forms(self, asks: list[tuple[str, str, str, int]]) -> list[tuple[str, int] | None]:
        out = []
        for spec, form, url, fp in asks:
            cur = self.db.execute("INSERT OR IGNORE INTO forms VALUES (?, ?, ?, ?)",
                                  (self._ids[spec], form, url, to_sqlite_int(fp)))
            out.append(None if cur.rowcount else self._form(spec, form))
        return out

    def judge_once(self, asks: list[tuple[str, str]]) -> list[bool]:
        return [True] * len(asks)  # (one process: no other learns a rule and judges its pages again)

    def drop_forms(self, spec: str) -> None:
        self.db.execute("DELETE FROM forms WHERE rule = ?", (self._ids[spec],))

    def query_forms(self, spec: str) -> list[tuple[str, str, int]]:
        return [(form, url, from_sqlite_int(fp)) for form, url, fp in self.db.execute(
            "SELECT form, url, fp FROM forms WHERE rule = ? AND instr(url, '?') > 0", (self._ids[spec],))]

    def drop_form_keys(self, spec: str, forms: list[str]) -> None:
        self.db.executemany("DELETE FROM forms WHERE rule = ? AND form = ?", [(self._ids[spec], f) for f in forms])

    def avoid_once(self, spec: str, url: str, target: str, request: str | None, scheduled: bool = False,
                   params: tuple[str, ...] = (), frontier_id: int | None = None) -> bool:
        cur = self.db.execute("INSERT OR IGNORE INTO avoided VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                              (url, self._ids[spec], target, request, int(scheduled), ",".join(params),
                               frontier_id, secrets.token_hex(8)))
        if not cur.rowcount and scheduled:
            self.db.execute("UPDATE avoided SET scheduled = 1, frontier_id = COALESCE(?, frontier_id) WHERE url = ?",
                            (frontier_id, url))
        return bool(cur.rowcount)

    def release(self, spec: str, names: tuple[str, ...] = (), claim: bool = True) -> list[Avoided]:
        # (O(rows noted with stripped parameters) for a parameter rule: a retirement is rare)
        rows = self.db.execute("SELECT url, request, scheduled, rule, params, frontier_id, nonce FROM avoided "
                               "WHERE rule = ?" + (" OR params != ''" if names else ""), (self._ids[spec],)).fetchall()
        out = [Avoided(url, request, bool(scheduled), fid, nonce)
               for url, request, scheduled, rule, params, fid, nonce in rows
               if rule == self._ids[spec] or set(params.split(",")) & set(names)]
        if claim:
            self.forget([a.url for a in out])
        return out

    def forget(self, urls: list[str]) -> None:
        self.db.executemany("DELETE FROM avoided WHERE url = ?", [(url,) for url in urls])

    def set_heads(self, rows: list[tuple[int, int, str | None]]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO heads VALUES (?, ?, ?)",
                            [(to_sqlite_int(key), head.to_bytes(HEAD_BYTES, "big"), etag) for key, head, etag in rows])

    def heads(self, keys: list[int]) -> list[tuple[int, str | None] | None]:
        out: list[tuple[int, str | None] | None] = []
        for key in keys:
            row = self.db.execute("SELECT head, etag FROM heads WHERE key = ?", (to_sqlite_int(key),)).fetchone()
            # (a blob of HEAD_BYTES; an int, a head of an earlier format, is found under no key of today's)
            out.append(None if row is None else (int.from_bytes(row[0], "big") if isinstance(row[0], bytes)
                                                 else from_sqlite_int(row[0]), row[1]))
        return out

    def save_settings(self, values: dict[str, str]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO settings VALUES (?, ?)", values.items())

    def settings(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT name, value FROM settings"))

    def setting_once(self, name: str, value: str) -> str:
        self.db.execute("INSERT OR IGNORE INTO settings VALUES (?, ?)", (name, value))
        return str(self.db.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()[0])

    def maybe_commit(self) -> None:
        if time.monotonic() - self._committed >= COMMIT_EVERY:
            self.commit()

    def commit(self) -> None:
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")
        self._committed = time.monotonic()

    def close(self) -> None:
        if self._open:
            self._open = False
            self.db.execute("COMMIT")
            self.db.close()


# -- Redis ---------------------------------------------------------------------------

def _guarded(cls: type) -> type:
    """Every public method of ``cls`` raises the store's errors
    (``dedup.store.redis_store.redis_errors``) when Redis fails: ``StoreUnavailable``
    when it cannot be reached, naming the URL without its password."""
    import functools

    from scrapy_neardup.dedup.store.redis import redis_errors

    def wrap(fn):
        @functools.wraps(fn)
        def call(self, *args, **kwargs):
            with redis_errors(f"the URL rules at {self.location}"):
                return fn(self, *args, **kwargs)
        return call

    for name, fn in list(vars(cls).items()):
        if callable(fn) and not name.startswith("_"):
            setattr(cls, name, wrap(fn))
    return cls


@_guarded
class RedisStorage:
    """The rule book of every process sharing a Redis store, as keys beside it::

        NAME:rules              sorted set: spec -> creation time (ms)
        NAME:rules:n            hash: "<counter>:<spec>" -> count, "ex:<spec>", "cx:<spec>" -> examples,
                                "nir:<spec>" -> 1 (``set_if_range_off``)
        NAME:rules:p:<host>     hash: page URL -> fingerprint (8 bytes)
        NAME:rules:<rule>:f     hash: form -> fingerprint (8 bytes) + URL of its first page
        NAME:rules:<rule>:j     set: the 8-byte hashes of the pages (URL, fingerprint) judged under the rule (``judge_once``)
        NAME:rules:a            hash: avoided URL -> {"rule": ..., "target": ..., "request": ..., "nonce": ...}
        NAME:rules:settings     hash: name -> value (``save_settings``)
        NAME:rules:h            hash: page key (8 bytes) -> head (HEAD_BYTES) + ETag (``set_heads``)

    ``<rule>`` is a hash of the spec. Every call is one Redis command (or a
    pipeline of independent ones), atomic on its own: HINCRBY, HSETNX."""

    def __init__(self, url: str) -> None:
        from scrapy_neardup.dedup.store.redis import connect, redact, split_url

        redis_url, own = split_url(url)
        self.name = (own.get("prefix") or "neardup") + ":rules"
        self.location = redact(url)
        self.client, _ = connect(redis_url)

    @property
    def avoided_key(self) -> str:
        """The hash of avoided requests (URL -> entry): what a shared frontier claims them from
        when it queues a retired rule's requests in one step with the claim
        (``redis_scheduler.claim_and_push``)."""
        return f"{self.name}:a"

    def _rule(self, spec: str) -> str:
        return f"{self.name}:{mmh3.hash(spec, signed=False):08x}"

    def rules(self) -> list[dict[str, Any]]:
        specs = [s.decode() for s in self.client.zrange(self.name, 0, -1)]
        raw = {k.decode(): v.decode() for k, v in self.client.hgetall(f"{self.name}:n").items()}
        out = []
        for spec in specs:
            row: dict[str, Any] = {"spec": spec, "host": UrlRule.parse(spec).host}
            row.update({c: int(raw.get(f"{c}:{spec}", 0)) for c in COUNTERS})
            row["example"], row["counter_example"] = raw.get(f"ex:{spec}"), raw.get(f"cx:{spec}")
            row["if_range_off"] = bool(raw.get(f"nir:{spec}"))
            out.append(row)
        return out

    def create(self, spec: str, host: str) -> bool:
        return bool(self.client.zadd(self.name, {spec: time.time() * 1000}, nx=True))

    def bump(self, spec: str, example: str | None = None, counter_example: str | None = None,
             **counts: int) -> dict[str, int]:
        n = f"{self.name}:n"
        pipe = self.client.pipeline(transaction=False)
        for c in COUNTERS:
            pipe.hincrby(n, f"{c}:{spec}", counts.get(c, 0))
        if example:
            pipe.hsetnx(n, f"ex:{spec}", example)
        if counter_example:
            pipe.hset(n, f"cx:{spec}", counter_example)
        return dict(zip(COUNTERS, pipe.execute()[: len(COUNTERS)]))

    def set_if_range_off(self, spec: str) -> None:
        self.client.hset(f"{self.name}:n", f"nir:{spec}", 1)

    def add_page(self, host: str, url: str, fp: int, path: str | None = None) -> None:
        self.client.hset(f"{self.name}:p:{host}", url, fp.to_bytes(8, "big"))

    def fetched(self, urls: list[str]) -> list[bool]:
        from .rules import host_of

        pipe = self.client.pipeline(transaction=False)
        for url in urls:
            pipe.hexists(f"{self.name}:p:{host_of(url)}", url)
        return [bool(x) for x in pipe.execute()]

    def pages(self, host: str, limit: int, touching: UrlRule | None = None) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for url, fp in self.client.hscan_iter(f"{self.name}:p:{host}", count=1000):
            out.append((url.decode(), int.from_bytes(fp, "big")))
            if len(out) >= limit:
                break
        return out

    @staticmethod
    def _page(raw: bytes | None) -> tuple[str, int] | None:
        return None if raw is None else (raw[8:].decode(), int.from_bytes(raw[:8], "big"))

    def forms(self, asks: list[tuple[str, str]]) -> list[tuple[str, int] | None]:
        pipe = self.client.pipeline(transaction=False)
        for spec, form in asks:
            pipe.hget(f"{self._rule(spec)}:f", form)
        return [self._page(raw) for raw in pipe.execute()]

    def set_forms(self, asks: list[tuple[str, str, str, int]]) -> list[tuple[str, int] | None]:
        pipe = self.client.pipeline(transaction=False)
        for spec, form, url, fp in asks:
            pipe.hsetnx(f"{self._rule(spec)}:f", form, fp.to_bytes(8, "big") + url.encode())
            pipe.hget(f"{self._rule(spec)}:f", form)  # (after HSETNX: ours if it was absent)
        replies = pipe.execute()
        return [None if replies[2 * i] else self._page(replies[2 * i + 1]) for i in range(len(asks))]

    def judge_once(self, asks: list[tuple[str, str]]) -> list[bool]:
        if not asks:
            return []
        pipe = self.client.pipeline(transaction=False)
        for spec, page in asks:  # (a set of the 8-byte hashes of the pages judged under the rule)
            pipe.sadd(f"{self._rule(spec)}:j", mmh3.hash64(page, signed=False)[0].to_bytes(8, "big"))
        return [bool(added) for added in pipe.execute()]

    def drop_forms(self, spec: str) -> None:
        self.client.delete(f"{self._rule(spec)}:f")
        self.client.delete(f"{self._rule(spec)}:j")  # (apart: on a cluster the two may be in two slots)

    def query_forms(self, spec: str) -> list[tuple[str, str, int]]:
        out = []
        for form, raw in self.client.hscan_iter(f"{self._rule(spec)}:f", count=1000):
            page = self._page(raw)
            if page is not None and "?" in page[0]:
                out.append((form.decode(), page[0], page[1]))
        return out

    def drop_form_keys(self, spec: str, forms: list[str]) -> None:
        if forms:
            self.client.hdel(f"{self._rule(spec)}:f", *forms)

    def avoid_once(self, spec: str, url: str, target: str, request: str | None, scheduled: bool = False,
                   params: tuple[str, ...] = (), frontier_id: int | None = None) -> bool:
        # (one hash for every rule: a URL is counted once, whichever rule each process avoided it by)
        key = f"{self.name}:a"
        entry = {"rule": spec, "target": target, "request": request, "scheduled": scheduled, "params": list(params),
                 "frontier_id": frontier_id, "nonce": secrets.token_hex(8)}
        if self.client.hsetnx(key, url, json.dumps(entry)):
            return True
        if scheduled and (raw := self.client.hget(key, url)) is not None:
            old = json.loads(raw)
            if not old.get("scheduled") or (frontier_id is not None and old.get("frontier_id") != frontier_id):
                self.client.hset(key, url, json.dumps({**old, "scheduled": True,
                                                       "frontier_id": frontier_id or old.get("frontier_id")}))
        return False

    def _mine(self, spec: str, names: tuple[str, ...]) -> list[tuple[bytes, dict]]:
        return [(url, entry) for url, raw in self.client.hscan_iter(f"{self.name}:a", count=1000)
                for entry in [json.loads(raw)] if entry["rule"] == spec or set(entry.get("params", ())) & set(names)]

    def release(self, spec: str, names: tuple[str, ...] = (), claim: bool = True) -> list[Avoided]:
        mine = self._mine(spec, names)
        if not mine:
            return []
        out = [Avoided(url.decode(), entry["request"], bool(entry.get("scheduled")), entry.get("frontier_id"),
                       entry.get("nonce", ""))
               for url, entry in mine]
        if not claim:
            return out
        pipe = self.client.pipeline(transaction=False)
        for url, _ in mine:
            pipe.hdel(f"{self.name}:a", url)
        # (only what this call deleted: two processes releasing one rule requeue each request once)
        return [a for a, gone in zip(out, pipe.execute()) if gone]

    def forget(self, urls: list[str]) -> None:
        if urls:
            self.client.hdel(f"{self.name}:a", *urls)

    def set_heads(self, rows: list[tuple[int, int, str | None]]) -> None:
        if rows:  # (value: the head's HEAD_BYTES, then the ETag's, if any)
            self.client.hset(f"{self.name}:h", mapping={
                key.to_bytes(8, "big"): head.to_bytes(HEAD_BYTES, "big") + (etag or "").encode("latin-1")
                for key, head, etag in rows})

    def heads(self, keys: list[int]) -> list[tuple[int, str | None] | None]:
        if not keys:
            return []
        raw = self.client.hmget(f"{self.name}:h", [key.to_bytes(8, "big") for key in keys])
        return [None if r is None else (int.from_bytes(r[:HEAD_BYTES], "big"), r[HEAD_BYTES:].decode("latin-1") or None)
                for r in raw]

    def save_settings(self, values: dict[str, str]) -> None:
        if values:
            self.client.hset(f"{self.name}:settings", mapping=values)

    def settings(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.client.hgetall(f"{self.name}:settings").items()}

    def setting_once(self, name: str, value: str) -> str:
        self.client.hsetnx(f"{self.name}:settings", name, value)
        got = self.client.hget(f"{self.name}:settings", name)
        return got.decode() if got is not None else value

    def maybe_commit(self) -> None:
        """(Each call is committed on the server when it returns.)"""

    def commit(self) -> None:
        """(Each call is committed on the server when it returns.)"""

    def close(self) -> None:
        self.client.close()
