"""Store benchmark: check_and_add, pairs, memory, disk, reopen, against baselines in the same run.

    .venv/bin/python bench/store_bench.py --sizes 1000000 10000000

Random 64-bit fingerprints with 10% planted near-duplicates (1-3 bits from a
stored one). Baselines, same data, same run: a numpy brute-force scan (the
floor), the ``simhash`` package's ``SimhashIndex`` (1M only), and seomoz's
C++ ``find_all`` (PyPI simhash-pybind, in its own virtualenv given by
``--pybind-python`` because it installs a module also named ``simhash``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.store import SimhashStore  # noqa: E402

K = 3


def make_data(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    m = n // 10  # planted: copy an earlier fingerprint and flip 1..3 bits
    src = rng.integers(0, n - m, size=m)
    planted = fps[src].copy()
    for i in range(m):
        for b in rng.choice(64, size=int(rng.integers(1, K + 1)), replace=False):
            planted[i] ^= np.uint64(1) << np.uint64(b)
    fps[n - m :] = planted
    return fps


def queries(fps: np.ndarray, q: int, seed: int) -> np.ndarray:
    """Half near-duplicates of stored fingerprints, half fresh random ones."""
    rng = np.random.default_rng(seed)
    near = fps[rng.integers(0, len(fps), size=q // 2)].copy()
    for i in range(len(near)):
        for b in rng.choice(64, size=int(rng.integers(0, K + 1)), replace=False):
            near[i] ^= np.uint64(1) << np.uint64(b)
    fresh = rng.integers(0, 2**64 - 1, size=q - len(near), dtype=np.uint64, endpoint=True)
    out = np.concatenate([near, fresh])
    rng.shuffle(out)
    return out


def rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def brute_force_rate(fps: np.ndarray, qs: np.ndarray) -> float:
    t = time.perf_counter()
    for q in qs:
        np.flatnonzero(np.bitwise_count(fps ^ q) <= K)
    return len(qs) / (time.perf_counter() - t)


def brute_force_pairs_estimate(n: int, fps: np.ndarray) -> float:
    """Seconds for an all-pairs numpy scan, extrapolated from 200 rows."""
    t = time.perf_counter()
    for q in fps[:200]:
        np.bitwise_count(fps ^ q)
    per_row = (time.perf_counter() - t) / 200
    return per_row * n / 2


def simhashindex_rate(fps: np.ndarray, qs: np.ndarray) -> dict:
    from simhash import Simhash, SimhashIndex

    t = time.perf_counter()
    index = SimhashIndex([(str(i), Simhash(int(v))) for i, v in enumerate(fps)], k=K)
    build = time.perf_counter() - t
    t = time.perf_counter()
    for i, q in enumerate(qs):
        obj = Simhash(int(q))
        if not index.get_near_dups(obj):
            index.add(f"q{i}", obj)
    return {"build_s": build, "rate": len(qs) / (time.perf_counter() - t)}


def pybind_find_all(python: str, fps: np.ndarray, workdir: Path) -> dict:
    path = workdir / "fps.npy"
    np.save(path, fps)
    code = (
        "import sys,time,numpy as np,simhash\n"
        f"h=np.load({str(path)!r}).tolist()\n"
        f"t=time.perf_counter(); r=simhash.find_all(h, {K + 1}, {K}); el=time.perf_counter()-t\n"
        "print(el, len(r))\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=3600)
    if out.returncode:
        return {"error": out.stderr.strip()[-300:]}
    el, n = out.stdout.split()
    return {"seconds": float(el), "pairs": int(n)}


def run_size(n: int, q: int, args, workdir: Path) -> dict:
    res: dict = {"n": n}
    fps = make_data(n, seed=n)
    qs = queries(fps, q, seed=n + 1)
    path = workdir / f"store-{n}"
    shutil.rmtree(path, ignore_errors=True)
    keys = [f"https://example.com/{i}" for i in range(n)]

    t = time.perf_counter()
    store = SimhashStore.open(path, max_distance=K, capacity=n)
    for i in range(0, n, 1_000_000):
        store.add_many(fps[i : i + 1_000_000], keys[i : i + 1_000_000])
    store.flush()
    res["build_s"] = time.perf_counter() - t
    res["layout"] = store.layout.describe()
    store.check_and_add(int(qs[0]), "warmup")  # compile the probe kernel

    t = time.perf_counter()
    dropped = 0
    for i, x in enumerate(qs.tolist()):
        if store.check_and_add(x, f"q{i}") is not None:
            dropped += 1
    el = time.perf_counter() - t
    res["check_and_add_per_s"] = q / el
    res["check_and_add_matched"] = dropped

    qs2 = queries(fps, q, seed=n + 2)
    store.check_and_add_many(qs2[:10], [f"w{i}" for i in range(10)])  # compile
    bkeys = [f"b{i}" for i in range(len(qs2))]
    t = time.perf_counter()
    store.check_and_add_many(qs2, bkeys)
    res["check_and_add_many_per_s"] = q / (time.perf_counter() - t)

    t = time.perf_counter()
    store.close()
    res["close_s"] = time.perf_counter() - t
    res["disk_bytes_per_fp"] = dir_size(path) / n

    before = rss()
    t = time.perf_counter()
    store = SimhashStore.open(path, max_distance=K)
    res["reopen_s"] = time.perf_counter() - t
    res["tables_bytes_per_fp"] = (store.tables.main.nbytes + store.tables.main_ids.nbytes) / len(store)
    int(store.tables.main.sum())  # page every table in
    int(store.tables.main_ids.sum())
    res["rss_bytes_per_fp_after_open"] = (rss() - before) / len(store)

    store.pair_rows()  # compile
    t = time.perf_counter()
    ra, rb, dd = store.pair_rows()
    res["pair_rows_s"] = time.perf_counter() - t
    res["pairs"] = len(ra)
    t = time.perf_counter()
    n_pairs = sum(1 for _ in store.pairs())
    res["pairs_with_keys_s"] = time.perf_counter() - t
    assert n_pairs == len(ra)
    store.close()

    sample = qs[:200] if n <= 2_000_000 else qs[:50]
    res["brute_force_query_per_s"] = brute_force_rate(fps, sample)
    res["brute_force_pairs_s_estimate"] = brute_force_pairs_estimate(n, fps)
    if n <= 1_000_000 and not args.skip_simhashindex:
        res["simhashindex"] = simhashindex_rate(fps, qs[: args.simhashindex_queries])
    if args.pybind_python and n <= args.pybind_max:
        res["cpp_find_all"] = pybind_find_all(args.pybind_python, fps, workdir)
    shutil.rmtree(path, ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--simhashindex-queries", type=int, default=20_000)
    ap.add_argument("--skip-simhashindex", action="store_true")
    ap.add_argument("--pybind-python", default=None, help="python of a venv with simhash-pybind")
    ap.add_argument("--pybind-max", type=int, default=10_000_000)
    ap.add_argument("--out", default="bench/results/store.json")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="neardup-bench-"))
    results = []
    for n in args.sizes:
        r = run_size(n, args.queries, args, workdir)
        print(json.dumps(r), flush=True)
        results.append(r)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
