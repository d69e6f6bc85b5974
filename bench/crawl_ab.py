"""One change to the filter, measured against the behaviour before it, in the same run.

    .venv/bin/python bench/crawl_ab.py --patch bench/ab_patches/store_kernels_at_start --rounds 8 \\
        --out bench/results/crawl-ab-store-kernels.json

Three crawls a round, in an order shuffled per round (seeded): plain Scrapy
(``NEARDUP_ENABLED=False``), the filter as it is (``new``), and the filter
with ``--patch DIR`` on ``PYTHONPATH`` (``old``): a directory whose
``sitecustomize.py`` restores the former behaviour (a constant, a method),
so that both builds run from one checkout. The crawls are
``crawl_bench.py``'s (sqlite3-doc served by nginx, 16 requests at a time,
``--spider`` user by default), with its stats: pages/s, the crawl's thread
CPU (``bench/thread_cpu_s``) and the crawl process's CPU in all threads
(``bench/process_cpu_s``). Reports, as medians (min-max) over the rounds,
each build's pages/s ratio and thread CPU share against plain, their ratio
to each other, and the CPU of the process's other threads.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from pathlib import Path

from crawl_bench import ROOT, run, serve_sqlite_doc, spider_cmd, spread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--patch", required=True, help="a directory with a sitecustomize.py: the former behaviour")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--spider", default="user", help="ready, user or jobdir (crawl_bench.py's)")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    patch = str(Path(args.patch).resolve())
    work, _, port, nginx = serve_sqlite_doc(args.data, "neardup-ab-")
    url = f"http://127.0.0.1:{port}/index.html"
    runs: list[dict[str, dict]] = []
    try:
        for i in range(args.rounds):
            modes = ["plain", "new", "old"]
            random.Random(i).shuffle(modes)
            got: dict[str, dict] = {}
            for mode in modes:
                out = work / f"{mode}-{i}"
                shutil.rmtree(out, ignore_errors=True)
                cmd = spider_cmd(args.spider, url, out, 16, [f"NEARDUP_ENABLED={mode != 'plain'}",
                                                             f"NEARDUP_STORE={out / 'store'}", "NEARDUP_INDEX="])
                got[mode] = run(cmd, dict(os.environ, PYTHONPATH=patch) if mode == "old" else None)
                print(i, mode, json.dumps({k: got[mode].get(k) for k in (
                    "pages_per_s", "bench/thread_cpu_s", "bench/process_cpu_s", "elapsed_time_seconds")}), flush=True)
            runs.append(got)
    finally:
        nginx.terminate()
        nginx.wait(10)

    def per_round(f) -> dict:
        return spread([f(r) for r in runs])

    result: dict = {"command": " ".join(["bench/crawl_ab.py", "--patch", args.patch, "--rounds", str(args.rounds),
                                         "--spider", args.spider]),
                    "load_average": os.getloadavg(), "rounds": len(runs)}
    for mode in ("new", "old"):
        result[mode] = {
            "pages_per_s_ratio": per_round(lambda r: r[mode]["pages_per_s"] / r["plain"]["pages_per_s"]),
            "thread_cpu_ms_per_response_share": per_round(
                lambda r: r[mode]["thread_cpu_ms_per_response"] - r["plain"]["thread_cpu_ms_per_response"]),
            "other_threads_cpu_s": per_round(lambda r: r[mode]["bench/process_cpu_s"] - r[mode]["bench/thread_cpu_s"]),
        }
    result["new_over_old_pages_per_s"] = per_round(lambda r: r["new"]["pages_per_s"] / r["old"]["pages_per_s"])
    result["new_faster_rounds"] = sum(r["new"]["pages_per_s"] > r["old"]["pages_per_s"] for r in runs)
    print(json.dumps(result, indent=1))
    result["runs"] = runs
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
