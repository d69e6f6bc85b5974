"""The rule book: evidence for and against URL rules, and the decision to
avoid a request. Kept in SQLite (a file beside the store, or in memory).

For every page the filter checks, ``observe`` records its URL and fingerprint
and compares it with the first page seen of the same form under each live
rule of its host: within k bits is evidence for the rule, farther is a
counter-example, which retires the rule for good. A dropped page's URL and
the URL it duplicated suggest new rules (``rules.derive``); a new rule is
first tried on the host's pages already seen, so that a counter-example from
the past (a translated page under a mirrored language prefix, say) retires it
at once. A rule with ``min_evidence`` agreeing pairs and no counter-example
is *active*: ``avoid`` then tells the crawl not to request a URL whose form
under it already has a fetched page (that page's outlinks stand for it),
except a share ``explore`` of them, fetched to keep testing the rule. When a
rule is retired, the requests it avoided are handed back (``release``) to be
made after all: a rule that stops holding delays pages, it does not lose them.

Costs: ``observe`` is one page row and, per live rule of the host, one
lookup and at most one form row (and a new rule, a pass over up to
``BACKFILL`` of the host's pages: about 0.2 s at the most, on the crawl's
thread); ``avoid`` one lookup per active rule of the host. Rules per host are
capped (``MAX_RULES_PER_HOST``); a retired rule's forms are deleted. Writes are committed at least every second and at
``close``, and a retirement at once: a kill loses at most the last second
of evidence, never a retirement.

>>> book = RuleBook(None, max_distance=3, min_evidence=2, explore=0.0)
>>> for i in range(3):
...     book.observe(f"http://h/a{i}.html", 1000 + i)
...     book.observe(f"http://h/a{i}.html?sid={i}", 1000 + i, duplicate_of=f"http://h/a{i}.html")
>>> book.avoid("http://h/a1.html?sid=zz")
('param h sid', 'http://h/a1.html', False)
>>> book.avoid("http://h/a9.html?sid=zz") is None  # nothing of that form fetched yet
True
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import mmh3

from dedup.store.backends import private_file

from .rules import RuleSyntaxError, UrlRule, derive, host_of

logger = logging.getLogger(__name__)

CANDIDATE, ACTIVE, RETIRED, PINNED = "candidate", "active", "retired", "pinned"
MAX_RULES_PER_HOST = 64
BACKFILL = 20_000  # a new rule is tried on at most this many of the host's latest pages
COMMIT_EVERY = 1.0  # seconds

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rules (id INTEGER PRIMARY KEY, spec TEXT UNIQUE NOT NULL, host TEXT NOT NULL,
    state TEXT NOT NULL, evidence INTEGER NOT NULL DEFAULT 0, counter INTEGER NOT NULL DEFAULT 0,
    avoided INTEGER NOT NULL DEFAULT 0, example TEXT, counter_example TEXT, changed TEXT);
CREATE TABLE IF NOT EXISTS pages (url TEXT PRIMARY KEY, host TEXT NOT NULL, fp INTEGER NOT NULL, seq INTEGER);
CREATE INDEX IF NOT EXISTS pages_by_host ON pages (host, seq);
CREATE TABLE IF NOT EXISTS forms (rule INTEGER, form TEXT, url TEXT NOT NULL, fp INTEGER NOT NULL,
    PRIMARY KEY (rule, form)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS avoided (url TEXT PRIMARY KEY, rule INTEGER, target TEXT, request TEXT) WITHOUT ROWID;
"""


def _signed(fp: int) -> int:  # SQLite integers are signed 64-bit
    return fp - (1 << 64) if fp >= 1 << 63 else fp


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class RuleState:
    id: int
    rule: UrlRule
    state: str
    evidence: int = 0
    counter: int = 0
    avoided: int = 0
    example: str | None = None
    counter_example: str | None = None

    @property
    def live(self) -> bool:
        return self.state != RETIRED

    @property
    def acting(self) -> bool:
        return self.state in (ACTIVE, PINNED)


