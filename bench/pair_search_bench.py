"""The batch pair search (``store.self_join``) and the greedy decision at scale.

Each case runs in a fresh process (peak RSS is that process's ``ru_maxrss``;
CPU time beside the wall time, since the machine is shared):
generate the fingerprints, then either ``component_decide.decide_by_components``
(k = 3: the decision without holding the pair list) or ``self_join`` (k = 3)
then ``greedy.decide``; each row carries a hash of the decision (kept rows,
twins, distances), equal between engines that decide alike.
The baseline, in the same run, is the store's all-tables join
(``PermutedTables.add_many`` + ``pair_graph``, exact copies collapsed as the
self-join does them; until ``row_pairs`` was bounded, it listed every pair of
*rows*, and the skewed data's clusters of exact repeats made that hundreds of
millions of pairs: it passed 19 GB at 1M), then the same ``greedy.decide``,
at the sizes where its tables fit (8 B per table and fingerprint).

Data (seeded):
* ``random``: uniform 64-bit fingerprints;
* ``planted``: 80% random, 15% near-copies of an earlier record (1-3 bits
  flipped), 5% exact copies;
* ``skewed``: 60% random, 40% in clusters of Zipf-distributed sizes (exponent
  1.5, the largest ~1% of the data) around a centre: 70% of the members are
  exact repeats of it, 30% are 1-3 bits from it (templates shared by many pages).

    python bench/pair_search_bench.py --sizes 1000000,10000000,100000000 --out bench/results/pair_search.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import resource
import subprocess
import sys
import time

import numpy as np

KINDS = ("random", "planted", "skewed")


def flips(rng: np.random.Generator, m: int, lo: int, hi: int) -> np.ndarray:
    """m masks of lo..hi random bits (a bit drawn twice counts once: a little below hi)."""
    out = np.zeros(m, dtype=np.uint64)
    n_bits = rng.integers(lo, hi + 1, size=m)
    for j in range(hi):
        bit = np.uint64(1) << rng.integers(0, 64, size=m).astype(np.uint64)
        out |= np.where(n_bits > j, bit, np.uint64(0))
    return out


def generate(kind: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    if kind == "planted":
        out = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        n_near, n_copy = n * 15 // 100, n * 5 // 100
        tail = n - n_near - n_copy
        src = rng.integers(0, tail, size=n_near)
        out[tail : tail + n_near] = out[src] ^ flips(rng, n_near, 1, 3)
        out[tail + n_near :] = out[rng.integers(0, tail + n_near, size=n_copy)]
        return out
    if kind == "skewed":
        out = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        m = n * 40 // 100
        sizes = np.minimum(rng.zipf(1.5, size=m), max(1, n // 100))
        sizes = sizes[np.cumsum(sizes) <= m]
        centres = rng.integers(0, 2**64 - 1, size=len(sizes), dtype=np.uint64, endpoint=True)
        members = np.repeat(centres, sizes)
        varied = rng.random(len(members)) < 0.3  # 70% exact repeats of the template, 30% 1-3 bits off
        members[varied] ^= flips(rng, int(varied.sum()), 1, 3)
        pos = rng.choice(n, size=len(members), replace=False)
        out[pos] = members
        return out
    raise ValueError(kind)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def digest(dec) -> str:
    """One hash of the kept rows, twins and distances: equal decisions, equal digests."""
    h = hashlib.sha1()
    for arr in (dec.kept, dec.twin, dec.distance):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def run_case(engine: str, kind: str, n: int) -> dict:
    fps = generate(kind, n)
    base_rss = rss_mb()
    c0 = time.process_time()
    t0 = time.perf_counter()
    if engine == "self_join":
        from scrapy_neardup.dedup.store.greedy import decide
        from scrapy_neardup.dedup.store.self_join import join_layout, self_join

        graph = self_join(fps, 3)
        t1 = time.perf_counter()
        dec = decide(graph)
        t2 = time.perf_counter()
        out = {"pairs": len(graph.a), "distinct": graph.n_distinct, "kept": dec.n_kept,
               "layout": join_layout(3, graph.n_distinct).describe(), "join_s": t1 - t0, "decide_s": t2 - t1}
    elif engine == "components":
        from scrapy_neardup.dedup.store.component_decide import decide_by_components

        res = decide_by_components(fps, 3)
        t1 = t2 = time.perf_counter()
        dec = res.decision
        out = {"pairs": res.pairs, "distinct": res.n_distinct, "kept": dec.n_kept, "components": res.components,
               "largest_component": res.largest, "joined_components": res.joined, "scan_comparisons": res.comparisons,
               "join_s": t1 - t0, "decide_s": 0.0}
    else:  # the store's all-tables join
        from scrapy_neardup.dedup.store.layout import choose_layout
        from scrapy_neardup.dedup.store.tables import PermutedTables

        from scrapy_neardup.dedup.store.greedy import decide

        tables = PermutedTables(choose_layout(3, n), compiled=True)
        tables.add_many(fps)
        graph = tables.pair_graph()
        t1 = time.perf_counter()
        dec = decide(graph)
        t2 = time.perf_counter()
        out = {"pairs": len(graph.a), "distinct": graph.n_distinct, "kept": dec.n_kept,
               "layout": tables.layout.describe(), "join_s": t1 - t0, "decide_s": t2 - t1}
    out.update(engine=engine, kind=kind, n=n, total_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0,
               peak_rss_mb=rss_mb(), input_rss_mb=base_rss, decision_sha1=digest(dec))
    return out


def warm() -> None:
    """Compile (or load) the kernels outside the timed cases."""
    for kind in KINDS:
        run_case("components", kind, 200_000)
        run_case("self_join", kind, 200_000)
        run_case("tables", kind, 20_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--engines", default="components,self_join,tables")
    ap.add_argument("--baseline-max", type=int, default=10_000_000, help="largest size for the store's join")
    ap.add_argument("--self-join-max", type=int, default=10**12, help="largest size for self_join + decide")
    ap.add_argument("--out", default=None)
    ap.add_argument("--case", nargs=3, metavar=("ENGINE", "KIND", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        engine, kind, n = args.case
        print(json.dumps(run_case(engine, kind, int(n))))
        return
    warm()
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        for kind in args.kinds.split(","):
            limits = {"components": n, "self_join": args.self_join_max, "tables": args.baseline_max}
            engines = [e for e in args.engines.split(",") if n <= limits[e]]
            for engine in engines:
                res = subprocess.run([sys.executable, __file__, "--case", engine, kind, str(n)],
                                     capture_output=True, text=True, check=True)
                row = json.loads(res.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(f"{engine:9} {kind:8} {n:>11,}: {row['total_s']:7.1f} s, cpu {row['cpu_s']:7.1f} s (join {row['join_s']:.1f}, "
                      f"decide {row['decide_s']:.1f}), peak RSS {row['peak_rss_mb']:,.0f} MB, "
                      f"pairs {row['pairs']:,}, decision {row['decision_sha1'][:12]}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": platform.machine(), "python": platform.python_version(),
                       "command": " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
