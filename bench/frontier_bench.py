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

from crawl_bench import crawl, crawl_args, finish, serve_sqlite_doc


def main() -> None:
    a = crawl_args("bench/results/frontier.json", rounds=3)
    work, _site, port, nginx = serve_sqlite_doc(a.data, "neardup-frontier-")
    url = f"http://127.0.0.1:{port}/index.html"
    runs: dict[str, list[dict]] = {"memory": [], "durable": []}
    try:
        for i in range(a.rounds):
            for mode in (("memory", "durable") if i % 2 == 0 else ("durable", "memory")):
                out = work / f"{mode}-{i}"
                shutil.rmtree(out, ignore_errors=True)
                persist = f"JOBDIR={out / 'job'}" if mode == "durable" else f"NEARDUP_STORE={out / 'store'}"
                runs[mode].append(crawl(url, out, a.concurrency, [persist]))
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
