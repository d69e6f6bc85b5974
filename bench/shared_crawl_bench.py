"""The sqlite3-doc crawl by 1 and by 2 processes sharing Redis, same run (issue 15).

    .venv/bin/python bench/shared_crawl_bench.py [--rounds 2]

nginx serves sqlite3-doc; a redis-server of the benchmark's own holds the
shared frontier (scrapy-redis, ``SharedCrawlAddon``) and the near-duplicate
store. Each round crawls the site with one process, then with two started
together (the Redis database emptied before each), alternating the order.
Reports pages/s in total and per process, and CPU seconds per page (the
crawlers with their worker processes, Redis, nginx): on this 2-core machine
they all share the cores, so total pages/s cannot show what separate
machines would give; CPU per page can.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import time

import psutil
from crawl_bench import ROOT, crawl_args, crawl_cmd, finish, read_stats, serve_sqlite_doc

from tests.fixtures.redis_servers import RedisServer

ADDONS = json.dumps({"scrapy_neardup.NearDupAddon": 0, "scrapy_neardup.SharedCrawlAddon": 0})


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def redis_cpu(server: RedisServer) -> float:
    info = dict(line.split(":", 1) for line in server.cli("info", "cpu").splitlines() if ":" in line)
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"]) + \
        float(info.get("used_cpu_sys_children", 0)) + float(info.get("used_cpu_user_children", 0))


def nginx_cpu(nginx: subprocess.Popen) -> float:
    proc = psutil.Process(nginx.pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        t = p.cpu_times()
        total += t.user + t.system
    return total


def run(n: int, url: str, work, concurrency: int, server: RedisServer, nginx) -> dict:
    server.cli("flushall")
    outs = [work / f"p{n}-{i}-{time.monotonic_ns()}" for i in range(n)]
    cpu0, r0, g0 = children_cpu(), redis_cpu(server), nginx_cpu(nginx)
    t = time.perf_counter()
    procs = [subprocess.Popen(crawl_cmd(url, out, concurrency, [f"ADDONS={ADDONS}", f"REDIS_URL={server.url}",
                                                              f"JOBDIR={out / 'job'}"]),
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for out in outs]
    errs = [p.communicate(timeout=1800)[1] for p in procs]
    wall = time.perf_counter() - t
    each = [read_stats(e, wall, min_pages=1) for e in errs]
    pages = sum(s["response_received_count"] for s in each)
    cpu = {"crawlers": children_cpu() - cpu0, "redis": redis_cpu(server) - r0, "nginx": nginx_cpu(nginx) - g0}
    return {"processes": n, "pages": pages, "wall_s": wall, "pages_per_s": pages / wall,
            "per_process_pages_per_s": [s["pages_per_s"] for s in each],
            "kept": sum(s.get("neardup/kept", 0) for s in each),
            "dropped": sum(s.get("neardup/dropped", 0) for s in each),
            "cpu_s": cpu, "cpu_ms_per_page": {k: 1000 * v / pages for k, v in cpu.items()},
            "cpu_ms_per_page_total": 1000 * sum(cpu.values()) / pages}


def main() -> None:
    a = crawl_args("bench/results/shared_crawl.json", rounds=2)
    work, _site, port, nginx = serve_sqlite_doc(a.data, "neardup-shared-")
    server = RedisServer(workdir=work / "redis")
    url = f"http://127.0.0.1:{port}/index.html"
    runs: dict[int, list[dict]] = {1: [], 2: []}
    try:
        for i in range(a.rounds):
            for n in ((1, 2) if i % 2 == 0 else (2, 1)):
                runs[n].append(run(n, url, work, a.concurrency, server, nginx))
                print(json.dumps(runs[n][-1]), flush=True)
    finally:
        server.close()
        nginx.terminate()
        nginx.wait(10)
    med = {n: {k: statistics.median(r[k] for r in rs) for k in ("pages_per_s", "cpu_ms_per_page_total", "pages",
                                                              "kept", "dropped")} for n, rs in runs.items()}
    result = {"one_process": med[1], "two_processes": med[2],
              "total_ratio_2_over_1": med[2]["pages_per_s"] / med[1]["pages_per_s"],
              "cpu_per_page_ratio_2_over_1": med[2]["cpu_ms_per_page_total"] / med[1]["cpu_ms_per_page_total"],
              "command": "bench/shared_crawl_bench.py", "runs": runs}
    finish(result, a.out, work)


if __name__ == "__main__":
    main()
