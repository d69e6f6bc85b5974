"""The dedup command line, run as a real subprocess."""

from __future__ import annotations

import gzip
import subprocess
import sys

from tests.fixtures.pages import EN_PAGE
from tests.test_fingerprint import GOLDEN_EN


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scrapy_neardup.dedup", *args], capture_output=True, text=True, timeout=120)


def test_fingerprint_lines(tmp_path):
    a = tmp_path / "a.html"
    a.write_bytes(EN_PAGE)
    g = tmp_path / "b.html.gz"
    g.write_bytes(gzip.compress(EN_PAGE))
    short = tmp_path / "short.html"
    short.write_bytes(b"<p>hi</p>")
    missing = tmp_path / "missing.html"
    r = run("fingerprint", str(a), str(g), str(short), str(missing))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"{GOLDEN_EN}\t{a}", f"{GOLDEN_EN}\t{g}", f"-\t{short}\ttoo_short",
        f"-\t{missing}\tunreadable: FileNotFoundError"]


def test_distance():
    r = run("distance", "00000000000000ff", "000000000000000f")
    assert (r.returncode, r.stdout) == (0, "4\n")
    assert run("distance", "xyz", "0").returncode == 2


def test_neardup_crawl_of_urls_goes_on_where_it_stopped(tmp_path):
    """``neardup crawl URL`` keeps its JOBDIR in --out: run again after a stop, it
    resumes (nothing fetched twice but what was in flight) and the feed grows."""
    import json
    import sqlite3

    from tests.fixtures.dup_site import DupSite

    site = DupSite(n=30, delay=(0, 0.005))
    out = tmp_path / "out"
    with site.serve() as server:
        cmd = [sys.executable, "-m", "scrapy_neardup", "crawl", f"{server.url}/a/0.html", "--out", str(out),
               "-s", "AUTOTHROTTLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False"]
        first = subprocess.run(cmd + ["-s", "CLOSESPIDER_PAGECOUNT=8"], capture_output=True, text=True, timeout=300)
        assert "goes on where it stopped" in first.stdout, first.stderr[-2000:]
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr[-2000:]
        assert "'finish_reason': 'finished'" in second.stderr
        fetched_twice = [p for p, n in server.hits.items() if n > 1]
    assert len(fetched_twice) <= 4, fetched_twice  # (only what was in flight at the stop: 4 per domain)
    db = sqlite3.connect(out / "index.sqlite3")
    indexed = {u.split("/", 3)[3] for (u,) in db.execute("SELECT url FROM pages")}
    assert all(len({p.lstrip("/") for p in g} & indexed) == 1 for g in site.groups())
    feed = {json.loads(line)["url"] for line in (out / "pages.jsonl").read_text().splitlines()}
    assert len(feed) == len(site.groups())
