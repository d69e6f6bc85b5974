"""``neardup rules FILE|DIR|URL``: the URL rules a crawl learned, read-only."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from .common import crawl_out_of_jobdir, fail, whole


def _rule_book(where: str) -> Path | str | None:
    """The rule book ``where`` names: a redis:// URL, a file, or the book in a
    directory a crawl wrote (--out, a store, a JOBDIR); None if there is none."""
    from scrapy_neardup.dedup.store.redis import is_redis_url

    if is_redis_url(where):
        return where
    path = Path(where)
    path = crawl_out_of_jobdir(path) or path  # (neardup crawl's JOBDIR: its book is in the --out's store/)
    for candidate in (path, path / "url_rules.sqlite3", path / "store" / "url_rules.sqlite3",
                      path / "neardup" / "url_rules.sqlite3", path / "job" / "neardup" / "url_rules.sqlite3"):
        if candidate.is_file():
            return candidate
    return None


def rules(where: str, min_evidence: int | None) -> int:
    """List the rules of a rule book, read-only: 0 listed (none yet, too), 1 its Redis cannot be reached,
    2 no book there."""
    from scrapy_neardup.dedup.store import StoreError, StoreUnavailable

    from ..sqlite_files import WrongFileError
    from ..url_rules.book import list_rules

    location = _rule_book(where)
    if location is None:
        why = "no such file or directory" if not Path(where).exists() else \
            "not in it, its store/ or job/neardup/" if Path(where).is_dir() else "not a file"
        return fail("rules", f"no URL rules at {where} (url_rules.sqlite3: {why})")
    try:
        listed = list_rules(location, min_evidence=min_evidence)
    except StoreUnavailable as exc:  # (asked rightly: the Redis is down, or not there)
        return fail("rules", str(exc), code=1)
    except (WrongFileError, StoreError) as exc:  # (StoreError: redis:// without the redis package)
        return fail("rules", str(exc))
    except sqlite3.DatabaseError as exc:
        return fail("rules", f"{location} cannot be read: {exc}")
    if not listed:
        print(f"neardup rules: no rules learned yet in {location}", file=sys.stderr)
    for r in listed:
        print(f"{r['state']:<9} {r['evidence']:>6} agree {r['counter_examples']:>3} against "
              f"{r['avoided']:>6} avoided  {r['rule']}")
        if r["counter_example"]:
            print(f"{'':>9} counter-example: {r['counter_example']}")
        if r["confirmation_off"] and r["state"] == "active":
            print(f"{'':>9} acts only through confirmation by content, off in the crawl that wrote this book "
                  "(NEARDUP_URL_RULES_CONFIRM_BYTES = 0): it leaves nothing out there")
    return 0


def command(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neardup rules", description=(
        "the URL rules a crawl learned, each with its state (candidate, active, pinned, retired), the pairs "
        "that agree and disagree, and the requests it avoided; read-only"))
    p.add_argument("where", help="the rule book (url_rules.sqlite3, or the directory that holds it), "
                                 "or the shared store's redis:// URL")
    p.add_argument("--min-evidence", type=whole(1), default=None,
                   help="agreeing pairs that make a rule active (default: the crawl's "
                        "NEARDUP_URL_RULES_MIN_EVIDENCE, as its book keeps it)")
    a = p.parse_args(argv)
    return rules(a.where, a.min_evidence)
