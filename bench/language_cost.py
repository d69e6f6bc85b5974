"""What reading the prose's language and damping listings cost per page.

    .venv/bin/python bench/language_cost.py [--data ../shared/data] [--passes 6]

The same process fingerprints every aeb and zh-cwced page with scheme v7, v7
without the language (``nolang``) and v7 without either change
(``lp0-nolang``), page by page, the order of the three rotating each pass so
that none always finds the caches filled by another. Prints the median
milliseconds per page of each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.features import FeatureParams  # noqa: E402
from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    ap.add_argument("--passes", type=int, default=6)
    a = ap.parse_args()
    data = Path(a.data)
    sets = {"aeb": [gzip.decompress(f.read_bytes()) for f in sorted((data / "aeb" / "html").glob("*.html.gz"))],
            "zh-cwced": [f.read_bytes() for f in sorted((data / "zh-cwced" / "original").glob("*.html"))]}
    schemes = [("v7", Fingerprinter()), ("nolang", Fingerprinter(FeatureParams(language=False))),
               ("lp0-nolang", Fingerprinter(FeatureParams(language=False, listing_prose_tokens=0)))]
    out = {}
    for name, pages in sets.items():
        for _, fper in schemes:  # warm: compiled kernels, dictionaries
            for page in pages:
                fper.fingerprint_html(page)
        times: dict[str, list[float]] = {label: [] for label, _ in schemes}
        for i in range(a.passes):
            order = schemes[i % 3:] + schemes[:i % 3]
            for page in pages:
                for label, fper in order:
                    t0 = time.perf_counter()
                    fper.fingerprint_html(page)
                    times[label].append(time.perf_counter() - t0)
        out[name] = {label: round(statistics.median(t) * 1000, 3) for label, t in times.items()}
        print(name, out[name], flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
