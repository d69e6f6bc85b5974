"""``neardup search INDEX QUERY``: the index of kept pages, read-only (FTS5 syntax)."""

from __future__ import annotations

import argparse
import sqlite3

from .common import fail, whole


def search(index: str, query: str, limit: int) -> int:
    """Print the best matches of ``query`` in ``index``: 0 found, 1 no match
    ("no match" on stderr, stdout empty, as grep), 2 not an index or a bad query."""
    from ..index import PageIndex, QueryError
    from ..sqlite_files import WrongFileError

    try:
        idx = PageIndex(index, readonly=True)
    except WrongFileError as exc:
        return fail("search", str(exc))
    try:
        rows = idx.search(query, limit)
    except QueryError as exc:
        return fail("search", f"bad query {query!r}: {exc}")
    except sqlite3.DatabaseError as exc:  # (a damaged file)
        return fail("search", f"{index} cannot be searched: {exc}")
    finally:
        idx.close()
    if not rows:
        return fail("search", f"no match for {query!r} in {index}", 1)
    for url, title, score in rows:
        print(f"{score:8.3f}  {url}  {title}")
    return 0


def command(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neardup search", description=(
        "search the index of kept pages (BM25 order). QUERY is FTS5 syntax: words (all must match), "
        '"a phrase", prefix*, AND / OR / NOT, NEAR(a b), title:word or body:word, parentheses. '
        "Exit status: 0 found, 1 no match, 2 not an index or a bad query."))
    p.add_argument("index", help="the index: DIR/index.sqlite3 of neardup crawl, or NEARDUP_INDEX")
    p.add_argument("query", nargs="+", help="the query (several arguments are joined with spaces)")
    p.add_argument("--limit", type=whole(1), default=10, help="at most this many results (default 10)")
    a = p.parse_args(argv)
    return search(a.index, " ".join(a.query), a.limit)
