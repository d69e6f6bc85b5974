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
from dedup.gb_transcode import gb_to_utf8  # noqa: E402
from dedup.simhash import simhash  # noqa: E402
from dedup.features.tokens import _RUNS, SEGMENTER_NAME, normalize, segment_han  # noqa: E402

STAGES = ("sniff encoding", "decode", "visible text", "features + hashes", "simhash")


def stages(data: bytes, params: FeatureParams) -> list[float]:
    """Milliseconds per stage of ``Fingerprinter.fingerprint_html`` on one page.
    "decode": GB18030 transcoded to UTF-8, other legacy codecs decoded and
    encoded, UTF-8 nothing; "visible text": ``raw_scan``, or lexbor where it
    gives up (``text.RAW_SCAN_OUTCOMES`` counts which)."""
    t = [time.perf_counter()]
    enc, skip = T.sniff_encoding(data)
    t.append(time.perf_counter())
    raw = data[skip:] if enc == "utf-8" else (gb_to_utf8(data[skip:]) if enc == "gb18030" else None)
    if raw is None:
        raw = T.to_unicode(data[skip:], enc).encode("utf-8", "surrogatepass")
    t.append(time.perf_counter())
    page = T._extract_utf8(raw, enc)
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
        T.RAW_SCAN_OUTCOMES.clear()
        rows = [stages(html, params) for _ in range(2) for _, html, _ in pages]
        med = [statistics.median(col) for col in zip(*rows)]
        fast = T.RAW_SCAN_OUTCOMES[0] / max(1, sum(T.RAW_SCAN_OUTCOMES.values()))
        print(f"| {name} | " + " | ".join(f"{m:.3f}" for m in med) + f" | {sum(med):.2f} | "
              f"{statistics.median(sum(r) for r in rows):.2f} | {fast:.0%} |")
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
