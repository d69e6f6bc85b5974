"""``neardup``: the command line (also ``python -m crawler``).

    neardup crawl [URL ...] [--out DIR]   # crawl these sites; no URL: serve the demo site on 127.0.0.1 and crawl it
    neardup search INDEX WORDS            # search the index of kept pages
    neardup rules FILE|DIR|URL            # the URL rules a crawl learned (DIR: --out, store; URL: redis://)
    neardup warmup                        # compile the numba kernels now (else the first crawl does, off its thread)
    neardup fingerprint PATH... | distance HEX HEX | scheme   # the library's commands (python -m dedup)

``crawl`` runs Scrapy in this process (``CrawlerProcess``) with the ready
spider (``crawler.spiders.site``), both add-ons (the filter and the polite
profile) and no Scrapy project, from any directory. It writes kept pages to
``DIR/pages.jsonl``, the full-text index to ``DIR/index.sqlite3``, the
fingerprint store to ``DIR/store`` (persistent: a second run skips what the
first kept) and every drop to ``DIR/store/duplicates.jsonl``. DIR defaults to
``./out/crawl`` (``./out/demo`` for the demo, which starts from nothing each time).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

USAGE = __doc__.split("\n\n")[1]


def crawl(urls: list[str], out: Path, settings: dict[str, str], spider_args: dict[str, str],
          resumable: bool = True) -> int:
    """Crawl ``urls`` into ``out``; returns 0, or 1 when the crawl failed to run.
    ``resumable``: with ``out/job`` as JOBDIR (the durable frontier), so that the
    same command after a kill goes on where it stopped, and the feed is appended to."""
    from scrapy.crawler import CrawlerProcess
    from scrapy.settings import Settings

    from .spiders.site import SiteSpider

    out.mkdir(parents=True, exist_ok=True)
    s = Settings()
    s.setdict({
        "ADDONS": {"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.PoliteCrawlAddon": 0},
        "FEEDS": {str(out / "pages.jsonl"): {"format": "jsonlines", "overwrite": not resumable,
                                             "encoding": "utf-8"}},
        "NEARDUP_STORE": str(out / "store"),
        **({"JOBDIR": str(out / "job")} if resumable else {}),
        "NEARDUP_INDEX": str(out / "index.sqlite3"),
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
    }, priority="project")
    s.setdict(settings, priority="cmdline")
    process = CrawlerProcess(s)
    crawler = process.create_crawler(SiteSpider)
    process.crawl(crawler, start_url=",".join(urls), **spider_args)
    process.start()
    return 0 if crawler.stats.get_value("finish_reason") else 1


def report(out: Path) -> None:
    pages = out / "pages.jsonl"
    dups = out / "store" / "duplicates.jsonl"
    kept = [json.loads(line) for line in pages.read_text().splitlines()] if pages.exists() else []
    records = [json.loads(line) for line in dups.read_text().splitlines()] if dups.exists() else []
    dropped = [d for d in records if not d.get("avoided")]
    avoided = [d for d in records if d.get("avoided")]
    print(f"\nkept {len(kept)} pages -> {pages}")
    print(f"dropped {len(dropped)} near-duplicates -> {dups}")
    for d in dropped:
        print(f"  {d['url']}\n    duplicates {d['duplicate_of']} (distance {d['distance']})")
    if avoided:
        print(f"not requested: {len(avoided)} URLs that learned rules map onto fetched pages "
              f"(neardup rules {out / 'store'})")
    print(f"search the index: neardup search {out / 'index.sqlite3'} WORDS")


def search(index: str, query: str, limit: int) -> int:
    from .index import PageIndex

    if not Path(index).exists():
        print(f"no index at {index}", file=sys.stderr)
        return 2
    idx = PageIndex(index)
    for url, title, score in idx.search(query, limit):
        print(f"{score:8.3f}  {url}  {title}")
    idx.close()
    return 0


def rules(where: str, min_evidence: int) -> int:
    from scrapy_neardup.dedup.store.redis_store import is_redis_url

    from .url_rules.book import list_rules

    path = Path(where)
    if is_redis_url(where):
        candidate: str | Path = where
    else:
        for candidate in (path, path / "url_rules.sqlite3", path / "store" / "url_rules.sqlite3",
                          path / "neardup" / "url_rules.sqlite3", path / "job" / "neardup" / "url_rules.sqlite3"):
            if candidate.is_file():
                break
        else:
            print(f"no URL rules at {where}", file=sys.stderr)
            return 2
    for r in list_rules(candidate, min_evidence=min_evidence):
        print(f"{r['state']:<9} {r['evidence']:>6} agree {r['counter_examples']:>3} against "
              f"{r['avoided']:>6} avoided  {r['rule']}")
        if r["counter_example"]:
            print(f"{'':>9} counter-example: {r['counter_example']}")
    return 0


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name:
            raise SystemExit(f"neardup crawl: {flag} takes NAME=VALUE, got {v!r}")
        out[name] = value
    return out


def _cmd_crawl(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neardup crawl", description="crawl sites with the near-duplicate filter")
    p.add_argument("urls", nargs="*", help="start URLs; none: the built-in demo site")
    p.add_argument("--out", default=None, help="output directory (default ./out/crawl, or ./out/demo)")
    p.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a Scrapy setting for the crawl (repeatable)")
    p.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="a spider argument: allow, deny, max_depth, max_pages, stay_on_host (repeatable)")
    a = p.parse_args(argv)
    settings, spider_args = _pairs(a.set, "-s"), _pairs(a.arg, "-a")
    if a.urls:
        out = Path(a.out or Path("out") / "crawl")
        rc = crawl(a.urls, out, settings, spider_args)
        report(out)
        print(f"killed or stopped? the same command goes on where it stopped; to start over, remove {out}")
        return rc
    from .demo_site import DemoSite

    out = Path(a.out or Path("out") / "demo")
    shutil.rmtree(out, ignore_errors=True)  # the demo starts from nothing each time
    with DemoSite().serve() as server:
        print(f"demo site serving on {server.url}", flush=True)
        rc = crawl([server.url], out, {"AUTOTHROTTLE_ENABLED": "False", **settings}, spider_args, resumable=False)
    report(out)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd, rest = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "crawl":
        return _cmd_crawl(rest)
    if cmd == "search":
        p = argparse.ArgumentParser(prog="neardup search", description="search the index of kept pages")
        p.add_argument("index")
        p.add_argument("query", nargs="+")
        p.add_argument("--limit", type=int, default=10)
        a = p.parse_args(rest)
        return search(a.index, " ".join(a.query), a.limit)
    if cmd == "rules":
        p = argparse.ArgumentParser(prog="neardup rules", description="the URL rules a crawl learned")
        p.add_argument("where", help="the rule book (url_rules.sqlite3, or the directory that holds it), "
                                     "or the shared store's redis:// URL")
        p.add_argument("--min-evidence", type=int, default=10, help="NEARDUP_URL_RULES_MIN_EVIDENCE of the crawl")
        a = p.parse_args(rest)
        return rules(a.where, a.min_evidence)
    if cmd in ("warmup", "fingerprint", "distance", "scheme"):
        from scrapy_neardup.dedup.cli import main as dedup_main

        return dedup_main(argv)
    print(USAGE, file=sys.stderr if cmd not in ("-h", "--help") else sys.stdout)
    return 0 if cmd in ("-h", "--help") else 2
