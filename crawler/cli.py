"""``python -m crawler``: the main job behind ``bash run.sh``.

    python -m crawler                      # serve the demo site on 127.0.0.1 and crawl it
    python -m crawler URL [URL ...]        # crawl these sites (stays on their hosts)
    python -m crawler search INDEX QUERY   # search the index of kept pages

Crawls run as a real ``scrapy crawl site`` in this project, writing kept
pages to ``OUT/pages.jsonl``, the index to ``OUT/index.sqlite3``, the
fingerprint store to ``OUT/store`` (persistent: a second run skips what the
first kept) and every drop to ``OUT/store/duplicates.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def crawl(urls: list[str], out: Path, extra: Sequence[str] = ()) -> int:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", "start_url=" + ",".join(urls),
           "-O", str(out / "pages.jsonl"), "-s", f"NEARDUP_STORE={out / 'store'}",
           "-s", f"NEARDUP_INDEX={out / 'index.sqlite3'}", *extra]
    print("running:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def report(out: Path) -> None:
    pages = out / "pages.jsonl"
    dups = out / "store" / "duplicates.jsonl"
    kept = [json.loads(line) for line in pages.read_text().splitlines()] if pages.exists() else []
    dropped = [json.loads(line) for line in dups.read_text().splitlines()] if dups.exists() else []
    print(f"\nkept {len(kept)} pages -> {pages}")
    print(f"dropped {len(dropped)} near-duplicates -> {dups}")
    for d in dropped:
        print(f"  {d['url']}\n    duplicates {d['duplicate_of']} (distance {d['distance']})")
    python = Path(sys.executable)
    if python.is_relative_to(ROOT):  # .venv/bin/python, as the user would type it from the project
        python = python.relative_to(ROOT)
    print(f"search the index: {python} -m crawler search {out / 'index.sqlite3'} WORDS")


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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["search"]:
        p = argparse.ArgumentParser(prog="python -m crawler search")
        p.add_argument("index")
        p.add_argument("query", nargs="+")
        p.add_argument("--limit", type=int, default=10)
        a = p.parse_args(argv[1:])
        return search(a.index, " ".join(a.query), a.limit)
    p = argparse.ArgumentParser(prog="python -m crawler", description=__doc__.split("\n")[0])
    p.add_argument("urls", nargs="*", help="start URLs; none: the built-in demo site")
    p.add_argument("--out", default=None, help="output directory (default out/crawl, or out/demo)")
    p.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a Scrapy setting for the crawl (repeatable)")
    a = p.parse_args(argv)
    extra = [x for s in a.set for x in ("-s", s)]
    if a.urls:
        out = Path(a.out or ROOT / "out" / "crawl")
        rc = crawl(a.urls, out, extra)
        report(out)
        return rc
    from .demo_site import DemoSite

    out = Path(a.out or ROOT / "out" / "demo")
    shutil.rmtree(out, ignore_errors=True)  # the demo starts from nothing each time
    with DemoSite().serve() as server:
        print(f"demo site serving on {server.url}", flush=True)
        rc = crawl([server.url], out, ["-s", "AUTOTHROTTLE_ENABLED=False", *extra])
    report(out)
    return rc
