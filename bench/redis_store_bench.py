"""The Redis store beside the embedded one, same data, same run (issue 15).

    .venv/bin/python bench/redis_store_bench.py --n 1000000

Starts its own redis-server (appendonly, fsync every second: the setting the
README recommends) and a 3-node Redis Cluster on loopback, fills each store
with ``--n`` fingerprints (store_bench's data: random, 10% planted within 3
bits, URL-like keys), then measures ``check_and_add`` single calls and
pipelined batches against it, beside the embedded (SQLite) store given the
same data, and Redis's memory per stored fingerprint (``used_memory`` before
and after, and per key kind).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from store_bench import K, make_data, queries  # noqa: E402

from scrapy_neardup.dedup.store import SimhashStore  # noqa: E402
from tests.fixtures.redis_servers import RedisCluster, RedisServer  # noqa: E402


def used_memory(nodes: list[RedisServer]) -> int:
    total = 0
    for node in nodes:
        for line in node.cli("info", "memory").splitlines():
            if line.startswith("used_memory:"):
                total += int(line.split(":")[1])
    return total


def measure(location: str | Path, fps: np.ndarray, keys: list[str], singles: np.ndarray, batch: np.ndarray,
            batch_size: int, nodes: list[RedisServer] | None) -> dict:
    res: dict = {}
    before = used_memory(nodes) if nodes else 0
    store = SimhashStore.open(location, max_distance=K, capacity=len(fps))
    res["layout"] = store.layout.describe()
    t = time.perf_counter()
    chunk = 20_000
    for i in range(0, len(fps), chunk):
        store.add_many(fps[i : i + chunk], keys[i : i + chunk])
    store.flush()
    res["fill_per_s"] = len(fps) / (time.perf_counter() - t)
    if nodes:
        res["used_memory_bytes_per_fp"] = (used_memory(nodes) - before) / len(fps)
    store.check_and_add(int(singles[0]) ^ 1, "warmup")
    t = time.perf_counter()
    matched = sum(store.check_and_add(x, f"s{i}") is not None for i, x in enumerate(singles.tolist()))
    res["single_per_s"] = len(singles) / (time.perf_counter() - t)
    res["single_matched"] = matched
    t = time.perf_counter()
    matched = 0
    for i in range(0, len(batch), batch_size):
        got = store.check_and_add_many(batch[i : i + batch_size], [f"b{j}" for j in range(i, i + batch_size)])
        matched += sum(m is not None for m in got)
    res["batch_per_s"] = len(batch) / (time.perf_counter() - t)
    res["batch_matched"] = matched
    res["batch_size"] = batch_size
    store.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--singles", type=int, default=3_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=2_000)
    ap.add_argument("--out", default="bench/results/redis_store.json")
    args = ap.parse_args()

    fps = make_data(args.n, seed=args.n)
    keys = [f"https://example.com/{i}" for i in range(args.n)]
    singles = queries(fps, args.singles, seed=args.n + 1)
    batch = queries(fps, args.batch, seed=args.n + 2)
    work = Path(tempfile.mkdtemp(prefix="neardup-redis-bench-"))
    out: dict = {"n": args.n, "command": "bench/redis_store_bench.py " + " ".join(sys.argv[1:])}
    try:
        out["embedded"] = measure(work / "store", fps, keys, singles, batch, args.batch_size, None)
        print("embedded", out["embedded"], flush=True)
        server = RedisServer(workdir=work / "redis")
        try:
            out["redis"] = measure(server.url + "?prefix=bench", fps, keys, singles, batch, args.batch_size,
                                   [server])
            print("redis", out["redis"], flush=True)
        finally:
            server.close()
        cluster = RedisCluster()
        try:
            out["cluster"] = measure(cluster.url + "?prefix=bench", fps, keys, singles, batch, args.batch_size,
                                     cluster.nodes)
            print("cluster", out["cluster"], flush=True)
        finally:
            cluster.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
