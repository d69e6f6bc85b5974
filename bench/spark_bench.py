"""The Spark job (local[N]) beside the one-machine library path, same corpus, same run.

Corpus (seeded): JSON lines of ``--docs`` texts of 80 words from a 20,000-word
vocabulary; 15% near-copies (1-2 words changed), 5% exact copies, shuffled,
in 8 files of unequal sizes. The baseline is one process on one core:
fingerprint each text (``job.fingerprint_text``), ``self_join`` and
``greedy.decide``. The Spark run is ``job.run`` on ``local[N]``; shuffle bytes
are the sum over its stages of the shuffle writes (Spark's status API on
the loopback UI). Both report docs/s; the kept sets are checked equal.

    python bench/spark_bench.py --docs 1000000 --master 'local[2]' --out bench/results/spark.json

``--dense COPIES NEAR``: instead, a dense corpus of COPIES exact copies of one
80-word record and NEAR near-identical ones (1-2 words changed), shuffled,
in the same 8 files; the baseline then fingerprints through the one-machine
command's batch path (``corpus.jobs.fingerprint_batch``, exact copies
fingerprinted once), and the summed PSS of the whole process tree (this
process, Spark's JVM and its Python workers) is sampled for its peak.

    python bench/spark_bench.py --dense 1000000 100000 --master 'local[2]' --out bench/results/spark_dense.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fixtures.memory import tree_pss_kib  # noqa: E402


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
    return write_files(root, vocab, allw)


def write_dense(root: Path, copies: int, near: int, seed: int = 0) -> list[Path]:
    """COPIES copies of one record and NEAR records 1-2 words from it, shuffled, in 8 files."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(20000)])
    template = rng.integers(0, len(vocab), size=80)
    words = np.repeat(template[None, :], copies + near, axis=0)
    for _ in range(2):
        rows = np.arange(copies, copies + near)
        words[rows, rng.integers(0, 80, size=near)] = rng.integers(0, len(vocab), size=near)
    words = words[rng.permutation(len(words))]
    return write_files(root, vocab, words)


def write_files(root: Path, vocab: np.ndarray, allw: np.ndarray) -> list[Path]:
    n = len(allw)
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


class PeakSampler(threading.Thread):
    """The peak of ``tree_pss_kib(os.getpid())``, sampled every half second."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kib = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.peak_kib = max(self.peak_kib, tree_pss_kib(os.getpid()))


def one_machine_batches(files: list[Path]) -> tuple[float, list[str]]:
    """The one-machine command's fingerprinting path (``corpus.jobs.fingerprint_batch``), then
    ``decide_by_components``."""
    from scrapy_neardup.dedup.corpus.jobs import FieldOptions, fingerprint_batch
    from scrapy_neardup.dedup.store.component_decide import decide_by_components

    t0 = time.perf_counter()
    options = FieldOptions(id_field="id")
    ids, fps = [], []
    for path in sorted(files):
        with open(path, "rb") as f:
            lines = f.readlines()
        for i in range(0, len(lines), 1000):
            for o in fingerprint_batch("jsonl", options, lines[i:i + 1000]):
                if o.value is not None:
                    ids.append(o.record_id)
                    fps.append(o.value)
    dec = decide_by_components(np.array(fps, dtype=np.uint64), 3).decision
    return time.perf_counter() - t0, [i for i, k in zip(ids, dec.kept.tolist()) if k]


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
    ap.add_argument("--dense", nargs=2, type=int, metavar=("COPIES", "NEAR"), default=None)
    ap.add_argument("--driver-memory", default="3g",
                    help="spark.driver.memory: in local mode the driver is the executor, so the heap of the whole job")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from scrapy_neardup.dedup.spark import job

    with tempfile.TemporaryDirectory(prefix="neardup-spark-bench-") as tmp:
        root = Path(tmp)
        if args.dense:
            args.docs = sum(args.dense)
            files = write_dense(root, *args.dense)
        else:
            files = write_corpus(root, args.docs)
        mb = sum(f.stat().st_size for f in files) / 1e6
        row: dict = {"docs": args.docs, "input_mb": round(mb, 1), "master": args.master,
                     "driver_memory": args.driver_memory}
        if args.dense:
            row["dense"] = {"copies": args.dense[0], "near": args.dense[1]}
        if not args.skip_baseline:
            sampler = PeakSampler()
            sampler.start()
            secs, kept_local = (one_machine_batches if args.dense else one_machine)(files)
            sampler.done.set()
            sampler.join()
            if args.dense:
                row["one_machine_peak_pss_mb"] = round(sampler.peak_kib / 1024)
            row.update(one_machine_s=round(secs, 1), one_machine_docs_s=round(args.docs / secs))
            print(f"one machine: {secs:.1f} s, {args.docs / secs:,.0f} docs/s", flush=True)
        t0 = time.perf_counter()
        spark = (SparkSession.builder.master(args.master).appName("neardup-bench")
                 .config("spark.ui.port", "4141").config("spark.driver.memory", args.driver_memory)
                 .config("spark.local.dir", str(root / "spark-local")).getOrCreate())
        start_s = time.perf_counter() - t0
        sampler = PeakSampler()
        sampler.start()
        t1 = time.perf_counter()
        summary = job.run([str(root / "*.jsonl")], str(root / "out"), spark=spark)
        secs = time.perf_counter() - t1
        sampler.done.set()
        sampler.join()
        row["spark_peak_pss_mb"] = round(sampler.peak_kib / 1024)
        sb = shuffle_bytes(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId)
        spark.stop()
        row.update(spark_start_s=round(start_s, 1), spark_s=round(secs, 1), spark_docs_s=round(args.docs / secs),
                   shuffle_mb=round(sb / 1e6, 1), shuffle_bytes_per_doc=round(sb / args.docs, 1),
                   summary={k: summary[k] for k in ("records", "distinct", "pairs", "dropped", "layout",
                                                     "components", "largest_component", "component_rounds")
                            if k in summary})
        print(f"spark {args.master}: {secs:.1f} s, {args.docs / secs:,.0f} docs/s, shuffle {sb / 1e6:,.1f} MB, "
              f"peak PSS of the tree {row['spark_peak_pss_mb']:,} MB", flush=True)
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
