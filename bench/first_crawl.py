"""The first crawl after ``pip install``: a cold compiled-code cache against a warm one.

    .venv/bin/python bench/first_crawl.py [--rounds 2]

Builds a new Scrapy project (``scrapy startproject``, the one ``ADDONS``
line, a spider that follows every link) in a temporary directory, serves
``../shared/data/sites/sqlite3-doc.tar.gz`` with nginx on 127.0.0.1, and
crawls the whole site alternately with an empty ``NUMBA_CACHE_DIR`` (cold:
the kernels compile during the crawl) and with the cache that run filled
(warm: after ``neardup warmup`` has completed that cache, since a cold
crawl shorter than the compiling leaves it partly filled). Reports each run's wall time, the longest gap between two requests
nginx served (a stall of the crawl's thread shows there), and the pages kept
and dropped, which must be the same.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from crawl_bench import crawl_args, finish, serve_sqlite_doc  # noqa: E402

SPIDER = '''
import scrapy
from scrapy.linkextractors import LinkExtractor


class SiteSpider(scrapy.Spider):
    name = "site"
    allowed_domains = ["127.0.0.1"]  # the served site only: no request leaves loopback

    def __init__(self, start="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        if b"html" not in response.headers.get("Content-Type", b""):
            return
        yield {"url": response.url, "title": None, "text": None, "fingerprint": None}
        for link in LinkExtractor().extract_links(response):
            yield response.follow(link, callback=self.parse)
'''


def new_project(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "scrapy", "startproject", "firstcrawl"], cwd=where, check=True,
                   capture_output=True)
    project = where / "firstcrawl"
    settings = project / "firstcrawl" / "settings.py"
    settings.write_text(settings.read_text() + '\nADDONS = {"scrapy_neardup.NearDupAddon": 0}\n')
    (project / "firstcrawl" / "spiders" / "site.py").write_text(SPIDER)
    return project


def stat(log: str, name: str) -> float | None:
    for line in log.splitlines():
        if f"'{name}':" in line:
            return float(line.split(":")[-1].strip(" ,}"))
    return None


def run(project: Path, url: str, cache: Path, log: Path, concurrency: int) -> dict:
    log.write_text("")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start={url}",
                        "-s", "DOWNLOAD_DELAY=0", "-s", f"CONCURRENT_REQUESTS={concurrency}",
                        "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={concurrency}", "-s", "ROBOTSTXT_OBEY=False",
                        "-s", "LOG_LEVEL=INFO"], cwd=project, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    times = sorted(float(line.split()[0]) for line in log.read_text().splitlines() if line.strip())
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"wall_s": round(wall, 2), "requests": len(times), "longest_gap_s": round(max(gaps), 3),
            "kept": stat(r.stderr, "neardup/kept"), "dropped": stat(r.stderr, "neardup/dropped"),
            "in_thread_while_workers_start": stat(r.stderr, "neardup/fingerprinted_while_workers_start")}


def main() -> None:
    a = crawl_args("bench/results/first_crawl.json")
    work, _, port, nginx = serve_sqlite_doc(a.data, "neardup-first-", access_log=True)
    access = work / "access.log"
    project = new_project(work)
    url = f"http://127.0.0.1:{port}/index.html"
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    try:
        for i in range(a.rounds):
            cache = work / f"cache-{i}"
            for mode in ("cold", "warm"):
                if mode == "warm":  # complete the cache the cold run began
                    subprocess.run([sys.executable, "-m", "scrapy_neardup.dedup", "warmup"], check=True, capture_output=True,
                                   env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
                runs[mode].append(run(project, url, cache, access, a.concurrency))
                print(mode, json.dumps(runs[mode][-1]), flush=True)
    finally:
        nginx.terminate()
        nginx.wait(10)
    result = {
        "cold_wall_s": statistics.median(r["wall_s"] for r in runs["cold"]),
        "warm_wall_s": statistics.median(r["wall_s"] for r in runs["warm"]),
        "longest_gap_s": max(r["longest_gap_s"] for rs in runs.values() for r in rs),
        "runs": runs,
    }
    result["cold_over_warm"] = result["cold_wall_s"] / result["warm_wall_s"]
    finish(result, a.out, work)


if __name__ == "__main__":
    main()
