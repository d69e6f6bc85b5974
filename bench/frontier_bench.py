"""Crawl throughput with the durable frontier against Scrapy's in-memory queue, same run (issue 14).

    .venv/bin/python bench/frontier_bench.py [--rounds 3]

sqlite3-doc served by nginx; rounds alternate the two modes, same settings
otherwise (filter on, store on disk, index on):

* ``memory``: no JOBDIR: Scrapy's scheduler with its memory queues and RFPDupeFilter;
* ``durable``: JOBDIR: the durable frontier (a commit per request handed out).

Reports pages/s of each (median over rounds) and their ratio (target >= 0.9).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from crawl_bench import ROOT, crawl_args, finish, serve_sqlite_doc


def crawl(url: str, out: Path, durable: bool, concurrency: int) -> dict:
    out.mkdir(parents=True)
    persist = [f"JOBDIR={out / 'job'}"] if durable else [f"NEARDUP_STORE={out / 'store'}"]
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={url}"]
    for s in ["AUTOTHROTTLE_ENABLED=False", f"CONCURRENT_REQUESTS={concurrency}",
              f"CONCURRENT_REQUESTS_PER_DOMAIN={concurrency}", "LOG_LEVEL=INFO", *persist]:
        cmd += ["-s", s]
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if r.returncode or "'finish_reason': 'finished'" not in r.stderr:
        raise RuntimeError(r.stderr[-2000:])
    stats = {"wall_s": time.perf_counter() - t}
    for key in ("response_received_count", "elapsed_time_seconds", "neardup/kept", "neardup/dropped"):
        for line in r.stderr.splitlines():
            if f"'{key}':" in line:
                stats[key] = float(line.split(":")[-1].strip(" ,}"))
    stats["pages_per_s"] = stats["response_received_count"] / stats["elapsed_time_seconds"]
    return stats


def main() -> None:
    a = crawl_args("bench/results/frontier.json")
    a.rounds = max(a.rounds, 3) if "--rounds" not in sys.argv else a.rounds
    work, _site, port, nginx = serve_sqlite_doc(a.data, "neardup-frontier-")
    url = f"http://127.0.0.1:{port}/index.html"
    runs: dict[str, list[dict]] = {"memory": [], "durable": []}
    try:
        for i in range(a.rounds):
            for mode in (("memory", "durable") if i % 2 == 0 else ("durable", "memory")):
                out = work / f"{mode}-{i}"
                shutil.rmtree(out, ignore_errors=True)
                runs[mode].append(crawl(url, out, mode == "durable", a.concurrency))
                print(mode, runs[mode][-1], flush=True)
    finally:
        nginx.terminate()
        nginx.wait(10)
    result = {f"{m}_pages_per_s": statistics.median(r["pages_per_s"] for r in rs) for m, rs in runs.items()}
    result["ratio"] = result["durable_pages_per_s"] / result["memory_pages_per_s"]
    result["runs"] = runs
    finish(result, a.out, work)


if __name__ == "__main__":
    main()
