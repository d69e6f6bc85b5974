"""Memory and disk of the seen set and the queue at 1M URLs (issue 14).

    .venv/bin/python bench/frontier_memory.py [--urls 1000000]

Each variant runs in a process of its own: a Scrapy crawler (no engine)
whose scheduler takes ``--urls`` distinct requests (``enqueue_request``:
the dupe filter and the queue) and then hands them all out
(``next_request``; the durable one is told each request is done, as the
crawl's acknowledgement middlewares would). Reported: the growth of peak RSS
after queueing and at the end, bytes on disk with all queued, and enqueue /
dequeue rates.

* ``durable``: DurableScheduler + DurableDupeFilter (SQLite under JOBDIR);
* ``scrapy-jobdir``: Scrapy's scheduler with JOBDIR (RFPDupeFilter + pickle disk queues);
* ``scrapy-memory``: Scrapy's scheduler without JOBDIR (memory queues).

Scrapy's variants use ``ScrapyPriorityQueue``: its default
``DownloaderAwarePriorityQueue`` needs a running engine (the durable
scheduler falls back to the host name as the slot without one).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time, os
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler
from scrapy.utils.misc import load_object

class S(Spider):
    name = "s"

variant, n, jobdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
settings = {"LOG_ENABLED": False}
if variant == "durable":
    settings.update(JOBDIR=jobdir, SCHEDULER="scrapy_neardup.crawler.frontier.scheduler.DurableScheduler",
                    DUPEFILTER_CLASS="scrapy_neardup.crawler.frontier.dupefilter.DurableDupeFilter")
else:  # (Scrapy's default DownloaderAwarePriorityQueue needs a running engine)
    settings.update(SCHEDULER_PRIORITY_QUEUE="scrapy.pqueues.ScrapyPriorityQueue")
    if variant == "scrapy-jobdir":
        settings.update(JOBDIR=jobdir)
crawler = get_crawler(S, settings)
crawler.spider = S()
reqs = (Request(f"http://host{i % 50}.test/page/{i}?q={i * 7}") for i in range(n))
sched = load_object(crawler.settings["SCHEDULER"]).from_crawler(crawler)
sched.open(crawler.spider)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
for r in reqs:
    sched.enqueue_request(r)
enq = time.perf_counter() - t
peak_enq = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
disk = sum(f.stat().st_size for f in Path(jobdir).rglob("*") if f.is_file()) if variant != "scrapy-memory" else 0
t = time.perf_counter()
got = 0
while (r := sched.next_request()) is not None:
    got += 1
    if variant == "durable":  # the crawl would say the request is done (here: no items, output ended)
        sched.tracker.output_done(r.meta["neardup_frontier_id"])
deq = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sched.close("finished")
print(json.dumps({"variant": variant, "urls": n, "dequeued": got, "rss_growth_mb_after_enqueue": round((peak_enq - base) / 1024, 1),
                  "rss_growth_mb_peak": round((peak - base) / 1024, 1), "disk_mb_queued": round(disk / 1e6, 1),
                  "enqueue_per_s": round(n / enq), "dequeue_per_s": round(got / deq)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--out", default="bench/results/frontier_memory.json")
    a = ap.parse_args()
    rows = []
    for variant in ("durable", "scrapy-jobdir", "scrapy-memory"):
        with tempfile.TemporaryDirectory(prefix="neardup-fmem-") as tmp:
            r = subprocess.run([sys.executable, "-c", CHILD, variant, str(a.urls), str(Path(tmp) / "job"), str(ROOT)],
                               cwd=ROOT, capture_output=True, text=True, timeout=7200)
            if r.returncode:
                raise RuntimeError(r.stderr[-3000:])
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
