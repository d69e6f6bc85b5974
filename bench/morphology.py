"""Would a morphological analyser weigh Japanese and Korean better? A measurement, not a feature.

    .venv/bin/pip install --target /work/peers/morphology fugashi unidic-lite kiwipiepy wordfreq==3.1.1
    rm -rf /work/peers/morphology/numpy* /work/peers/morphology/regex*      # the project's own are used
    PYTHONPATH=/work/peers/morphology .venv/bin/python bench/morphology.py [--data ../shared/data]
    (its first lines: RSS after a fresh process's first page, with the analyser of ja / ko or none)

wordfreq's Japanese and Korean keys are MeCab morphemes (は, を, 는, 을). The
fingerprint cuts kana into character bigrams and Korean at spaces, and its
table (``scripts/build_term_table.py``) maps wordfreq's words onto those
tokens. This script fingerprints the installation guide's ``ja`` and ``ko``
pages the other way, in the reference path only: the prose and furniture
texts (``page_texts``) cut into morphemes by fugashi + unidic-lite (ja) or
kiwipiepy (ko), each morpheme weighed by ``min(1, 10 ** (knee - zipf))``
with its zipf read straight from ``wordfreq.get_frequency_dict``, damped
morphemes counted once, the same share cap, simhash and language mask. Every
other language is fingerprinted as the package does.

It reports, per scheme (the package's ``default`` and ``morph``): the spread
of unrelated pairs of the guide's ja and ko pages (as ``quality.py
--spread``), the recall of near-duplicates made from those pages by
``quality.variants`` (another template, ad/counter/comments, paragraphs
swapped, an update appended; distinct pairs: other pages in the same
template), and the mean ms per page (pages interleaved, median of passes).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from quality import _site_pages, eval_articles, eval_spread, print_spread  # noqa: E402
from scrapy_neardup.dedup.features import FeatureParams, feature_hashes, language_mask  # noqa: E402
from scrapy_neardup.dedup.features.language import page_language_code  # noqa: E402
from scrapy_neardup.dedup.features.tokens import normalize  # noqa: E402
from scrapy_neardup.dedup.features.weights import _final_weights, page_texts  # noqa: E402
from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402
from scrapy_neardup.dedup.fingerprint.pipeline import Fingerprint  # noqa: E402
from scrapy_neardup.dedup.simhash import simhash  # noqa: E402

_WORDLIKE = regex.compile(r"[\p{L}\p{N}]")
_DIGIT = regex.compile(r"\d")


def analyser(lang: str):
    """A function text -> morphemes (surface forms) for ``lang``."""
    if lang == "ja":
        import fugashi

        tagger = fugashi.Tagger()  # unidic-lite
        return lambda text: [w.surface for w in tagger(text)]
    if lang == "ko":
        from kiwipiepy import Kiwi

        kiwi = Kiwi()
        return lambda text: [t.form for t in kiwi.tokenize(text)]
    raise ValueError(lang)


class MorphFingerprinter(Fingerprinter):
    """``Fingerprinter`` whose ja/ko pages are cut into morphemes (see the module docstring)."""

    def __init__(self, params: FeatureParams = FeatureParams()) -> None:
        super().__init__(params)
        self.cut = {lang: analyser(lang) for lang in ("ja", "ko")}
        import wordfreq

        self.zipf = {lang: {w: math.log10(f) + 9 for w, f in wordfreq.get_frequency_dict(lang, "best").items()}
                     for lang in ("ja", "ko")}

    def tokens(self, lang: str, text: str) -> list[str]:
        return [t for t in (normalize(m) for m in self.cut[lang](text)) if _WORDLIKE.search(t)]

    def fingerprint_page(self, page, compiled=None):  # type: ignore[override]
        code = page_language_code(page, self.params)
        lang = code.split("-")[0]
        if lang not in self.cut:
            return super().fingerprint_page(page, compiled)
        content, furniture = page_texts(page, self.params)
        c_tok, f_tok = self.tokens(lang, content), self.tokens(lang, furniture)
        counts: dict[str, float] = dict(Counter(c_tok))
        for t, n in Counter(f_tok).items():
            counts[t] = counts.get(t, 0) + n * self.params.furniture_weight
        names = list(counts)
        n_tokens = len(c_tok) + len(f_tok)
        if n_tokens < self.min_tokens or not names:
            return Fingerprint(None, "too_short", page.title, page.text, n_tokens, page)
        zipf = self.zipf[lang]
        knee = self.params.zipf_knee
        term = np.array([min(1.0, 10 ** (knee - zipf[t])) if t in zipf and zipf[t] > knee
                         else (self.params.number_weight if _DIGIT.search(t) and not t.isalpha() else 1.0)
                         for t in names])
        common = np.array([t in zipf and zipf[t] > knee for t in names])
        weights, keep = _final_weights(list(counts.values()), term, self.params, common)
        if keep is not None:
            names = [t for t, k in zip(names, keep.tolist()) if k]
        value = simhash(feature_hashes(names, self.seed), weights)
        return Fingerprint(value ^ language_mask(lang, self.seed), None, page.title, page.text, n_tokens, page, lang)


def guide_articles(data: Path, lang: str) -> list[tuple[str, str]]:
    """(title, text) of the guide's pages in ``lang`` with at least 300 characters of text."""
    return [(page.title, page.text) for path, page in _site_pages(data, "installation-guide")
            if f"/site/{lang}/" in path and len(page.text) >= 300]


