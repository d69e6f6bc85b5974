"""Corpus deduplication: ``neardup dedup`` beside text-dedup (SimHash, MinHash) and datatrove (MinHash).

Builds a JSONL corpus (``id``, ``text``) from ../shared/data: the visible text of the aeb and zh-cwced
pages and of the pages of the sites' tarballs (sqlite3-doc and the Debian books), and documents made of
random runs of their paragraphs, to ``--docs`` documents; then plants copies of earlier documents (small
word edits, boilerplate added, truncation) at a measured resemblance J5 (Jaccard of word 5-shingles,
lower-cased, each CJK character a token) spread over 0.8-1.0, each a planted (copy, source) pair.

Each tool runs as a child process on the same file, same machine, one after the other; the whole tree's
memory is sampled twice a second as the sum of its processes' PSS (psutil: pages a parent shares with
forked workers count once). Reported per tool: docs/s (wall clock, start-up included), peak tree PSS,
recall of the planted pairs per J5 band (a pair is found when the copy or its source is dropped:
text-dedup keeps the later of two), and bad drops: drops whose named twin is under J5 0.5 (for
``neardup``, which names a twin), or, for tools that do not name one, drops with no kept document at
J5 >= 0.5 among the dropped document's planted family (its source and the source's other copies).

Peers run from their own virtualenvs (``--peers DIR``: DIR/textdedup, DIR/datatrove); a peer that is
missing is skipped and said so.

    .venv/bin/python bench/corpus_bench.py --docs 100000 --peers /work/peers
    .venv/bin/python bench/corpus_bench.py --scale 1000000 --work /tmp/corpus-scale \
        --out bench/results/corpus_scale_1m.json
    .venv/bin/python bench/corpus_bench.py --angles --work /tmp/corpus-bench --out bench/results/corpus_angles.json
    .venv/bin/python bench/corpus_bench.py --formats 4 --work /tmp/corpus-formats \
        --out bench/results/corpus_formats.json

On a shared machine docs/s falls with the load; every result records ``cpu_ms_per_doc`` (the CPU time of
the whole tree a document) and the load average, so that the code's cost can be told from the machine's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import resource
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results"
BANDS = [(0.8, 0.85), (0.85, 0.9), (0.9, 0.95), (0.95, 1.0001)]
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff]|[^\W_]+", re.U)
BOILERPLATE = ("Subscribe to our newsletter for the latest updates. Share this article on social media. "
               "Copyright all rights reserved. Privacy policy. Terms of use. Contact us. About us.")


def shingles(text: str, n: int = 5) -> set[int]:
    toks = [t.lower() for t in _TOKEN.findall(text)]
    if len(toks) < n:
        return {hash(tuple(toks))}
    return {hash(tuple(toks[i:i + n])) for i in range(len(toks) - n + 1)}


def j5(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / max(1, len(sa | sb))


def source_bodies() -> list[tuple[str, bytes]]:
    """(name, HTML bytes) of every real page in ../shared/data."""
    bodies: list[tuple[str, bytes]] = [(p.name.removesuffix(".gz"), gzip.decompress(p.read_bytes()))
                                       for p in sorted((DATA / "aeb" / "html").glob("*.html.gz"))]
    bodies += [(p.name, p.read_bytes()) for p in sorted((DATA / "zh-cwced" / "original").glob("*.html"))]
    for tar in sorted((DATA / "sites").glob("*.tar.gz")):
        with tarfile.open(tar) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith((".html", ".htm")):
                    fh = tf.extractfile(m)
                    if fh is not None:
                        bodies.append((f"{tar.name}/{m.name}", fh.read()))
    return bodies


def source_pages() -> list[str]:
    """Visible text of every real page in ../shared/data."""
    from scrapy_neardup.dedup.fingerprint import Fingerprinter

    fper = Fingerprinter()
    bodies = [b for _, b in source_bodies()]
    texts = []
    for body in bodies:
        r = fper.fingerprint_html(body)
        if r.ok and len(r.text) > 400:
            texts.append(r.text)
    return texts


def edit(text: str, rnd: random.Random) -> str:
    """A copy of ``text``: small word edits, boilerplate added, or truncation, of a random strength."""
    kind = rnd.choice(("edits", "boilerplate", "truncate"))
    if kind == "truncate":
        return text[: int(len(text) * rnd.uniform(0.8, 0.99))]
    if kind == "boilerplate":
        extra = " ".join([BOILERPLATE] * rnd.randint(1, 3))
        return (extra + "\n" + text) if rnd.random() < 0.5 else (text + "\n" + extra)
    words = text.split(" ")
    for _ in range(max(1, int(len(words) * rnd.uniform(0.0, 0.03)))):
        i = rnd.randrange(len(words))
        words[i] = rnd.choice(("the", "and", "new", "edited", "changed", words[rnd.randrange(len(words))]))
    return " ".join(words)


def build_corpus(path: Path, n_docs: int, seed: int, copy_share: float = 0.1) -> dict:
    rnd = random.Random(seed)
    pages = source_pages()
    paragraphs = [p for t in pages for p in t.split("\n") if len(p) > 80]
    docs: list[str] = list(pages)
    n_base = int(n_docs * (1 - copy_share))
    while len(docs) < n_base:
        docs.append("\n".join(rnd.sample(paragraphs, rnd.randint(3, 8))))
    rnd.shuffle(docs)
    records: list[tuple[str, str]] = [(f"d{i}", t) for i, t in enumerate(docs)]
    planted: list[dict] = []
    per_band = (n_docs - len(records)) // len(BANDS)
    want = {b: per_band for b in BANDS}
    tries = 0
    while any(want.values()) and tries < 50 * n_docs:
        tries += 1
        si = rnd.randrange(len(docs))
        copy = edit(docs[si], rnd)
        j = j5(docs[si], copy)
        band = next((b for b in BANDS if b[0] <= j < b[1]), None)
        if band is None or not want[band]:
            continue
        want[band] -= 1
        planted.append({"copy": f"c{len(planted)}", "source": f"d{si}", "j5": j, "text": copy})
    # a copy goes after its source, at a random later position
    order = [r for r in records]
    inserts: dict[int, list[tuple[str, str]]] = {}
    for p in planted:
        si = int(p["source"][1:])
        at = rnd.randint(si + 1, len(order))
        inserts.setdefault(at, []).append((p["copy"], p["text"]))
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(len(order) + 1):
            for rid, text in inserts.get(i, []):
                fh.write(json.dumps({"id": rid, "text": text}, ensure_ascii=False) + "\n")
            if i < len(order):
                fh.write(json.dumps({"id": order[i][0], "text": order[i][1]}, ensure_ascii=False) + "\n")
    truth = [{k: p[k] for k in ("copy", "source", "j5")} for p in planted]
    return {"docs": len(order) + len(planted), "planted": truth, "real_pages": len(pages)}


class TreeSampler(threading.Thread):
    """Peak of the sum of PSS over a process and its descendants, sampled every 0.5 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.peak_rss = 0
        self.cpu: dict[int, float] = {}  # pid -> its own CPU seconds when last seen
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            total = rss = 0
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    info = p.memory_full_info()
                    total += info.pss
                    rss += info.rss
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(0.5)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], log: Path, timeout: float) -> dict:
    """Wall seconds, peak tree PSS/RSS, and ``cpu_seconds``: the CPU time of the whole tree (the
    command and the workers it waited for). On a shared machine docs/s falls with the load while
    ``cpu_seconds`` per document does not: the two together tell the code's cost from the machine's."""
    t0 = time.monotonic()
    cpu0 = _children_cpu()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in psutil.Process(proc.pid).children(recursive=True):
                p.kill()
            proc.kill()
            rc = "timeout"
        sampler.stop.set()
        sampler.join()
    # (the larger of the two: a tool whose workers are not waited for by the process started here, such
    # as datatrove's executor, shows next to nothing in the rusage of children; the sampled sum misses
    # at most the last half second of each process)
    return {"seconds": time.monotonic() - t0, "cpu_seconds": max(_children_cpu() - cpu0, sum(sampler.cpu.values())),
            "peak_tree_pss_mb": sampler.peak / 2**20,
            "peak_tree_rss_mb": sampler.peak_rss / 2**20, "rc": rc}


