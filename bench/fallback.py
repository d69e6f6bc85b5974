"""The fallback for a language the term table lacks, measured on generated text.

    pip install --target /work/peers/fallback --no-deps pythainlp      # for its Thai National Corpus word counts
    pip install --target /work/peers/fallback wordfreq==3.1.1         # for the English control
    PYTHONPATH=/work/peers/fallback .venv/bin/python bench/fallback.py [--pages 84] [--v8]

A language the table lacks (Thai, and any undetermined page) gets no term
factor, and every token counts once (``term_table.data_language`` is None;
``weights._final_weights``), with the share cap, the number weight and the
furniture weight. ``--v8`` measures the same text as scheme v8 cut and
counted it (Thai in bigrams, plain counts). The real
measurement of that fallback is a leave-one-out on the installation guide
(``bench/quality.py --uncovered all``: each of its 19 languages treated as
if the table lacked it). There is no real Thai in the shared data, so this
script *generates* pages: each is ``--words`` words drawn from a language's
real word frequencies (a unigram model: the common words every page of the
language uses, in their real proportions), 70% from the whole vocabulary and
30% from a topic of 40 words of its own (drawn among the ranks 200-20,000),
in paragraphs of 40-80 words. Thai words come from the Thai National Corpus
counts that pythainlp ships (``tnc_freq.txt``), joined without spaces within
a phrase of 5-12 words, as Thai is written; English from wordfreq 3.1.1 (the
same data the table is built from) as a control: English with the table, and
English with the fallback.

Reports per case the spread of all pairs of ``--pages`` generated pages
(every pair is unrelated: no shared 5-shingle but by chance) and the recall
of near-duplicates made by ``quality.variants`` (another template,
ad/counter/comments changed, paragraphs swapped, an update appended) at k = 3.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from quality import SCHEMES, _binomial_at_most, _scheme, eval_articles, shingles, treat_as_uncovered  # noqa: E402
from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402


def thai_frequencies() -> list[tuple[str, float]]:
    from pythainlp.corpus import tnc

    return sorted(((w, float(n)) for w, n in tnc.word_freqs() if w.strip()), key=lambda x: -x[1])


def english_frequencies() -> list[tuple[str, float]]:
    import wordfreq

    return sorted(((w, f) for w, f in wordfreq.get_frequency_dict("en", "best").items() if w.isalpha()),
                  key=lambda x: -x[1])


class Generator:
    """Pages of words drawn from ``freqs`` (see the module docstring)."""

    def __init__(self, freqs: list[tuple[str, float]], joiner: str, seed: int) -> None:
        self.words = [w for w, _ in freqs]
        self.cum = list(itertools.accumulate(f for _, f in freqs))
        self.joiner = joiner  # "" for Thai: words run together within a phrase
        self.rng = random.Random(seed)

    def word(self) -> str:
        return self.words[bisect.bisect(self.cum, self.rng.random() * self.cum[-1])]

    def article(self, n_words: int) -> tuple[str, str]:
        rng = self.rng
        topic = [self.words[rng.randrange(200, min(20_000, len(self.words)))] for _ in range(40)]
        words = [rng.choice(topic) if rng.random() < 0.3 else self.word() for _ in range(n_words)]
        paras, i = [], 0
        while i < len(words):
            n = rng.randint(40, 80)
            para, j = [], i
            while j < min(i + n, len(words)):
                k = rng.randint(5, 12)
                para.append(self.joiner.join(words[j:min(j + k, i + n, len(words))]))
                j += k
            paras.append(" ".join(para))
            i += n
        title = self.joiner.join(topic[:4])
        return title, "\n".join(paras)


def spread(fper: Fingerprinter, articles: list[tuple[str, str]]) -> dict:
    from quality import Template  # the same page frame as the near-duplicates get

    frame = Template("Site", "en", ["Home", "News"], ["Most read"], "Footer", True)
    fps, sh = [], []
    for title, text in articles:
        r = fper.fingerprint_html(frame.render(title, text.split("\n")))
        if r.ok:
            fps.append(r.value)
            sh.append(shingles(text))
    f = np.array(fps, dtype=np.uint64)
    ii, jj = np.triu_indices(len(f), 1)
    d = np.bitwise_count(f[ii] ^ f[jj]).astype(np.float64)
    return {"pages": len(f), "pairs": int(d.size), "mean": float(d.mean()), "sd": float(d.std()), "min": int(d.min()),
            **{f"within_{k}": int((d <= k).sum()) for k in (3, 6, 10)}, "binomial_10": d.size * _binomial_at_most(10)}


def as_v8() -> None:
    """Patch the reference path to tokenise and count as scheme v8 did, and take it."""
    from scrapy_neardup.dedup import jit
    from scrapy_neardup.dedup.features import tokens, weights

    tokens.char_trigrams = tokens.char_bigrams  # type: ignore[assignment]
    final = weights._final_weights
    weights._final_weights = lambda counts, term, params, common=None, uncovered=False: final(  # type: ignore[assignment]
        counts, term, params, common, False)
    jit.ready = lambda *args, **kw: False  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=84)
    ap.add_argument("--words", default="300,1500", help="page length range in words")
    ap.add_argument("--schemes", default="default", help="bench/quality.py scheme names, comma-separated")
    ap.add_argument("--out", default="")
    ap.add_argument("--v8", action="store_true",
                    help="as scheme v8 did: Thai in character bigrams, an uncovered language's tokens counted as "
                         "they come (the reference path, patched)")
    a = ap.parse_args()
    if a.v8:
        as_v8()
    lo, hi = map(int, a.words.split(","))
    cases = [("th (fallback)", thai_frequencies, "", False), ("en (table)", english_frequencies, " ", False),
             ("en (fallback)", english_frequencies, " ", True)]
    results: dict = {}
    for name, freqs, joiner, uncovered in cases:
        if uncovered:
            treat_as_uncovered({"all"})
        gen = Generator(freqs(), joiner, seed=7)
        articles = [gen.article(gen.rng.randint(lo, hi)) for _ in range(a.pages)]
        for scheme in a.schemes.split(","):
            fper = Fingerprinter(SCHEMES[scheme]() if scheme in SCHEMES else _scheme(scheme))
            s = spread(fper, articles)
            r = eval_articles(name, "en", articles, fper, 8, 20).report()
            k3 = r["by_k"][3]
            results[f"{scheme} {name}"] = {
                "spread": s, "precision": k3["precision"], "recall": {b: k3[f"recall_{b}"] for b in ("0.95", "0.9", "0.8")},
                "variants": r["recall_by_variant_k3"]}
            print(f"{scheme:10s} {name:14s} pages {s['pages']} pairs {s['pairs']} mean {s['mean']:.1f} sd {s['sd']:.1f} "
                  f"min {s['min']} <=3 {s['within_3']} <=6 {s['within_6']} <=10 {s['within_10']} "
                  f"(binomial {s['binomial_10']:.2f}); near-duplicates P={k3['precision']:.3f} "
                  f"R>=.95={k3['recall_0.95']} R.9-.95={k3['recall_0.9']} R.8-.9={k3['recall_0.8']} near={r['near']} "
                  f"variants={r['recall_by_variant_k3']}", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
