"""The embedded index of kept pages: SQLite with FTS5 full-text search.

One document per URL, replaced on re-crawl: its URL, title, visible text,
language (``dedup.features.language``'s code), fingerprint (hex), fetch
time, HTTP status and the canonical URL the page declares
(``crawler.canonical``; NULL: none). A row takes its declared canonical URL
when that URL is fetched later, on the same host, as a near-duplicate of it
(``take_canonical``). Search it with
``neardup search INDEX QUERY`` (FTS5 query syntax). Text is indexed as the
filter's tokens (``dedup.features.tokens``) separated by spaces: case-folded
words, Chinese as jieba words (FTS5's tokenizer splits on spaces but not
between Han characters), Greek without accents and ``ё`` as ``е``
(``search_fold``). A query's words are tokenized and folded the same way, and
its FTS5 syntax kept as it is (``fts5_query``).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from scrapy_neardup.dedup.features import UNDETERMINED
from scrapy_neardup.dedup.features.tokens import tokenize
from scrapy_neardup.dedup.store.backends import private_file

from .canonical import same_host
from .sqlite_files import INDEX, cannot_open, columns_of, open_readonly

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    url TEXT PRIMARY KEY, title TEXT, text TEXT, fingerprint TEXT, fetched_at TEXT, status INTEGER, language TEXT,
    canonical TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(url UNINDEXED, title, body, tokenize='unicode61');
"""
#: Columns later versions added to ``pages``, added to an older index when it is opened for writing
#: (its rows keep NULL there: indexed before the column existed)
_ADDED_COLUMNS = {"language": "TEXT", "canonical": "TEXT"}
#: Made after the columns (an older index gets them first)
_INDEXES = "CREATE INDEX IF NOT EXISTS pages_canonical ON pages (canonical) WHERE canonical IS NOT NULL"


class PageRow(NamedTuple):
    """A page as the index holds it."""

    url: str
    title: str
    text: str
    fingerprint: str  # hex; "" for a page passed through unchecked
    fetched_at: str  # ISO 8601, UTC
    status: int
    language: str = UNDETERMINED  # the code of its prose's language (``dedup.features.language``)
    canonical: str | None = None  # the canonical URL it declares (``crawler.canonical``)


class CanonicalFetched(NamedTuple):
    """A page dropped as a near-duplicate, for ``PageIndex.take_canonical``."""

    page: PageRow
    max_distance: int


#: ``PRAGMA user_version`` of an index whose text is folded for search (``search_fold``); 0: made before
#: folding, searched as it was written (folding it again would tokenize every page on the crawl's start)
FOLDED = 1
#: a run of Greek letters (the basic block and the polytonic one), with the combining marks after them
#: (text in NFD: a letter, then its accent)
_GREEK = re.compile(r"[\u0370-\u03ff\u1f00-\u1fff][\u0300-\u036f\u0370-\u03ff\u1f00-\u1fff]*")


def search_fold(text: str) -> str:
    """``text`` as a search folds it beyond case (FTS5's ``unicode61`` already takes the diacritics off
    Latin letters): Greek without its accents and breathings (capitals are written without them, and
    many type without), Russian ``ё`` as ``е`` (usually written so). Letters that marks make distinct
    elsewhere (``й``, ``ї``, Indic vowel signs) are left alone. O(len(text)).

    >>> search_fold("ΕΓΚΑΤΆΣΤΑΣΗ εγκατάσταση ἡμέρα Ещё")
    'ΕΓΚΑΤΑΣΤΑΣΗ εγκατασταση ημερα Еще'
    >>> search_fold("η\u0301μερα")  # (NFD: the accent a character of its own)
    'ημερα'
    """
    if "ё" in text or "Ё" in text:
        text = text.replace("ё", "е").replace("Ё", "Е")
    return _GREEK.sub(_bare, text)


def _bare(m: re.Match[str]) -> str:
    decomposed = unicodedata.normalize("NFD", m.group(0))
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def _index_text(text: str, folded: bool) -> str:
    return " ".join(tokenize(search_fold(text) if folded else text))


COLUMNS = ("title", "body")  # what a column filter can name (the URL is not indexed)
FTS5_EXPECTS = ('FTS5 expects words, "a phrase", a prefix*, AND/OR/NOT between two terms, NEAR(a b), '
                f"a column filter ({' or '.join(c + ':word' for c in COLUMNS)}) and balanced parentheses")
_SPECIAL = set('"(){}:*^+,')  # FTS5's punctuation: kept as it is; anything else is a word's