def guide_pages(data: Path, lang: str) -> list[bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(data / "sites" / "installation-guide.tar.gz") as tf:
            tf.extractall(tmp, filter="data")
        return [f.read_bytes() for f in sorted(Path(tmp).rglob(f"site/{lang}/*.html"))]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--memory", default="", help="ja, ko or none: RSS after a fresh process's first page")
    a = ap.parse_args()
    data = Path(a.data)
    if a.memory:
        # the analyser alone (the frequencies would ship in the package's compact table, as today's do)
        page = guide_pages(data, a.memory if a.memory != "none" else "ja")[0]
        r = Fingerprinter().fingerprint_html(page)
        if a.memory != "none":
            cut = analyser(a.memory)
            cut(r.text)
        print(f"{a.memory}: RSS after the first page {rss_mb():.1f} MB", flush=True)
        return
    for m in ("none", "ja", "ko"):
        subprocess.run([sys.executable, __file__, "--data", str(data), "--memory", m], check=True)
    schemes = {"default": Fingerprinter(), "morph": MorphFingerprinter()}
    for name, fper in schemes.items():
        spread = eval_spread(data, fper, "installation-guide")
        print_spread(name, "installation-guide", {k: v for k, v in spread.items() if k in ("ja", "ko")})
        for lang, seed in (("ja", 5), ("ko", 6)):
            r = eval_articles(f"guide-{lang}", lang, guide_articles(data, lang), fper, seed, 20).report()
            k3 = r["by_k"][3]
            print(f"{name:10s} guide-{lang} near-duplicates: P={k3['precision']:.3f} false={k3['false_pairs']} "
                  f"R>=.95={k3['recall_0.95']} R.9-.95={k3['recall_0.9']} R.8-.9={k3['recall_0.8']} "
                  f"near={r['near']} distinct={r['distinct']} variants={r['recall_by_variant_k3']}", flush=True)
    for lang in ("ja", "ko"):
        pages = guide_pages(data, lang)
        for fper in schemes.values():
            for p in pages:
                fper.fingerprint_html(p, compiled=False)
        times: dict[str, list[float]] = {n: [] for n in schemes}
        for i in range(a.passes):
            order = list(schemes.items())[i % 2:] + list(schemes.items())[:i % 2]
            spent = dict.fromkeys(schemes, 0.0)
            for p in pages:
                for n, fper in order:
                    t = time.perf_counter()
                    fper.fingerprint_html(p, compiled=False)
                    spent[n] += time.perf_counter() - t
            for n in schemes:
                times[n].append(spent[n] / len(pages) * 1000)
        med = {n: statistics.median(v) for n, v in times.items()}
        print(f"guide-{lang} reference path, ms a page: " + ", ".join(f"{n} {v:.2f}" for n, v in med.items())
              + f" (morph / default {med['morph'] / med['default']:.2f}x)", flush=True)


if __name__ == "__main__":
    random.seed(0)
    main()
