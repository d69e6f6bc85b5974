"""What the URL rules cost the crawl's thread (issue 16): a page's outlinks
looked up against the active rules of their host, and a checked page told to
the rule book, in memory (SQLite), per page.

    .venv/bin/python bench/url_rules_cost.py

Three active rules on one host (a parameter, an ``index.html`` alias, a
mirrored prefix); pages of 100 outlinks, first seen (every URL new) and seen
again (as the outlinks of a site's navigation come again on every page).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.crawler.url_rules import RuleBook  # noqa: E402

H = "http://h.test"


def measure() -> dict:
    book = RuleBook(None, min_evidence=2, explore=0.0)
    for i in range(5):
        book.observe(f"{H}/a{i}.html", 1000 + i)
        book.observe(f"{H}/a{i}.html?sid={i}", 1000 + i, duplicate_of=f"{H}/a{i}.html")
        book.observe(f"{H}/d{i}/index.html", 5000 + i)
        book.observe(f"{H}/d{i}/", 5000 + i, duplicate_of=f"{H}/d{i}/index.html")
        book.observe(f"{H}/m/x{i}.html", 9000 + i)
        book.observe(f"{H}/x{i}.html", 9000 + i, duplicate_of=f"{H}/m/x{i}.html")
    active = [st.rule.spec for st in book.rules() if st.acting]
    pages = [[f"{H}/p{j}/{i}.html?q={i}" for i in range(100)] for j in range(50)]
    from scrapy_neardup.crawler.url_rules import rules

    if hasattr(rules.parts_of, "cache_clear"):
        rules.parts_of.cache_clear()
    t = time.perf_counter()
    for urls in pages:
        book.avoid_many(urls)
    first = (time.perf_counter() - t) / len(pages) * 1000
    t = time.perf_counter()
    for urls in pages:
        book.avoid_many(urls)
    again = (time.perf_counter() - t) / len(pages) * 1000
    t = time.perf_counter()
    for i in range(2000):
        book.observe(f"{H}/z{i}.html", i * 7919)
    observe = (time.perf_counter() - t) / 2000 * 1000
    return {"active_rules": active, "ms_per_page_100_new_outlinks": first,
            "ms_per_page_100_outlinks_seen_before": again, "ms_per_observe": observe}


def main() -> None:
    """Alternately with and without the cache of canonicalised URLs (the
    baseline: w3lib once per URL and rule), three rounds each."""
    from scrapy_neardup.crawler.url_rules import book, rules

    cached = rules.parts_of
    out: dict = {"command": "bench/url_rules_cost.py", "cached": [], "uncached": []}
    for _ in range(3):
        for mode in ("cached", "uncached"):
            rules.parts_of = book.parts_of = cached if mode == "cached" else cached.__wrapped__
            out[mode].append(measure())
    rules.parts_of = book.parts_of = cached
    for mode in ("cached", "uncached"):
        for key in ("ms_per_page_100_new_outlinks", "ms_per_page_100_outlinks_seen_before", "ms_per_observe"):
            out[f"{mode}_{key}_median"] = sorted(r[key] for r in out[mode])[1]
    print(json.dumps({k: v for k, v in out.items() if k not in ("cached", "uncached")}, indent=1))
    Path("bench/results/url_rules_cost.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