class QueryError(ValueError):
    """A search query FTS5 cannot read; the message says what is wrong and what FTS5 expects."""


def fts5_query(query: str, folded: bool = True) -> str:
    """``query`` (FTS5 syntax) with every word and phrase tokenized as the
    index's text is, and its syntax kept: the operators ``AND``, ``OR``,
    ``NOT`` and ``NEAR(...)`` (upper case, as FTS5 has them), parentheses,
    ``"phrases"``, ``prefix*``, ``^first``, ``a + b``, ``col:`` and ``{cols}:``
    filters. A word of several tokens (a run of Chinese, ``e-mail``) becomes
    their phrase, as in the indexed text; a word of none (punctuation) is
    left out. ``folded``: the index's text is folded (``search_fold``), so
    the query's words are too. O(len(query)) plus the tokenizer's cost.

    >>> fts5_query('Solp* OR "Zuhor  Borka" NOT title:ZEN')
    '"solp" * OR "zuhor borka" NOT title : "zen"'
    >>> fts5_query("NEAR(狐狸跳过 e-mail, 5)")
    'NEAR ( "狐狸 跳 过" "e mail" , 5 )'
    """
    pieces: list[str] = []
    words = 0
    depth = 0
    i, n = 0, len(query)

    def tokens_of(text: str) -> list[str]:
        return tokenize(search_fold(text) if folded else text)

    def next_char(j: int) -> str:
        while j < n and query[j].isspace():
            j += 1
        return query[j] if j < n else ""

    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c == '"':
            j, text = i + 1, []
            while True:
                end = query.find('"', j)
                if end < 0:
                    raise QueryError(f'unbalanced " (a "phrase" needs its closing quote); {FTS5_EXPECTS}')
                text.append(query[j:end])
                if query.startswith('"', end + 1):  # "" inside a phrase is a literal quote
                    text.append('"')
                    j = end + 2
                    continue
                break
            pieces.append('"' + " ".join(tokens_of("".join(text))) + '"')
            words += 1
            i = end + 1
        elif c == "{":  # a column set, {title body}: its names as they are
            end = query.find("}", i)
            if end < 0:
                raise QueryError(f"unbalanced {{ (a column set needs its closing }}); {FTS5_EXPECTS}")
            pieces.append(query[i : end + 1])
            i = end + 1
        elif c in _SPECIAL:
            depth += (c == "(") - (c == ")")
            if depth < 0:
                raise QueryError(f"unbalanced ); {FTS5_EXPECTS}")
            pieces.append(c)
            i += 1
        else:
            j = i
            while j < n and not query[j].isspace() and query[j] not in _SPECIAL:
                j += 1
            word, i = query[i:j], j
            follows = next_char(i)
            if follows == ":" or word in ("AND", "OR", "NOT") or (word == "NEAR" and follows == "(") \
                    or (word.isdigit() and pieces[-1:] == [","]):
                pieces.append(word)  # a column name, an operator, NEAR's distance
                continue
            tokens = tokens_of(word)
            if tokens:
                pieces.append('"' + " ".join(tokens) + '"')
                words += 1
            elif follows == "*" and query[i:i + 1] == "*":
                i += 1  # (the prefix mark of a word left out goes with it)
    if depth:
        raise QueryError(f"unbalanced (; {FTS5_EXPECTS}")
    if not words:
        raise QueryError(f"no word to search for; {FTS5_EXPECTS}")
    return " ".join(pieces)


