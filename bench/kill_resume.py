"""Kill -9 and resume on a real site: sqlite3-doc served by nginx (issue 14).

    .venv/bin/python bench/kill_resume.py [--trials 3] [--kills 6]

A clean crawl with ``JOBDIR`` gives the pages to keep. Then each trial (seed
= trial number) starts the crawl with a new ``JOBDIR``, kills it with SIGKILL
after a random number of new requests reached nginx (20 to 300), ``--kills``
times, and resumes it until it finishes. Reported per trial: kills, pages in
the index at the end against the clean run (a page counts as kept if it, or a
page within 3 bits of it, is in the index: which member of a near-duplicate
chain wins may differ), pages indexed twice, and the most times one URL was
requested against kills + 1 (from nginx's access log), and the feeds: a JSON
feed appended to across the runs and a JSON lines file per run, each checked
to parse as one document, with the URLs found twice across them and the
kept pages missing from them. The same is run once with Scrapy's own
``JOBDIR`` queues (``NEARDUP_FRONTIER=False``), and once with Scrapy's own
feed storage (at-least-once feeds) beside the durable frontier, for comparison.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from crawl_bench import ROOT, crawl_args, finish, serve_sqlite_doc


#: Scrapy's own local feed storage, in place of the durable one (the at-least-once comparison)
SCRAPY_FEEDS = 'FEED_STORAGES={"": "scrapy.extensions.feedexport.FileFeedStorage", ' \
               '"file": "scrapy.extensions.feedexport.FileFeedStorage"}'


def cmd(url: str, jobdir: Path, concurrency: int, extra: list[str], run: int) -> list[str]:
    feeds = ["-o", f"{jobdir}-feed.json", "-o", f"{jobdir}-runs/run-{run}.jsonl"]
    out = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={url}", *feeds, "-s", f"JOBDIR={jobdir}",
           "-s", "AUTOTHROTTLE_ENABLED=False", "-s", f"CONCURRENT_REQUESTS={concurrency}",
           "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={concurrency}", "-s", "LOG_LEVEL=INFO"]
    for e in extra:
        out += ["-s", e]
    return out


def log_lines(log: Path) -> int:
    with open(log, "rb") as fh:
        return sum(1 for _ in fh)


def run(url: str, jobdir: Path, access: Path, concurrency: int, kills: int, rng: random.Random,
        extra: list[str]) -> dict:
    start_line = log_lines(access)
    done, runs = 0, 0
    t0 = time.perf_counter()
    while True:
        runs += 1
        before = log_lines(access)
        with open(jobdir.parent / f"{jobdir.name}-{runs}.log", "w") as err:
            p = subprocess.Popen(cmd(url, jobdir, concurrency, extra, runs), cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=err)
        if done < kills:
            target = before + rng.randint(20, 300)
            while log_lines(access) < target and p.poll() is None:
                time.sleep(0.01)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
                done += 1
                continue
        p.wait()
        text = (jobdir.parent / f"{jobdir.name}-{runs}.log").read_text()
        if "'finish_reason': 'finished'" in text or runs > kills + 5:
            break
    with open(access, "rb") as fh:
        lines = fh.read().decode("latin-1").splitlines()[start_line:]
    hits = Counter(line.split(" ", 2)[2] for line in lines if line.count(" ") >= 2)
    db = sqlite3.connect(jobdir / "neardup" / "index.sqlite3")
    pages = dict(db.execute("SELECT url, fingerprint FROM pages").fetchall())
    fts = [u for (u,) in db.execute("SELECT url FROM pages_fts")]
    db.close()
    return {"kills": done, "runs": runs, "wall_s": round(time.perf_counter() - t0, 1), "pages": pages,
            "indexed_twice": len(fts) - len(set(fts)), "requests": sum(hits.values()),
            "max_requests_per_url": max(hits.values()),
            "urls_over_kills_plus_1": sum(n > done + 1 for n in hits.values()), **feeds(jobdir, set(pages))}


def feeds(jobdir: Path, indexed: set[str]) -> dict:
    """The feeds of a crawl: each file valid, URLs twice, indexed pages missing."""
    out: dict = {}
    try:
        appended = [item["url"] for item in json.loads(Path(f"{jobdir}-feed.json").read_text())]
        out["json_feed_valid"] = True
    except ValueError:
        appended, out["json_feed_valid"] = [], False
    per_run: list[str] = []
    out["jsonl_files_valid"] = True
    for f in sorted(Path(f"{jobdir}-runs").glob("run-*.jsonl")):
        for line in f.read_text().splitlines():
            try:
                per_run.append(json.loads(line)["url"])
            except ValueError:
                out["jsonl_files_valid"] = False
    for name, urls in (("json_feed", appended), ("jsonl_files", per_run)):
        out[f"{name}_items"] = len(urls)
        out[f"{name}_urls_twice"] = len(urls) - len(set(urls))
        out[f"{name}_indexed_missing"] = len(indexed - set(urls))
    return out


def compare(clean: dict[str, str], got: dict[str, str]) -> dict:
    """Clean-run pages missing from ``got`` (neither it nor a page within 3 bits is there)."""
    fps = [int(f, 16) for f in got.values()]
    missing = [u for u, f in clean.items() if u not in got and not any((int(f, 16) ^ g).bit_count() <= 3
                                                                       for g in fps)]
    return {"clean_pages": len(clean), "pages": len(got), "missing": len(missing), "missing_sample": missing[:5],
            "kept_share": round(1 - len(missing) / len(clean), 4)}


def main() -> None:
    a = crawl_args("bench/results/kill_resume.json", trials=3, kills=6)
    trials, kills = a.trials, a.kills
    work, site, port, nginx = serve_sqlite_doc(a.data, "neardup-kill-", access_log=True)
    url = f"http://127.0.0.1:{port}/index.html"
    access = work / "access.log"
    result: dict = {"trials": [], "kills_per_trial": kills, "concurrency": a.concurrency}
    try:
        clean = run(url, work / "clean", access, a.concurrency, 0, random.Random(0), [])
        print("clean:", len(clean["pages"]), "pages", {k: v for k, v in clean.items() if k != "pages"}, flush=True)
        result["clean"] = {k: v for k, v in clean.items() if k != "pages"}
        for seed in range(1, trials + 1):
            r = run(url, work / f"trial-{seed}", access, a.concurrency, kills, random.Random(seed), [])
            row = {"seed": seed, **{k: v for k, v in r.items() if k != "pages"}, **compare(clean["pages"], r["pages"])}
            result["trials"].append(row)
            print(row, flush=True)
        r = run(url, work / "scrapy-jobdir", access, a.concurrency, kills, random.Random(1), ["NEARDUP_FRONTIER=False"])
        result["scrapy_jobdir"] = {"seed": 1, **{k: v for k, v in r.items() if k != "pages"},
                                   **compare(clean["pages"], r["pages"])}
        print("scrapy's JOBDIR:", result["scrapy_jobdir"], flush=True)
        r = run(url, work / "scrapy-feeds", access, a.concurrency, kills, random.Random(1), [SCRAPY_FEEDS])
        result["scrapy_feed_storage"] = {"seed": 1, **{k: v for k, v in r.items() if k != "pages"},
                                         **compare(clean["pages"], r["pages"])}
        print("scrapy's feed storage:", result["scrapy_feed_storage"], flush=True)
    finally:
        nginx.terminate()
        nginx.wait(10)
    result["clean_pages"] = len(clean["pages"])
    finish(result, a.out, work)


if __name__ == "__main__":
    main()
