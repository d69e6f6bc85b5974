"""What a page costs the crawl's thread while the worker process first starts.

    .venv/bin/python bench/start_path.py [--out bench/results/start_path.json]
    .venv/bin/python bench/start_path.py --crawl 3 --out bench/results/start_path_crawl.json

Until the filter's worker is up, a page may be fingerprinted in the crawl's
thread by the reference path (``fingerprint_job`` with the compiled kernels
not ready: ``jit.defer``, as the crawl has them then). This measures that
cost against the body's size, in this process, with the reference path's
tables loaded first (``jit.warm_reference``, as the crawl's warm-up thread
does), on the shared data's real pages (aeb, zh-cwced, sqlite3-doc) and on
generated big pages (English and Chinese prose, 64 KB to 8 MB). Each page's
time is its thread's CPU time (``time.thread_time``: robust to a busy
machine) and its wall time, the median of 3 calls for the generated ones.

It reports, for each candidate bound on the body's bytes (decided before
any parse), the worst and the 99th-percentile cost of the pages within it
(and apart, of the slowest markup the pre-parse scan lets through: elements
of ``MAX_ATTRIBUTES`` attributes each), and how many of the real pages lie
past it (those would wait for the worker).

``--crawl ROUNDS`` measures instead what the bound costs a crawl against the
two other designs: the ready spider crawls sqlite3-doc (nginx on 127.0.0.1,
16 requests at a time, the kernels cached) with every page waiting for the
worker (the bound at 0), with the bound, and with none waiting (no bound:
the filter before it), alternating; each crawl's elapsed and wall time, the
longest the crawl's thread was late (``tests.fixtures.lag_probe``), and
the pages fingerprinted in the crawl's thread and the pages that waited.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
BOUNDS = (32_768, 65_536, 131_072, 262_144, 524_288, 1_048_576)
GENERATED_SIZES = (65_536, 262_144, 1_048_576, 4_194_304, 8_388_608)


def real_pages() -> list[tuple[str, str, bytes]]:
    """(source, name, body) of the shared data's pages."""
    pages = [("aeb", p.name, gzip.decompress(p.read_bytes())) for p in sorted((DATA / "aeb" / "html").glob("*.gz"))]
    pages += [("zh-cwced", p.name, p.read_bytes()) for p in sorted((DATA / "zh-cwced" / "original").glob("*.html"))]
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(DATA / "sites" / "sqlite3-doc.tar.gz") as tf:
            tf.extractall(tmp, filter="data")
        pages += [("sqlite3-doc", str(p.relative_to(tmp)), p.read_bytes()) for p in sorted(Path(tmp).rglob("*.html"))]
    return pages


