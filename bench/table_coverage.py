"""Share of a book's token occurrences whose term weight the table sets (factor < 1), per language.

    .venv/bin/python bench/table_coverage.py [--knee 5]
"""
from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scrapy_neardup.dedup.features import FeatureParams, page_texts  # noqa: E402
from scrapy_neardup.dedup.features.language import page_language_code  # noqa: E402
from scrapy_neardup.dedup.features.term_table import data_language, term_factors  # noqa: E402
from scrapy_neardup.dedup.features.tokens import tokenize  # noqa: E402
from scrapy_neardup.dedup.text import extract  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
ap.add_argument("--knee", type=float, default=FeatureParams().zipf_knee)
a = ap.parse_args()
params = FeatureParams(zipf_knee=a.knee)
with tempfile.TemporaryDirectory() as tmp:
    with tarfile.open(Path(a.data) / "sites" / "installation-guide.tar.gz") as tf:
        tf.extractall(tmp, filter="data")
    for d in sorted(Path(tmp).rglob("site/*/")):
        if not d.is_dir():
            continue
        codes, counts = Counter(), Counter()
        for f in sorted(d.glob("*.html")):
            page = extract(f.read_bytes())
            code = page_language_code(page, params)
            codes[code] += 1
            counts.update(tokenize(page_texts(page, params)[0]))
        lang = data_language(codes.most_common(1)[0][0])
        factors = term_factors(lang, a.knee)
        total = sum(counts.values())
        hit = sum(n for t, n in counts.items() if t in factors)
        top = [t for t, _ in counts.most_common(12)]
        print(f"{d.name:6s} cld2={dict(codes.most_common(2))} data={lang}: {hit / total:.0%} of {total} tokens damped; "
              f"top tokens undamped: {[t for t in top if t not in factors]}")
