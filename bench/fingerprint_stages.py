"""Where fingerprinting time goes, stage by stage (median ms per page), on both paths.

    .venv/bin/python bench/fingerprint_stages.py [--data ../shared/data]

Runs the stages of ``Fingerprinter.fingerprint_html`` one by one on the aeb
and zh-cwced pages, twice over, once with the compiled kernels and once on
the reference path (what a crawl runs while its kernels compile), and prints
the median of each stage.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.fingerprint_bench import load_aeb, load_zh  # noqa: E402
from scrapy_neardup.dedup import jit  # noqa: E402
from scrapy_neardup.dedup.features import FeatureParams, hashed_features  # noqa: E402
from scrapy_neardup.dedup.simhash import simhash  # noqa: E402
from scrapy_neardup.dedup.text import sniff_encoding  # noqa: E402
from scrapy_neardup.dedup.text.visible import page_of_document, parse_document  # noqa: E402
from w3lib.encoding import to_unicode  # noqa: E402

STAGES = ("sniff encoding", "decode", "parse (lexbor)", "read the tree", "features + hashes", "simhash")


def stages(data: bytes, params: FeatureParams, compiled: bool) -> list[float]:
    """Milliseconds per stage of ``Fingerprinter.fingerprint_html`` on one page.
    "decode": legacy codecs decoded and encoded to UTF-8, UTF-8 nothing;
    "read the tree": serialise + compiled scan, or the Python walk."""
    t = [time.perf_counter()]
    enc, skip = sniff_encoding(data)
    t.append(time.perf_counter())
    raw = data[skip:] if enc == "utf-8" else to_unicode(data[skip:], enc).encode("utf-8", "surrogatepass")
    t.append(time.perf_counter())
    doc = parse_document(raw)
    t.append(time.perf_counter())
    page = page_of_document(doc, enc, compiled)
    t.append(time.perf_counter())
    hashes, weights, _ = hashed_features(page, params, 0, compiled)
    t.append(time.perf_counter())
    if hashes.size:
        simhash(hashes, weights, compiled=compiled)
    t.append(time.perf_counter())
    return [(b - a) * 1e3 for a, b in zip(t, t[1:])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    data = Path(ap.parse_args().data)
    params = FeatureParams()
    jit.warm("fingerprint")
    jit.warm_reference()
    print("| set | path | " + " | ".join(STAGES) + " | sum of medians | median of sums |")
    print("|---|---|" + "---|" * (len(STAGES) + 2))
    for name, pages in (("aeb", load_aeb(data / "aeb")), ("zh-cwced", load_zh(data / "zh-cwced"))):
        for compiled in (True, False):
            rows = [stages(html, params, compiled) for _ in range(2) for _, html, _ in pages]
            med = [statistics.median(col) for col in zip(*rows)]
            print(f"| {name} | {'compiled' if compiled else 'reference'} | " + " | ".join(f"{m:.3f}" for m in med)
                  + f" | {sum(med):.2f} | {statistics.median(sum(r) for r in rows):.2f} |")


if __name__ == "__main__":
    main()