def generated_pages() -> list[tuple[str, str, bytes]]:
    """Big but ordinary pages: paragraphs of English words, and of Chinese characters (through jieba)."""
    rng = random.Random(7)
    words = [("".join(rng.choice("etaoinshrdlucmfwypvbgk") for _ in range(rng.randint(2, 9)))) for _ in range(5000)]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    out = []
    for size in GENERATED_SIZES:
        en, zh = [b"<html><head><title>big</title></head><body>"], [b"<html><head><title>big</title></head><body>"]
        n_en = n_zh = 0
        while n_en < size:
            p = ("<p>" + " ".join(rng.choice(words) for _ in range(80)) + ".</p>\n").encode()
            en.append(p)
            n_en += len(p)
        while n_zh < size:
            p = ("<p>" + "".join(rng.choice(han) for _ in range(120)) + "。</p>\n").encode()
            zh.append(p)
            n_zh += len(p)
        out.append(("generated-en", f"{size}", b"".join(en) + b"</body></html>"))
        out.append(("generated-zh", f"{size}", b"".join(zh) + b"</body></html>"))
    # the slowest markup the pre-parse scan lets through: elements of MAX_ATTRIBUTES attributes each
    # (lexbor's time grows with the square of one element's attributes)
    from scrapy_neardup.dedup.text.hostile_scan import MAX_ATTRIBUTES

    tag = b"<div " + b" ".join(b"a%d" % i for i in range(MAX_ATTRIBUTES)) + b">"
    for size in (16_384, 65_536, 131_072, 262_144, 1_048_576):
        out.append(("generated-attributes", f"{size}", b"<html><body>" + tag * (size // len(tag))
                    + b"<p>" + b"a page of elements of very many attributes " * 10 + b"</p></body></html>"))
    return out


def measure(body: bytes, repeats: int) -> tuple[float, float, int]:
    """(thread CPU ms, wall ms, text chars): the medians of ``repeats`` calls."""
    from scrapy_neardup.dedup.fingerprint.jobs import fingerprint_job

    cpu, wall = [], []
    chars = 0
    for _ in range(repeats):
        c, w = time.thread_time(), time.perf_counter()
        r = fingerprint_job(body, None, 20)
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
        chars = len(r.text)
    return statistics.median(cpu), statistics.median(wall), chars


#: ``scrapy`` with the bound set first (the crawl modes below)
WRAPPED_SCRAPY = ("import sys; import scrapy_neardup.crawler.filter.workers as w; "
                  "w.START_PATH_MAX_BYTES = int(sys.argv.pop(1)); sys.argv[0] = 'scrapy'; "
                  "from scrapy.cmdline import execute; execute()")
#: the crawl modes: every page waits for the worker, pages over the bound wait (the filter's way), none waits
CRAWL_MODES = {"all_wait": 0, "bound": None, "none_wait": 10**12}


def crawl_modes(rounds: int, concurrency: int) -> dict:
    """Crawls of sqlite3-doc (nginx on 127.0.0.1, the ready spider, kernels cached)
    in each of ``CRAWL_MODES``, alternating, ``rounds`` times."""
    sys.path.insert(0, str(ROOT / "bench"))
    import re

    from crawl_bench import crawl_cmd, serve_sqlite_doc

    from scrapy_neardup.crawler.filter.workers import START_PATH_MAX_BYTES

    work, _, port, nginx = serve_sqlite_doc(str(DATA), "neardup-start-")
    runs: dict[str, list[dict]] = {m: [] for m in CRAWL_MODES}
    try:
        for i in range(rounds):
            for mode, bound in CRAWL_MODES.items():
                cmd = crawl_cmd(f"http://127.0.0.1:{port}/index.html", work / f"{mode}-{i}", concurrency,
                                ['EXTENSIONS={"tests.fixtures.lag_probe.LagProbe": 0}', "NEARDUP_WORKERS=1"])
                cmd[1:3] = ["-c", WRAPPED_SCRAPY, str(START_PATH_MAX_BYTES if bound is None else bound)]
                t = time.perf_counter()
                r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
                wall = time.perf_counter() - t
                if r.returncode or "'finish_reason': 'finished'" not in r.stderr:
                    raise RuntimeError(r.stderr[-2000:])
                got = {"wall_s": round(wall, 2)}
                for key in ("elapsed_time_seconds", "response_received_count", "lag_probe/max_ms", "neardup/kept",
                            "neardup/dropped", "neardup/fingerprinted_while_workers_start",
                            "neardup/waited_for_worker"):
                    found = re.search(rf"'{re.escape(key)}': ([0-9.]+)", r.stderr)
                    got[key] = float(found.group(1)) if found else 0
                up = re.search(r"the worker process is up \(([0-9.]+) s after the start\)", r.stderr)
                got["worker_up_s"] = float(up.group(1)) if up else None
                runs[mode].append(got)
                print(mode, json.dumps(got), flush=True)
    finally:
        nginx.terminate()
        nginx.wait(10)
    return {mode: {"median_elapsed_s": statistics.median(r["elapsed_time_seconds"] for r in rs),
                   "median_wall_s": statistics.median(r["wall_s"] for r in rs),
                   "max_lag_ms": max(r["lag_probe/max_ms"] for r in rs), "runs": rs} for mode, rs in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "start_path.json"))
    ap.add_argument("--crawl", type=int, default=0, metavar="ROUNDS",
                    help="instead: crawl sqlite3-doc ROUNDS times in each mode (CRAWL_MODES)")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    if args.crawl:
        report = crawl_modes(args.crawl, args.concurrency)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps({m: {k: v for k, v in r.items() if k != "runs"} for m, r in report.items()}, indent=1))
        return
    sys.path.insert(0, str(ROOT))
    from scrapy_neardup.dedup import jit

    jit.defer()  # the crawl's state while its worker starts: the reference paths
    t = time.perf_counter()
    jit.warm_reference()
    reference_load_s = time.perf_counter() - t
    rows = []
    for source, name, body in real_pages():
        cpu, wall, chars = measure(body, 1)
        rows.append({"source": source, "page": name, "bytes": len(body), "text_chars": chars,
                     "cpu_ms": round(cpu, 2), "wall_ms": round(wall, 2)})
    for source, name, body in generated_pages():
        cpu, wall, chars = measure(body, 3)
        rows.append({"source": source, "page": name, "bytes": len(body), "text_chars": chars,
                     "cpu_ms": round(cpu, 2), "wall_ms": round(wall, 2)})
    assert all(not jit.ready(g) for g in ("fingerprint", "store")), "measured the compiled path"
    real = [r for r in rows if not r["source"].startswith("generated")]
    by_source = {}
    for source in sorted({r["source"] for r in real}):
        mine = [r for r in real if r["source"] == source]
        by_source[source] = {"pages": len(mine), "median_bytes": int(statistics.median(r["bytes"] for r in mine)),
                             "max_bytes": max(r["bytes"] for r in mine),
                             "median_cpu_ms": round(statistics.median(r["cpu_ms"] for r in mine), 2),
                             "max_cpu_ms": max(r["cpu_ms"] for r in mine),
                             "us_per_kb": round(1000 * sum(r["cpu_ms"] for r in mine)
                                                / (sum(r["bytes"] for r in mine) / 1024), 1)}
    bounds = {}
    for bound in BOUNDS:
        within = sorted(r["cpu_ms"] for r in rows if r["bytes"] <= bound and r["source"] != "generated-attributes")
        hostile = [r["cpu_ms"] for r in rows if r["bytes"] <= bound and r["source"] == "generated-attributes"]
        bounds[str(bound)] = {
            "worst_cpu_ms_within": max(within),
            "worst_attributes_page_cpu_ms_within": max(hostile, default=None),
            "p99_cpu_ms_within": round(within[min(len(within) - 1, int(0.99 * len(within)))], 2),
            "real_pages_past_it": sum(r["bytes"] > bound for r in real), "real_pages": len(real)}
        bounds[str(bound)]["slowest_real_within"] = sorted(
            ({k: r[k] for k in ("source", "page", "bytes", "cpu_ms")} for r in real if r["bytes"] <= bound),
            key=lambda r: -r["cpu_ms"])[:3]
    generated = [{k: r[k] for k in ("source", "bytes", "text_chars", "cpu_ms", "wall_ms")}
                 for r in rows if r["source"].startswith("generated")]
    report = {"reference_tables_load_s": round(reference_load_s, 2), "by_source": by_source, "bounds": bounds,
              "generated": generated}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
