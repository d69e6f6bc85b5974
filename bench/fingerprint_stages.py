"""Where fingerprinting time goes, stage by stage (median ms per page).

    .venv/bin/python bench/fingerprint_stages.py [--data ../shared/data]

Runs the stages of ``Fingerprinter.fingerprint_html`` one by one on the aeb
and zh-cwced pages, twice over, and prints the median of each stage.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.fingerprint_bench import load_aeb, load_zh  # noqa: E402
from dedup import text as T  # noqa: E402
from dedup.features import FeatureParams, hashed_features, page_texts  # noqa: E402
from dedup.simhash import simhash  # noqa: E402
from dedup.tokens import _RUNS, SEGMENTER_NAME, normalize, segment_han  # noqa: E402

STAGES = ("sniff encoding", "lexbor parse", "title", "strip + serialise", "scan", "features + hashes", "simhash")


def stages(data: bytes, params: FeatureParams) -> list[float]:
    t = [time.perf_counter()]
    enc, skip = T.sniff_encoding(data)
    raw = data[skip:] if enc == "utf-8" else T.to_unicode(data[skip:], enc).encode()
    t.append(time.perf_counter())
    doc = T.parse_document(raw)
    t.append(time.perf_counter())
    title = T.document_title(doc)
    t.append(time.perf_counter())
    src = T.serialise_for_scan(doc)
    t.append(time.perf_counter())
    page = T.scan_page(src, title, enc)
    t.append(time.perf_counter())
    hashes, weights, _ = hashed_features(page, params)
    t.append(time.perf_counter())
    if hashes.size:
        simhash(hashes, weights)
    t.append(time.perf_counter())
    return [(b - a) * 1e3 for a, b in zip(t, t[1:])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    data = Path(ap.parse_args().data)
    params = FeatureParams()
    T.extract(b"<p>warm up the compiled scan</p>")
    for name, pages in (("aeb", load_aeb(data / "aeb")), ("zh-cwced", load_zh(data / "zh-cwced"))):
        rows = [stages(html, params) for _ in range(2) for _, html, _ in pages]
        med = [statistics.median(col) for col in zip(*rows)]
        print(f"| {name} | " + " | ".join(f"{m:.3f}" for m in med) + f" | {sum(med):.2f} |")
    # the floor under zh-cwced: the segmenter alone, on the page's Han runs already extracted
    seg, han_chars = [], []
    for _, html, _ in load_zh(data / "zh-cwced"):
        text = normalize("\n".join(page_texts(T.extract(html), params)))
        han = "\n".join(m.group() for m in _RUNS.finditer(text) if m.lastgroup == "han")
        t = time.perf_counter()
        segment_han(han)
        seg.append((time.perf_counter() - t) * 1e3)
        han_chars.append(len(han))
    print(f"zh-cwced: {SEGMENTER_NAME} alone {statistics.median(seg):.3f} ms median per page "
          f"({statistics.median(han_chars):,.0f} Han characters)")


if __name__ == "__main__":
    main()
