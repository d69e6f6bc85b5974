"""The Spark job (local[N]) beside the one-machine library path, same corpus, same run.

Corpus (seeded): JSON lines of ``--docs`` texts of 80 words from a 20,000-word
vocabulary; 15% near-copies (1-2 words changed), 5% exact copies, shuffled,
in 8 files of unequal sizes. The baseline is one process on one core:
fingerprint each text (``job.fingerprint_text``), ``self_join`` and
``greedy.decide``. The Spark run is ``job.run`` on ``local[N]``; shuffle bytes
are the sum over its stages of the shuffle writes (Spark's status API on
the loopback UI). Both report docs/s; the kept sets are checked equal.

    python bench/spark_bench.py --docs 1000000 --master 'local[2]' --out bench/results/spark.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np


def write_corpus(root: Path, n: int, seed: int = 0) -> list[Path]:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(20000)])
    n_base = n * 80 // 100
    words = rng.integers(0, len(vocab), size=(n_base, 80))
    near_src = rng.integers(0, n_base, size=n * 15 // 100)
    near = words[near_src].copy()
    for _ in range(2):
        near[np.arange(len(near)), rng.integers(0, 80, size=len(near))] = rng.integers(0, len(vocab), size=len(near))
    allw = np.concatenate([words, near])
    copies = allw[rng.integers(0, len(allw), size=n - len(allw))]
    allw = np.concatenate([allw, copies])
    allw = allw[rng.permutation(len(allw))]
    shares = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.04, 0.02, 0.01])
    bounds = np.r_[0, np.cumsum(np.round(shares / shares.sum() * n).astype(int))]
    bounds[-1] = n
    files = []
    for i in range(len(shares)):
        path = root / f"part-{i:02d}.jsonl"
        with open(path, "w") as f:
            for j in range(bounds[i], bounds[i + 1]):
                f.write(json.dumps({"id": str(j), "text": " ".join(vocab[allw[j]])}) + "\n")
        files.append(path)
    return files


def one_machine(files: list[Path]) -> tuple[float, list[str]]:
    from scrapy_neardup.dedup.fingerprint import Fingerprinter
    from scrapy_neardup.dedup.spark.job import fingerprint_text
    from scrapy_neardup.dedup.store.greedy import decide
    from scrapy_neardup.dedup.store.self_join import self_join

    t0 = time.perf_counter()
    fper = Fingerprinter()
    ids, fps = [], []
    for path in sorted(files):
        with open(path, "rb") as f:
            for raw in f:
                rec = json.loads(raw)
                fp = fingerprint_text(fper, rec["text"])
                if fp.ok:
                    ids.append(rec["id"])
                    fps.append(fp.value)
    dec = decide(self_join(np.array(fps, dtype=np.uint64), 3))
    return time.perf_counter() - t0, [i for i, k in zip(ids, dec.kept.tolist()) if k]


def shuffle_bytes(ui: str, app_id: str) -> int:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app_id}/stages") as r:  # loopback only
        stages = json.load(r)
    return sum(s.get("shuffleWriteBytes", 0) for s in stages)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scrapy_neardup.dedup.spark import job

    with tempfile.TemporaryDirectory(prefix="neardup-spark-bench-") as tmp:
        root = Path(tmp)
        files = write_corpus(root, args.docs)
        mb = sum(f.stat().st_size for f in files) / 1e6
        row: dict = {"docs": args.docs, "input_mb": round(mb, 1), "master": args.master}
        if not args.skip_baseline:
            secs, kept_local = one_machine(files)
            row.update(one_machine_s=round(secs, 1), one_machine_docs_s=round(args.docs / secs))
            print(f"one machine: {secs:.1f} s, {args.docs / secs:,.0f} docs/s", flush=True)
        t0 = time.perf_counter()
        spark = (SparkSession.builder.master(args.master).appName("neardup-bench")
                 .config("spark.ui.port", "4141").config("spark.driver.memory", "3g")
                 .config("spark.local.dir", str(root / "spark-local")).getOrCreate())
        start_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        summary = job.run([str(root / "*.jsonl")], str(root / "out"), spark=spark)
        secs = time.perf_counter() - t1
        sb = shuffle_bytes(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId)
        spark.stop()
        row.update(spark_start_s=round(start_s, 1), spark_s=round(secs, 1), spark_docs_s=round(args.docs / secs),
                   shuffle_mb=round(sb / 1e6, 1), shuffle_bytes_per_doc=round(sb / args.docs, 1),
                   summary={k: summary[k] for k in ("records", "distinct", "pairs", "dropped", "layout",
                                                     "components", "largest_component", "component_rounds")
                            if k in summary})
        print(f"spark {args.master}: {secs:.1f} s, {args.docs / secs:,.0f} docs/s, shuffle {sb / 1e6:,.1f} MB",
              flush=True)
        if not args.skip_baseline:
            kept_spark = []
            for part in sorted((root / "out" / "unique").glob("part-*")):
                kept_spark.extend(json.loads(x)["id"] for x in part.read_text().splitlines())
            row["same_kept_set"] = kept_spark == kept_local
            print("same kept set:", row["same_kept_set"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": platform.machine(), "python": platform.python_version(),
                       "command": " ".join(sys.argv), "rows": [row]}, f, indent=1)


if __name__ == "__main__":
    main()
