"""What the URL rules cost the crawl's thread (issue 16): a page's outlinks
looked up against the active rules of their host, and a checked page told to
the rule book, in memory (SQLite), per page.

    .venv/bin/python bench/url_rules_cost.py

Three active rules on one host (a parameter, an ``index.html`` alias, a
mirrored prefix); pages of 100 outlinks, first seen (every URL new) and seen
again (as the outlinks of a site's navigation come again on every page).

And the learning on a file (``learning``): the rule book in a SQLite file,
as a crawl with a store directory has it, told about the pages of
``crawl_bench.generate_outlink_site`` in a random order (every third page a
near-duplicate of the page before it: ``/p/5.html`` = ``/p/4.html``, a suffix
rule suggested per pair), its commits included; ``time.thread_time`` per page.

    .venv/bin/python bench/url_rules_cost.py --learning [--pages 20000]

And the outlinks of a host with a suffix rule acting per numbered pair (256,
the cap), looked up through the book's index of what the rules touch, against
a pass over the host's acting rules (``--many-rules``).
"""

from __future__ import annotations

import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.crawler.url_rules import RuleBook  # noqa: E402
from scrapy_neardup.crawler.url_rules.rules import touches  # noqa: E402

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


def learning(pages: int = 2000, seed: int = 1) -> dict:
    """CPU ms per page the rule book's learning takes on a file (see the module docstring)."""
    rng = random.Random(seed)
    order = list(range(pages))
    rng.shuffle(order)
    fps = {}
    for i in range(pages):
        fps[i] = fps[i - 1] ^ 1 if i % 3 == 2 else rng.getrandbits(64)
    seen: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        book = RuleBook(Path(tmp) / "url_rules.sqlite3", min_evidence=10, explore=0.05)
        t = time.thread_time()
        for i in order:
            twin = i - 1 if i % 3 == 2 else i + 1 if i % 3 == 1 else None
            dup = f"{H}/p/{twin}.html" if twin is not None and twin in seen and twin < pages else None
            book.observe(f"{H}/p/{i}.html", fps[i], dup)
            seen.add(i)
        book.close()
        cpu = time.thread_time() - t
    return {"pages": pages, "rules": len(book.rules()), "cpu_ms_per_page": round(cpu / pages * 1000, 4)}


def many_rules(seed: int = 1) -> dict:
    """ms per page of 100 outlinks looked up when a host has a suffix rule acting per
    numbered pair (``/5.html`` -> ``/4.html``, seen in three folders: 256 rules, the cap),
    through the book's index and by a pass over the host's acting rules (the
    look-up before the index), alternately, three rounds each."""
    rng = random.Random(seed)
    logging.disable(logging.WARNING)  # (a line per rule learned)
    book = RuleBook(None, min_evidence=2, explore=0.0)
    fp = 1 << 20
    for d in ("p", "q", "r"):
        for n in range(0, 600, 2):  # (pairs 0=1, 2=3...: no page in two pairs)
            fp += 1 << 12
            book.observe(f"{H}/{d}/{n}.html", fp)
            book.observe(f"{H}/{d}/{n + 1}.html", fp, duplicate_of=f"{H}/{d}/{n}.html")
    acting = len(book._acting_for("h.test"))
    links = [[f"{H}/{rng.choice('pqrs')}/{rng.randrange(2000)}.html" for _ in range(100)] for _ in range(100)]
    indexed = book._acting_touching
    look: dict[str, list[float]] = {"index": [], "scan": []}
    for _ in range(3):
        for mode in ("index", "scan"):
            if mode == "index":
                book._acting_touching = indexed  # type: ignore[method-assign]
            else:
                book._acting_touching = lambda host, path: [  # type: ignore[method-assign]
                    st for st in book._acting_for(host) if touches(st.rule, path)]
            t = time.thread_time()
            for urls in links:
                book.avoid_many(urls)
            look[mode].append((time.thread_time() - t) / len(links) * 1000)
    book.close()
    return {"acting_rules": acting, "ms_per_page_100_outlinks_index": round(sorted(look["index"])[1], 3),
            "ms_per_page_100_outlinks_scan": round(sorted(look["scan"])[1], 3)}


def main() -> None:
    if "--many-rules" in sys.argv:
        out = {"command": " ".join(["bench/url_rules_cost.py", *sys.argv[1:]]), **many_rules()}
        print(json.dumps(out, indent=1))
        Path("bench/results/url_rules_many.json").write_text(json.dumps(out, indent=1))
        return
    if "--learning" in sys.argv:
        pages = int(sys.argv[sys.argv.index("--pages") + 1]) if "--pages" in sys.argv else 2000
        runs = [learning(pages, seed) for seed in (1, 2, 3)]
        out = {"command": " ".join(["bench/url_rules_cost.py", *sys.argv[1:]]), "runs": runs,
               "cpu_ms_per_page_median": sorted(r["cpu_ms_per_page"] for r in runs)[1]}
        print(json.dumps(out, indent=1))
        Path(f"bench/results/url_rules_learning_{pages}.json").write_text(json.dumps(out, indent=1))
        return

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