def score(kept: set[str], named: dict[str, str] | None, texts: dict[str, str], truth: list[dict], n_docs: int) -> dict:
    """Recall per band, and bad drops (named twin under J5 0.5; or no kept family member at J5 >= 0.5)."""
    recall = {}
    for lo, hi in BANDS:  # a planted pair is found when one of the two is dropped (text-dedup keeps the later one)
        pairs = [p for p in truth if lo <= p["j5"] < hi]
        found = sum(p["copy"] not in kept or p["source"] not in kept for p in pairs)
        recall[f"{lo:.2f}-{min(hi, 1):.2f}"] = found / len(pairs) if pairs else None
    dropped = [i for i in texts if i not in kept]
    family: dict[str, set[str]] = {}
    for p in truth:
        family.setdefault(p["source"], {p["source"]}).add(p["copy"])
    of = {m: fam for fam in family.values() for m in fam}
    bad = 0
    for d in dropped:
        if named is not None:
            twin = named.get(d)
            if twin is None or j5(texts[d], texts[twin]) < 0.5:
                bad += 1
        elif not any(m in kept and j5(texts[d], texts[m]) >= 0.5 for m in of.get(d, ())):
            bad += 1
    return {"recall_by_j5": recall, "dropped": len(dropped), "bad_drops": bad}


