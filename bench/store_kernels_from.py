"""When the crawl's process should load the store's compiled kernels
(``crawler.filter.workers.STORE_KERNELS_FROM``).

    .venv/bin/python bench/store_kernels_from.py [--out bench/results/store_kernels_from.json]

With a worker process, the crawl's process fingerprints nothing and uses its
store's kernels only for the look-up of each page (``check_and_add``). Until
it loads them, the store answers by exhaustive scans (numpy), which cost more
the more the store holds; loading them (from numba's cache, which the worker
fills) costs CPU once, in a thread that holds the GIL beside the crawl's.
This measures both, each in fresh processes (the kernels' cache warm):

* the load: ``jit.warm("store")`` in a process that has imported the store,
  its CPU time (median of 5 processes);
* a look-up: CPU time per ``check_and_add`` of a new random fingerprint into
  an in-memory store, by windows as it grows to 40,000, without the kernels
  and with them (a median of 3 processes each).

It reports, for each size, the extra CPU the scans have cost in all until
then against the kernels; the size at which that reaches the load's cost is
where loading starts to pay.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1_000, 5_000, 10_000, 20_000, 30_000, 40_000)

LOAD = """
import time
from scrapy_neardup.dedup import jit
from scrapy_neardup.dedup.store import SimhashStore
jit.defer()
t = time.process_time()
jit.warm("store")
print(time.process_time() - t)
"""

LOOKUPS = """
import json, sys, time
import numpy as np
from scrapy_neardup.dedup import jit
compiled = sys.argv[1] == "1"
if compiled:
    jit.warm("store")
else:
    jit.defer()
from scrapy_neardup.dedup.store import SimhashStore
sizes = json.loads(sys.argv[2])
fps = np.random.default_rng(1).integers(0, 2**63, sizes[-1], dtype=np.uint64).tolist()
store = SimhashStore.open(None, capacity=2 * sizes[-1])
assert jit.ready("store") == compiled
out, last, t = {}, 0, time.thread_time()
for i, fp in enumerate(fps, 1):
    store.check_and_add(fp, str(i))
    if i in sizes:
        now = time.thread_time()
        out[i] = (now - t) / (i - last) * 1e6  # us a look-up in the window (last, i]
        t, last = now, i
print(json.dumps(out))
"""


def python(code: str, *args: str) -> str:
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return (r.stdout.strip().splitlines() or [""])[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "store_kernels_from.json"))
    args = ap.parse_args()
    python("from scrapy_neardup.dedup import jit; jit.warm('store')")  # (the cache filled)
    load_s = statistics.median(float(python(LOAD)) for _ in range(5))
    per: dict[str, dict[int, float]] = {}
    for label, flag in (("scans", "0"), ("kernels", "1")):
        runs = [json.loads(python(LOOKUPS, flag, json.dumps(SIZES))) for _ in range(3)]
        per[label] = {n: statistics.median(r[str(n)] for r in runs) for n in SIZES}
    rows, extra, last = [], 0.0, 0
    for n in SIZES:
        extra += (per["scans"][n] - per["kernels"][n]) * (n - last) / 1e6
        last = n
        rows.append({"fingerprints": n, "scan_us": round(per["scans"][n], 1), "kernels_us": round(per["kernels"][n], 1),
                     "extra_cpu_s_so_far": round(extra, 3), "pays": extra >= load_s})
        print(json.dumps(rows[-1]), flush=True)
    result = {"command": "bench/store_kernels_from.py", "load_cpu_s": round(load_s, 3), "rows": rows}
    print("load", round(load_s, 3), "s")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