class RuleBook:
    """See the module docstring. ``location``: a SQLite file, or None (in memory).
    ``pin``/``forbid``: rule lines the user fixed (``UrlRule.parse``)."""

    def __init__(self, location: str | Path | None, *, max_distance: int = 3, min_evidence: int = 10,
                 explore: float = 0.05, pin: Iterable[str] = (), forbid: Iterable[str] = ()) -> None:
        self.k = max_distance
        self.min_evidence = min_evidence
        self.explore = explore
        self.forbid = [UrlRule.parse(line) for line in forbid]
        pins = [UrlRule.parse(line) for line in pin]
        if location is not None:
            Path(location).parent.mkdir(parents=True, exist_ok=True)
            private_file(location)
        self.db = sqlite3.connect(":memory:" if location is None else str(location), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        self.db.execute("BEGIN")
        self._committed = time.monotonic()
        self._seq = self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM pages").fetchone()[0]
        self.by_host: dict[str, list[RuleState]] = {}
        for row in self.db.execute("SELECT id, spec, state, evidence, counter, avoided, example, counter_example "
                                   "FROM rules ORDER BY id"):
            st = RuleState(row[0], UrlRule.parse(row[1]), *row[2:])
            if st.state == PINNED:  # pinned by an earlier run's settings, not this one's
                st.state = ACTIVE if st.evidence >= min_evidence and not st.counter else CANDIDATE
            self.by_host.setdefault(st.rule.host, []).append(st)
        for rule in pins:
            st = self._state_of(rule) or self._create(rule, PINNED)
            st.state = PINNED
        for states in self.by_host.values():
            for st in states:
                if self._forbidden(st.rule):
                    st.state = RETIRED
        self.events: list[tuple[str, RuleState]] = []  # ("learned" | "retired", rule): for the caller's stats

    # -- learning ---------------------------------------------------------------

    def observe(self, url: str, fp: int, duplicate_of: str | None = None) -> None:
        """A page the filter checked: its URL, its fingerprint and, when it was
        dropped, the URL it duplicated."""
        host = host_of(url)
        self._seq += 1
        self.db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)", (url, host, _signed(fp), self._seq))
        for st in self._rules_for(host):
            if st.live:
                self._compare(st, url, fp)
        if duplicate_of and duplicate_of != url:
            for rule in derive(self._strip(url), self._strip(duplicate_of)):
                if self._state_of(rule) is None and not self._forbidden(rule) \
                        and len(self.by_host.get(rule.host, ())) < MAX_RULES_PER_HOST:
                    self._backfill(self._create(rule, CANDIDATE))
        self._maybe_commit()

    def _form(self, st: RuleState, url: str) -> str:
        """``url``'s form under a rule; for a path rule, without the parameters
        active parameter rules say do not matter (so ``/a/index.html?sid=1`` and
        ``/a/?sid=2`` are one form under ``suffix h /index.html /`` once ``sid`` is
        known not to matter). A form made before a parameter rule became
        active still has the parameter: it matches less, never wrongly."""
        return st.rule.canonical(url if st.rule.kind == "param" else self._strip(url))

    def _strip(self, url: str) -> str:
        """``url`` without the query parameters that active rules of its host say do not matter."""
        names = sorted({n for st in self._rules_for(host_of(url)) if st.acting and st.rule.kind == "param"
                        for n in st.rule.a.split(",")})
        return UrlRule("param", "*", ",".join(names)).canonical(url) if names else url

    def _compare(self, st: RuleState, url: str, fp: int) -> None:
        form = self._form(st, url)
        row = self.db.execute("SELECT url, fp FROM forms WHERE rule = ? AND form = ?", (st.id, form)).fetchone()
        if row is None:
            self.db.execute("INSERT INTO forms VALUES (?, ?, ?, ?)", (st.id, form, url, _signed(fp)))
            return
        if row[0] == url:
            return
        if ((row[1] & ((1 << 64) - 1)) ^ fp).bit_count() <= self.k:
            st.evidence += 1
            st.example = st.example or f"{url} = {row[0]}"
            if st.state == CANDIDATE and st.evidence >= self.min_evidence and not st.counter:
                st.state = ACTIVE
                self.events.append(("learned", st))
                logger.info("URL rule learned: %s (%d pairs agree, e.g. %s)", st.rule.spec, st.evidence, st.example)
        else:
            st.counter += 1
            st.counter_example = f"{url} != {row[0]}"
            if st.state == PINNED:
                logger.warning("pinned URL rule %s does not hold: %s", st.rule.spec, st.counter_example)
            elif st.state != RETIRED:
                was, st.state = st.state, RETIRED
                if was == ACTIVE:
                    self.events.append(("retired", st))
                    logger.warning("URL rule retired: %s (%s)", st.rule.spec, st.counter_example)
        self._save(st)

    def _backfill(self, st: RuleState) -> None:
        rows = self.db.execute("SELECT url, fp FROM pages WHERE host = ? ORDER BY seq DESC LIMIT ?",
                               (st.rule.host, BACKFILL)).fetchall()
        for url, fp in reversed(rows):
            if not st.live:
                break
            self._compare(st, url, fp & ((1 << 64) - 1))

    # -- acting -------------------------------------------------------------------

    def avoid(self, url: str) -> tuple[str, str, bool] | None:
        """(rule, the fetched URL standing for it, explored) when an active rule
        gives ``url`` the form of a page already fetched, else None. ``explored``:
        it is one of the share ``explore`` requested all the same, to keep
        testing the rule (a stable draw: the same URL, the same answer)."""
        for st in self._rules_for(host_of(url)):
            if not st.acting:
                continue
            row = self.db.execute("SELECT url FROM forms WHERE rule = ? AND form = ?",
                                  (st.id, self._form(st, url))).fetchone()
            if row is None or row[0] == url:
                continue
            # (drawn from the path and query: the same URLs explored on every run, whatever the port)
            draw = mmh3.hash(url.split("/", 3)[-1], signed=False) % 10_000
            explored = draw < self.explore * 10_000
            return st.rule.spec, row[0], explored
        return None

    def record_avoided(self, url: str, spec: str, target: str, request: str | None = None) -> bool:
        """Note an avoided request (``request``: as the caller can make it again,
        should the rule be retired); False if it was avoided before (count it once)."""
        st = next(s for s in self._rules_for(host_of(url)) if s.rule.spec == spec)
        cur = self.db.execute("INSERT OR IGNORE INTO avoided VALUES (?, ?, ?, ?)", (url, st.id, target, request))
        if not cur.rowcount:
            return False
        st.avoided += 1
        self._save(st)
        self._maybe_commit()
        return True

    def release(self, st: RuleState) -> list[str | None]:
        """A retired rule's avoided requests (as given to ``record_avoided``), to
        be made after all: the rule was wrong for some of them. Forgets them."""
        rows = self.db.execute("SELECT request FROM avoided WHERE rule = ?", (st.id,)).fetchall()
        self.db.execute("DELETE FROM avoided WHERE rule = ?", (st.id,))
        self.commit()
        return [r for (r,) in rows]

    # -- listing and housekeeping -----------------------------------------------

    def rules(self) -> list[RuleState]:
        return [st for states in self.by_host.values() for st in states]

    def _rules_for(self, host: str) -> list[RuleState]:
        return self.by_host.get(host, []) + self.by_host.get("*", [])

    def _state_of(self, rule: UrlRule) -> RuleState | None:
        return next((st for st in self.by_host.get(rule.host, ()) if st.rule == rule), None)

    def _forbidden(self, rule: UrlRule) -> bool:
        return any(f.covers(rule) for f in self.forbid)

    def _create(self, rule: UrlRule, state: str) -> RuleState:
        cur = self.db.execute("INSERT INTO rules (spec, host, state, changed) VALUES (?, ?, ?, ?)",
                              (rule.spec, rule.host, state, _now()))
        st = RuleState(cur.lastrowid, rule, state)
        self.by_host.setdefault(rule.host, []).append(st)
        return st

    def _save(self, st: RuleState) -> None:
        self.db.execute("UPDATE rules SET state = ?, evidence = ?, counter = ?, avoided = ?, example = ?, "
                        "counter_example = ?, changed = ? WHERE id = ?",
                        (st.state, st.evidence, st.counter, st.avoided, st.example, st.counter_example, _now(),
                         st.id))
        if st.state == RETIRED:
            self.db.execute("DELETE FROM forms WHERE rule = ?", (st.id,))  # (never looked at again)
            self.commit()  # (a retirement is never lost: a resumed crawl must not act on the rule again)

    def _maybe_commit(self) -> None:
        if time.monotonic() - self._committed >= COMMIT_EVERY:
            self.commit()

    def commit(self) -> None:
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")
        self._committed = time.monotonic()

    def close(self) -> None:
        if self.db is not None:
            self.db.execute("COMMIT")
            self.db.close()
            self.db = None


def list_rules(location: str | Path) -> list[dict]:
    """The rules in a rule book file, for ``neardup rules`` (read-only)."""
    db = sqlite3.connect(f"file:{location}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT spec, state, evidence, counter, avoided, example, counter_example FROM rules "
                          "ORDER BY host, state, spec").fetchall()
    finally:
        db.close()
    keys = ("rule", "state", "evidence", "counter_examples", "avoided", "example", "counter_example")
    return [dict(zip(keys, row)) for row in rows]


__all__ = ["ACTIVE", "CANDIDATE", "PINNED", "RETIRED", "RuleBook", "RuleState", "RuleSyntaxError", "list_rules"]