def run_neardup(corpus: Path, work: Path, workers: int) -> tuple[dict, set[str], dict[str, str]]:
    out = work / "neardup-out"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    cmd = [sys.executable, "-m", "scrapy_neardup.dedup", "dedup", str(corpus), "-o", str(out), "--id-field", "id",
           "--quiet", "--workers", str(workers)]
    res = timed(cmd, work / "neardup.log", 3600)
    kept = {json.loads(line)["id"] for line in open(out / "unique.jsonl", encoding="utf-8")}
    named = {d["id"]: d["duplicate_of"] for d in map(json.loads, open(out / "duplicates.jsonl", encoding="utf-8"))}
    res["settings"] = f"k=3, --workers {workers}"
    return res, kept, named


_READ_KEPT = """
import sys, json
from datasets import load_from_disk
ds = load_from_disk(sys.argv[1])
json.dump(list(ds["id"]), open(sys.argv[2], "w"))
"""


def run_textdedup(algo: str, corpus: Path, work: Path, peers: Path, workers: int, timeout: float) -> tuple[dict, set[str]] | None:
    py = peers / "textdedup" / "bin" / "python"
    if not py.exists():
        return None
    out = work / f"td-{algo}-out"
    subprocess.run(["rm", "-rf", str(out), str(work / f"td-{algo}-cache")], check=True)
    common = ["--path", "json", "--data_files", str(corpus), "--split", "train", "--cache_dir", str(work / f"td-{algo}-cache"),
              "--output", str(out), "--column", "text", "--num_proc", str(workers)]
    extra = ["--bit_diff", "3", "--num_bucket", "4"] if algo == "simhash" else ["--threshold", "0.7"]
    res = timed([str(py), "-m", f"text_dedup.{algo}", *common, *extra], work / f"td-{algo}.log", timeout)
    if res["rc"] != 0:
        return res, set()
    ids_file = work / f"td-{algo}-kept.json"
    subprocess.run([str(py), "-c", _READ_KEPT, str(out), str(ids_file)], check=True)
    res["settings"] = ("k=3, 4 blocks" if algo == "simhash" else "threshold 0.7") + f", {workers} processes"
    return res, set(json.loads(ids_file.read_text()))


_DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                              MinhashDedupFilter)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers.jsonl import JsonlWriter

if __name__ == "__main__":
    shards, work, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tasks = workers  # one input shard a task
    cfg = MinhashConfig()  # the defaults: 5-grams, 14 buckets of 8 hashes
    s1 = LocalPipelineExecutor(pipeline=[JsonlReader(shards), MinhashDedupSignature(output_folder=f"{work}/signatures",
                               config=cfg)], tasks=tasks, workers=workers, logging_dir=f"{work}/logs/signatures")
    s2 = LocalPipelineExecutor(pipeline=[MinhashDedupBuckets(input_folder=f"{work}/signatures",
                               output_folder=f"{work}/buckets", config=cfg)], tasks=cfg.num_buckets,
                               workers=workers, logging_dir=f"{work}/logs/buckets", depends=s1)
    s3 = LocalPipelineExecutor(pipeline=[MinhashDedupCluster(input_folder=f"{work}/buckets",
                               output_folder=f"{work}/remove_ids", config=cfg)], tasks=1,
                               logging_dir=f"{work}/logs/clusters", depends=s2)
    s4 = LocalPipelineExecutor(pipeline=[JsonlReader(shards), MinhashDedupFilter(input_folder=f"{work}/remove_ids"),
                               JsonlWriter(f"{work}/output", compression=None)], tasks=tasks, workers=workers,
                               logging_dir=f"{work}/logs/filter", depends=s3)
    s4.run()
