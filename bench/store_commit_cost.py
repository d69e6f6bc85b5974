"""What the store's commit per kept page costs the crawl's thread: CPU time
(``time.thread_time``) per ``check_and_add`` of a new fingerprint into a
store directory, committed one by one (``commit_every=1``, as the filter opens
it: a kept page's fingerprint is committed before its item goes anywhere)
and in groups of 1,000; three rounds, alternating.

    .venv/bin/python bench/store_commit_cost.py
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.store import SimhashStore  # noqa: E402


def cost(commit_every: int, n: int = 3000, seed: int = 1) -> float:
    """CPU ms per add, committed every ``commit_every`` adds."""
    rng = random.Random(seed)
    fps = [rng.getrandbits(64) for _ in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        store = SimhashStore.open(Path(tmp) / "store", max_distance=3, commit_every=commit_every)
        t = time.thread_time()
        for i, fp in enumerate(fps):
            store.check_and_add(fp, f"http://h.test/p/{i}.html")
        cpu = time.thread_time() - t
        store.close()
    return cpu / n * 1000


def main() -> None:
    runs: dict[str, list[float]] = {"1": [], "1000": []}
    for _ in range(3):
        for every in runs:
            runs[every].append(round(cost(int(every)), 4))
    out = {"command": "bench/store_commit_cost.py", "cpu_ms_per_add": runs,
           "median": {every: statistics.median(v) for every, v in runs.items()}}
    print(json.dumps(out, indent=1))
    Path("bench/results/store_commit_cost.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
