"""The embedded index of kept pages: SQLite with FTS5 full-text search.

One document per URL, replaced on re-crawl. Search it with
``python -m crawler search INDEX QUERY`` (FTS5 query syntax). Chinese text
is indexed as jieba words separated by spaces (FTS5's tokenizer splits on
spaces but not between Han characters), and queries are segmented the same way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from scrapy_neardup.dedup.features.tokens import tokenize
from scrapy_neardup.dedup.store.backends import private_file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    url TEXT PRIMARY KEY, title TEXT, text TEXT, fingerprint TEXT, fetched_at TEXT, status INTEGER);
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(url UNINDEXED, title, body, tokenize='unicode61');
"""


def _index_text(text: str) -> str:
    return " ".join(tokenize(text))


class PageIndex:
    """``add`` upserts a page; ``search`` ranks by BM25. Not thread-safe."""

    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        private_file(path)
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(_SCHEMA)

    def add(self, url: str, title: str, text: str, fingerprint: str, fetched_at: str, status: int) -> None:
        self.add_many([(url, title, text, fingerprint, fetched_at, status)])

    def add_many(self, pages: list[tuple[str, str, str, str, str, int]]) -> None:
        """Upsert ``(url, title, text, fingerprint, fetched_at, status)`` rows in one transaction."""
        with self.db:
            for url, title, text, fingerprint, fetched_at, status in pages:
                self.db.execute("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?)",
                                (url, title, text, fingerprint, fetched_at, status))
                self.db.execute("DELETE FROM pages_fts WHERE url = ?", (url,))
                self.db.execute("INSERT INTO pages_fts (url, title, body) VALUES (?, ?, ?)",
                                (url, _index_text(title), _index_text(text)))

    def search(self, query: str, limit: int = 10) -> list[tuple[str, str, float]]:
        """(url, title, score) of the best matches; lower BM25 score is better."""
        terms = " ".join(f'"{t}"' for t in tokenize(query))
        if not terms:
            return []
        rows = self.db.execute(
            "SELECT f.url, p.title, bm25(pages_fts) AS score FROM pages_fts f JOIN pages p ON p.url = f.url "
            "WHERE pages_fts MATCH ? ORDER BY score LIMIT ?", (terms, limit)).fetchall()
        return [(u, t, s) for u, t, s in rows]

    def urls(self) -> list[str]:
        return [u for (u,) in self.db.execute("SELECT url FROM pages ORDER BY url")]

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM pages").fetchone()[0]

    def close(self) -> None:
        self.db.close()