class PageIndex:
    """``add`` upserts a page; ``search`` ranks by BM25. Not thread-safe.
    ``readonly``: open an existing index for searching only (``mode=ro``: no
    table made, no journal mode changed); ``sqlite_files.WrongFileError`` if
    ``path`` is not an index."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly:
            self.db = open_readonly(path, INDEX)
            self.folded = self.db.execute("PRAGMA user_version").fetchone()[0] >= FOLDED
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        private_file(path)
        try:
            self.db = sqlite3.connect(path)
            self.db.execute("PRAGMA journal_mode=WAL")
            if not columns_of(self.db, "pages"):  # (a new index: folded from its first row)
                self.db.execute(f"PRAGMA user_version = {FOLDED}")
            self.db.executescript(_SCHEMA)
            self.folded = self.db.execute("PRAGMA user_version").fetchone()[0] >= FOLDED
            self._migrate()
        except sqlite3.OperationalError as exc:  # (a full disk, a read-only directory: name the file)
            raise cannot_open(path, INDEX, exc) from exc

    def _migrate(self) -> None:
        """Add the columns an index made by an older version lacks (one transaction)."""
        have = columns_of(self.db, "pages")
        with self.db:
            for name, kind in _ADDED_COLUMNS.items():
                if name not in have:
                    self.db.execute(f"ALTER TABLE pages ADD COLUMN {name} {kind}")
                    logger.info("index: added the column %s to %s", name, self.path)
            self.db.execute(_INDEXES)

    def add(self, *page: Any) -> None:
        """Upsert one page: ``PageRow``'s fields, in its order."""
        self.add_many([PageRow(*page)])

    def add_many(self, pages: Iterable[PageRow | CanonicalFetched | tuple[Any, ...]]) -> int:
        """Upsert ``pages`` (``PageRow``s, or tuples of its fields in its order) in one
        transaction; a ``CanonicalFetched`` among them goes to ``take_canonical``, in
        order. Returns how many rows took their canonical URL."""
        taken = 0
        with self.db:
            for row in pages:
                if isinstance(row, CanonicalFetched):
                    taken += self._take_canonical(row.page, row.max_distance)
                else:
                    self._upsert(PageRow(*row))
        return taken

    def _upsert(self, p: PageRow) -> None:
        self.db.execute("INSERT OR REPLACE INTO pages (url, title, text, language, fingerprint, fetched_at, "
                        "status, canonical) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (p.url, p.title, p.text, p.language, p.fingerprint, p.fetched_at, p.status, p.canonical))
        self.db.execute("DELETE FROM pages_fts WHERE url = ?", (p.url,))
        self.db.execute("INSERT INTO pages_fts (url, title, body) VALUES (?, ?, ?)",
                        (p.url, _index_text(p.title, self.folded), _index_text(p.text, self.folded)))

    def take_canonical(self, page: PageRow, max_distance: int) -> bool:
        """``page`` was dropped as a near-duplicate. If a row declares ``page``'s URL
        as its canonical URL, on the same host, and its fingerprint is within
        ``max_distance`` bits of ``page``'s, that row becomes ``page`` (its URL, text,
        fingerprint...): the index names the page by the URL the site calls
        canonical. Otherwise (another host, not near-duplicates, no such row, a row
        for ``page``'s URL already there) nothing changes. One indexed look-up."""
        with self.db:
            return bool(self._take_canonical(page, max_distance))

    def _take_canonical(self, page: PageRow, max_distance: int) -> int:
        if not page.fingerprint:
            return 0
        fp = int(page.fingerprint, 16)
        for url, fingerprint in self.db.execute(
                "SELECT url, fingerprint FROM pages WHERE canonical = ? AND url != ?", (page.url, page.url)).fetchall():
            near = bool(fingerprint) and (int(fingerprint, 16) ^ fp).bit_count() <= max_distance
            if not near or not same_host(url, page.url):  # a hint, never proof
                continue
            if self.db.execute("SELECT 1 FROM pages WHERE url = ?", (page.url,)).fetchone():
                return 0
            self.db.execute("DELETE FROM pages WHERE url = ?", (url,))
            self.db.execute("DELETE FROM pages_fts WHERE url = ?", (url,))
            self._upsert(page)
            logger.debug("index: %s takes its canonical URL %s", url, page.url)
            return 1
        return 0

    def search(self, query: str, limit: int = 10) -> list[tuple[str, str, float]]:
        """(url, title, score) of the best matches of ``query`` (FTS5 syntax:
        ``fts5_query``); lower BM25 score is better. ``QueryError`` when FTS5
        cannot read the query."""
        match = fts5_query(query, self.folded)
        try:
            rows = self.db.execute(
                "SELECT f.url, p.title, bm25(pages_fts) AS score FROM pages_fts f JOIN pages p ON p.url = f.url "
                "WHERE pages_fts MATCH ? ORDER BY score LIMIT ?", (match, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            # (FTS5's own words: "fts5: syntax error near ...", "no such column: x")
            if "fts5" in str(exc) or "no such column" in str(exc) or "unterminated" in str(exc):
                raise QueryError(f"{exc}; {FTS5_EXPECTS}") from None
            raise
        return [(u, t, s) for u, t, s in rows]

    def urls(self) -> list[str]:
        return [u for (u,) in self.db.execute("SELECT url FROM pages ORDER BY url")]

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM pages").fetchone()[0]

    def close(self) -> None:
        self.db.close()