"""


def run_datatrove(corpus: Path, work: Path, peers: Path, workers: int, timeout: float) -> tuple[dict, set[str]] | None:
    """datatrove's MinHash deduplication (its four stages, ``MinhashConfig()`` defaults, the local
    executor) over the corpus cut into ``workers`` shards of consecutive lines (its reader gives a task
    a file, so one file would leave a core idle); the shards are written before the clock starts."""
    py = peers / "datatrove" / "bin" / "python"
    if not py.exists():
        return None
    dt = work / "datatrove"
    subprocess.run(["rm", "-rf", str(dt)], check=True)
    shards = dt / "input"
    shards.mkdir(parents=True)
    lines = corpus.read_bytes().splitlines(keepends=True)
    per = -(-len(lines) // workers)
    for i in range(workers):
        (shards / f"part{i:02d}.jsonl").write_bytes(b"".join(lines[i * per:(i + 1) * per]))
    del lines
    script = dt / "run_datatrove.py"
    script.write_text(_DATATROVE)
    res = timed([str(py), str(script), str(shards), str(dt), str(workers)], work / "datatrove.log", timeout)
    if res["rc"] != 0:
        return res, set()
    kept = {json.loads(line)["id"] for f in sorted((dt / "output").glob("*.jsonl")) for line in open(f, encoding="utf-8")}
    res["settings"] = f"MinhashConfig() defaults (5-grams, 14x8 hashes), local executor, {workers} tasks/workers"
    return res, kept


def scale_run(n_docs: int, work: Path, out: Path, workers: int, seed: int) -> None:
    """``n_docs`` generated documents (40-90 words of a 2,000-word vocabulary, a third of them edited
    copies of earlier ones): docs/s and the tree's peak PSS and RSS of ``neardup dedup`` alone."""
    rnd = random.Random(seed)
    vocab = [f"{w}{i}" for i, w in enumerate(["word", "term", "name", "item"] * 500)]
    corpus = work / "scale.jsonl"
    recent: list[list[str]] = []
    with open(corpus, "w") as fh:
        for i in range(n_docs):
            if recent and rnd.random() < 1 / 3:
                words = list(rnd.choice(recent))
                words[rnd.randrange(len(words))] = rnd.choice(vocab)
            else:
                words = rnd.choices(vocab, k=rnd.randint(40, 90))
            recent.append(words)
            if len(recent) > 1000:
                recent.pop(0)
            fh.write(json.dumps({"id": f"g{i}", "text": " ".join(words)}) + "\n")
    res, kept, _ = run_neardup(corpus, work, workers)
    res.update({"docs": n_docs, "bytes": corpus.stat().st_size, "docs_per_s": n_docs / res["seconds"],
                "cpu_ms_per_doc": res["cpu_seconds"] / n_docs * 1e3,
                "kept": len(kept), "load_average_at_end": os.getloadavg()})
    print("scale", json.dumps(res), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")


def _decoded(body: bytes) -> str:
    """An HTML page as a string for a JSON field (the zh-cwced pages are GB 2312)."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("gb18030", "replace")


def formats_run(copies: int, work: Path, out: Path, workers: int, peers: Path, skip: set[str], timeout: float) -> None:
    """The real pages of ../shared/data (``copies`` times each, so that start-up does not dominate) as
    a WARC file (``.warc``, response records), a directory of HTML files, JSON lines with an HTML field,
    and JSON lines of their visible text; ``neardup dedup`` on each (docs/s, MB/s of input, CPU per
    document, peak tree PSS), and the peers on the text."""
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from scrapy_neardup.dedup.fingerprint import Fingerprinter

    fper = Fingerprinter()
    bodies = source_bodies()
    subprocess.run(["rm", "-rf", str(work)], check=True)
    (work / "html").mkdir(parents=True)
    warc, html_jsonl, text_jsonl = work / "pages.warc", work / "pages-html.jsonl", work / "pages-text.jsonl"
    n = 0
    with open(warc, "wb") as wf, open(html_jsonl, "w", encoding="utf-8") as hf, open(text_jsonl, "w", encoding="utf-8") as tf:
        writer = WARCWriter(wf, gzip=False)
        for c in range(copies):
            for name, body in bodies:
                rid = f"p{n}"
                url = f"http://example.com/{c}/{name}"
                (work / "html" / f"{n:07d}.html").write_bytes(body)
                headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
                writer.write_record(writer.create_warc_record(url, "response", payload=BytesIO(body),
                                                              http_headers=headers))
                hf.write(json.dumps({"id": rid, "html": _decoded(body)}, ensure_ascii=False) + "\n")
                r = fper.fingerprint_html(body)
                tf.write(json.dumps({"id": rid, "text": r.text}, ensure_ascii=False) + "\n")
                n += 1
    html_bytes = sum(len(b) for _, b in bodies) * copies
    runs = {"WARC (.warc)": ([str(warc)], [], warc.stat().st_size),
            "HTML files (a directory)": ([str(work / "html")], [], html_bytes),
            "JSON lines, --html-field": ([str(html_jsonl)], ["--html-field", "html", "--id-field", "id"],
                                         html_jsonl.stat().st_size),
            "JSON lines of the visible text": ([str(text_jsonl)], ["--id-field", "id"], text_jsonl.stat().st_size)}
    results: dict = {"docs": n, "pages": len(bodies), "copies": copies, "html_bytes": html_bytes, "runs": {}}
    for label, (inputs, extra, size) in runs.items():
        o = work / "out"
        subprocess.run(["rm", "-rf", str(o)], check=True)
        res = timed([sys.executable, "-m", "scrapy_neardup.dedup", "dedup", *inputs, "-o", str(o), *extra,
                     "--quiet", "--workers", str(workers)], work / "neardup.log", 3600)
        summary = json.loads((o / "summary.json").read_text())
        res.update({"input_bytes": size, "docs_per_s": n / res["seconds"], "mb_per_s": size / 2**20 / res["seconds"],
                    "html_mb_per_s": html_bytes / 2**20 / res["seconds"], "cpu_ms_per_doc": res["cpu_seconds"] / n * 1e3,
                    "kept": summary["kept"], "dropped": summary["dropped"], "records": summary["records"]})
        results["runs"][f"neardup dedup: {label}"] = res
        print(label, json.dumps(res), flush=True)
    peer_runs = []
    if "minhash" not in skip:
        peer_runs.append(("text-dedup 0.4.0 MinHash: the visible text",
                          lambda: run_textdedup("minhash", text_jsonl, work, peers, workers, timeout)))
    if "datatrove" not in skip:
        peer_runs.append(("datatrove MinHash: the visible text",
                          lambda: run_datatrove(text_jsonl, work, peers, workers, timeout)))
    for label, fn in peer_runs:
        got = fn()
        if got is None:
            results["runs"][label] = {"skipped": "not installed"}
            continue
        res, _ = got
        size = text_jsonl.stat().st_size
        res.update({"input_bytes": size, "docs_per_s": n / res["seconds"], "mb_per_s": size / 2**20 / res["seconds"],
                    "html_mb_per_s": html_bytes / 2**20 / res["seconds"], "cpu_ms_per_doc": res["cpu_seconds"] / n * 1e3})
        results["runs"][label] = res
        print(label, json.dumps(res), flush=True)
    results["load_average"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


def _feature_vector(fper, text: str) -> tuple[dict[int, float], int | None, str]:
    """(feature hash -> summed weight, fingerprint, language code) of a text, as ``neardup dedup`` makes them."""
    import numpy as np

    from scrapy_neardup.dedup.features import hashed_features
    from scrapy_neardup.dedup.features.language import language_mask, page_language_code, public_code
    from scrapy_neardup.dedup.text.plain import text_page

    page = text_page(text)
    code = page_language_code(page, fper.params)
    hashes, weights, _ = hashed_features(page, fper.params, fper.seed, None, code)
    uniq, inv = np.unique(hashes, return_inverse=True)
    summed = np.zeros(len(uniq))
    np.add.at(summed, inv, weights)
    value = fper.fingerprint_text(text).value
    if value is not None:  # the simhash itself: the language's mask taken off
        value ^= language_mask(public_code(code), fper.seed)
    return dict(zip(uniq.tolist(), summed.tolist())), value, code


def angles_run(work: Path, out: Path, k: int = 3) -> None:
    """What a 64-bit simhash at distance ``k`` can find of the planted pairs of the corpus in ``work``
    (built by a run of this benchmark), per J5 band: the cosine of the two documents' weighted
    feature vectors, the distance a random-hyperplane simhash expects of it (64 x arccos(cos) / pi,
    each bit differing with probability arccos(cos) / pi), the share a binomial(64, that) puts
    within ``k``, and the distances the fingerprints have: with their language masks (the rule's),
    and of the simhashes alone (the masks taken off: what a pair whose two documents CLD2 reads as
    two languages would be without them)."""
    import math
    from statistics import median

    from scrapy_neardup.dedup.features.language import language_mask, public_code
    from scrapy_neardup.dedup.fingerprint import Fingerprinter

    meta = json.loads((work / "truth.json").read_text())
    want = {p["copy"] for p in meta["planted"]} | {p["source"] for p in meta["planted"]}
    texts = {}
    for line in open(work / "corpus.jsonl", encoding="utf-8"):
        rec = json.loads(line)
        if rec["id"] in want:
            texts[rec["id"]] = rec["text"]
    fper = Fingerprinter()
    rows: dict[str, list[dict]] = {f"{lo:.2f}-{min(hi, 1):.2f}": [] for lo, hi in BANDS}
    for p in meta["planted"]:
        (va, fa, la), (vb, fb, lb) = _feature_vector(fper, texts[p["copy"]]), _feature_vector(fper, texts[p["source"]])
        dot = sum(w * vb[h] for h, w in va.items() if h in vb)
        na, nb = math.sqrt(sum(w * w for w in va.values())), math.sqrt(sum(w * w for w in vb.values()))
        cos = dot / (na * nb) if na and nb else 0.0
        theta = math.acos(max(-1.0, min(1.0, cos)))
        q = theta / math.pi
        within = sum(math.comb(64, i) * q**i * (1 - q) ** (64 - i) for i in range(k + 1))
        dist = bin(fa ^ fb).count("1") if fa is not None and fb is not None else None  # (unmasked)
        if dist is not None and la != lb:  # the fingerprints: masked by two languages, ~32 bits apart
            masked = bin(fa ^ fb ^ language_mask(public_code(la)) ^ language_mask(public_code(lb))).count("1")
        else:
            masked = dist
        band = next(f"{lo:.2f}-{min(hi, 1):.2f}" for lo, hi in BANDS if lo <= p["j5"] < hi)
        rows[band].append({"cos": cos, "expected": 64 * q, "p_within": within, "distance": masked,
                           "simhash_distance": dist, "same_language": la == lb})
    result: dict = {"k": k, "pairs": len(meta["planted"]), "bands": {}}
    for band, rs in rows.items():
        got = [r["distance"] for r in rs if r["distance"] is not None]
        result["bands"][band] = {
            "pairs": len(rs), "median_cos": median(r["cos"] for r in rs),
            "median_expected_distance": median(r["expected"] for r in rs),
            "share_cos_at_least": {str(c): sum(r["cos"] >= c for r in rs) / len(rs) for c in (0.99, 0.98, 0.95, 0.9)},
            "expected_recall": sum(r["p_within"] for r in rs) / len(rs),
            "median_distance": median(got) if got else None,
            "share_within_k": sum(d <= k for d in got) / len(rs),
            "share_within": {str(d): sum(x <= d for x in got) / len(rs) for d in (3, 6, 10)},
            "simhash_within_k": sum(r["simhash_distance"] is not None and r["simhash_distance"] <= k
                                    for r in rs) / len(rs),
            "same_language": sum(r["same_language"] for r in rs) / len(rs),
            "within_k_same_language": (sum(r["distance"] is not None and r["distance"] <= k and r["same_language"]
                                           for r in rs) / max(1, sum(r["same_language"] for r in rs))),
        }
        print(band, json.dumps(result["bands"][band]), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


def rescore(work: Path, out: Path) -> None:
    """Score the outputs a finished run left in ``work`` again (into ``out``'s tools)."""
    meta = json.loads((work / "truth.json").read_text())
    texts = {r["id"]: r["text"] for r in map(json.loads, open(work / "corpus.jsonl", encoding="utf-8"))}
    results = json.loads(out.read_text())
    for name, res in results["tools"].items():
        if res.get("rc") != 0:
            continue
        if name == "neardup dedup":
            o = work / "neardup-out"
            kept = {json.loads(line)["id"] for line in open(o / "unique.jsonl", encoding="utf-8")}
            named = {d["id"]: d["duplicate_of"] for d in map(json.loads, open(o / "duplicates.jsonl", encoding="utf-8"))}
            res.update(score(kept, named, texts, meta["planted"], meta["docs"]))
        elif name.startswith("datatrove"):
            kept = {json.loads(line)["id"] for f in sorted((work / "datatrove" / "output").glob("*.jsonl"))
                    for line in open(f, encoding="utf-8")}
            res.update(score(kept, None, texts, meta["planted"], meta["docs"]))
        else:
            algo = name.split()[-1]
            res.update(score(set(json.loads((work / f"td-{algo}-kept.json").read_text())), None, texts,
                             meta["planted"], meta["docs"]))
        print(name, json.dumps(res), flush=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--peers", default="/work/peers")
    ap.add_argument("--peer-timeout", type=float, default=1800)
    ap.add_argument("--work", default="/tmp/corpus-bench")
    ap.add_argument("--skip", default="", help="comma-separated: simhash,minhash,datatrove")
    ap.add_argument("--out", default=str(RESULTS / "corpus_bench.json"))
    ap.add_argument("--rescore", action="store_true", help="score the outputs already in --work again")
    ap.add_argument("--scale", type=int, default=0, help="a scale run of this many generated documents, neardup only")
    ap.add_argument("--formats", type=int, default=0, metavar="COPIES",
                    help="HTML and WARC inputs beside the same pages as text: the real pages COPIES times each")
    ap.add_argument("--angles", action="store_true",
                    help="what a 64-bit simhash at k=3 can find of the planted pairs of the corpus already in --work")
    args = ap.parse_args()
    work = Path(args.work)
    if args.angles:
        return angles_run(work, Path(args.out))
    if args.rescore:
        return rescore(work, Path(args.out))
    if args.formats:
        return formats_run(args.formats, work, Path(args.out), args.workers, Path(args.peers), set(args.skip.split(",")),
                           args.peer_timeout)
    if args.scale:
        work.mkdir(parents=True, exist_ok=True)
        return scale_run(args.scale, work, Path(args.out), args.workers, args.seed)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    t0 = time.monotonic()
    meta = build_corpus(corpus, args.docs, args.seed)
    print(f"corpus: {meta['docs']} docs ({meta['real_pages']} real pages), {len(meta['planted'])} planted copies, "
          f"{corpus.stat().st_size / 2**20:.0f} MB, built in {time.monotonic() - t0:.0f} s", flush=True)
    (work / "truth.json").write_text(json.dumps(meta))
    texts = {r["id"]: r["text"] for r in map(json.loads, open(corpus, encoding="utf-8"))}
    results: dict = {"docs": meta["docs"], "planted": len(meta["planted"]), "bytes": corpus.stat().st_size,
                     "planted_by_band": {f"{lo:.2f}-{min(hi, 1):.2f}": sum(lo <= p["j5"] < hi for p in meta["planted"])
                                         for lo, hi in BANDS}, "tools": {}}
    load_at_start = os.getloadavg()
    res, kept, named = run_neardup(corpus, work, args.workers)
    res.update(score(kept, named, texts, meta["planted"], meta["docs"]))
    res["docs_per_s"] = meta["docs"] / res["seconds"]
    res["cpu_ms_per_doc"] = res["cpu_seconds"] / meta["docs"] * 1e3
    results["tools"]["neardup dedup"] = res
    print("neardup dedup", json.dumps(res), flush=True)
    def record_peer(name: str, got: tuple[dict, set[str]] | None) -> None:
        """A peer's run, scored as ours is (or why it did not run)."""
        if got is None:
            results["tools"][name] = {"skipped": "not installed"}
            return
        res, kept = got
        if res["rc"] == 0:
            res.update(score(kept, None, texts, meta["planted"], meta["docs"]))
            res["docs_per_s"] = meta["docs"] / res["seconds"]
            res["cpu_ms_per_doc"] = res["cpu_seconds"] / meta["docs"] * 1e3
        results["tools"][name] = res
        print(name, json.dumps(res), flush=True)

    skip = args.skip.split(",")
    for algo in ("simhash", "minhash"):
        if algo not in skip:
            record_peer(f"text-dedup 0.4.0 {algo}",
                        run_textdedup(algo, corpus, work, Path(args.peers), args.workers, args.peer_timeout))
    if "datatrove" not in skip:
        record_peer("datatrove MinHash", run_datatrove(corpus, work, Path(args.peers), args.workers, args.peer_timeout))
    results["load_average_at_start"] = load_at_start
    results["load_average_at_end"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
