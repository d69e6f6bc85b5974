"""Pins the detection quality of the chosen scheme on small real samples (full numbers: bench/quality.py)."""

from __future__ import annotations

import sys
import tarfile

import pytest

from scrapy_neardup.dedup import Fingerprinter, hamming
from tests.conftest import ROOT, shared_path

sys.path.insert(0, str(ROOT / "bench"))
import quality  # noqa: E402


@pytest.fixture(scope="module")
def sqlite_site(tmp_path_factory):
    tar = shared_path("sites", "sqlite3-doc.tar.gz")
    out = tmp_path_factory.mktemp("site")
    with tarfile.open(tar) as tf:
        tf.extractall(out, filter="data")
    return out / "sqlite3-doc" / "site"


def fp(path) -> int:
    r = Fingerprinter().fingerprint_file(path)
    assert r.ok, path
    return r.value


def test_link_list_pages_no_longer_collide(sqlite_site):
    # three cross-reference pages made of file names ("... html") once shared one fingerprint
    names = ["doc_backlink_crossref.html", "doc_keyword_crossref.html", "doc_pagelink_crossref.html"]
    fps = [fp(sqlite_site / n) for n in names]
    assert min(hamming(a, b) for i, a in enumerate(fps) for b in fps[i + 1 :]) > 3


def test_real_near_duplicates_found(sqlite_site):
    rl = sqlite_site / "releaselog"
    assert hamming(fp(rl / "3_40_1.html"), fp(rl / "current.html")) <= 3  # an exact copy
    assert hamming(fp(rl / "3_8_4_1.html"), fp(rl / "3_8_4_2.html")) <= 3  # consecutive patch notes


def test_distinct_template_pages_stay_apart(sqlite_site):
    pages = sorted(p for p in sqlite_site.glob("*.html"))[:60]
    fps = {p.name: fp(p) for p in pages}
    sets = {p.name: quality.shingles(Fingerprinter().fingerprint_file(p).text) for p in pages}
    names = sorted(fps)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if quality.jaccard(sets[a], sets[b]) < 0.2:
                assert hamming(fps[a], fps[b]) > 3, (a, b)


@pytest.fixture(scope="module")
def rerendered() -> dict:
    """``bench/quality.py``'s report on 25 real articles re-rendered with trivial changes."""
    articles = quality.load_aeb(shared_path("aeb"))[:25]
    return quality.eval_articles("aeb-sample", "en", articles, Fingerprinter(), seed=1, n_distinct=10).report()


def test_rerendered_articles_on_a_sample(rerendered):
    k3 = rerendered["by_k"][3]
    assert k3["false_pairs"] == 0
    assert rerendered["recall_by_variant_k3"]["paragraphs-swapped"] == 1.0
    assert k3["recall"] >= 0.85


@pytest.mark.xfail(strict=True, reason="schemes v8 and v9 (common words damped by word frequency) find 0.88 of the "
                   "ad/counter/comment variants at k=3, v7 found 0.92: a known recall cost of issue 25, kept open")
def test_ad_counter_and_comment_variants_stay_within_k(rerendered):
    assert rerendered["recall_by_variant_k3"]["ad-counter-comments"] >= 0.9


def test_short_release_notes_are_not_merged(sqlite_site):
    # pages made only of short blocks once lost their content weight to the template
    rl = sqlite_site / "releaselog"
    assert hamming(fp(rl / "3_3_7.html"), fp(rl / "3_7_7.html")) > 3
    assert hamming(fp(rl / "3_6_14_1.html"), fp(rl / "3_8_7_4.html")) > 3


@pytest.fixture(scope="module")
def guide_spread() -> dict[str, dict]:
    """``bench/quality.py --spread``'s figures on the installation guide (84
    pages in each of 19 languages): fingerprinted once for the module."""
    shared_path("sites", "installation-guide.tar.gz")
    return quality.eval_spread(shared_path(), Fingerprinter(), "installation-guide")


def test_unrelated_pages_stay_apart_in_every_language_of_the_guide(guide_spread):
    """Within one language, pages that share nothing (word 5-shingle J < 0.2)
    sit about 32 bits apart, as a binomial(64, 1/2) would; common words of the
    language must not pull them together. No such pair within 6 bits, in any
    language (scheme v7's stop lists left 2 within 6 and 194 within 10; its lowest mean was 20.5)."""
    assert len(guide_spread) == 19, sorted(guide_spread)
    close = {lang: r["within_6"] for lang, r in guide_spread.items() if r["within_6"]}
    assert close == {}, close
    for lang, r in guide_spread.items():
        assert r["pages"] >= 80 and r["pairs"] >= 1000, (lang, r)
        assert r["mean"] >= 24, (lang, r["mean"])


def _thai_like_pages(n_pages: int, seed: int = 1) -> list[bytes]:
    """Unrelated pages of generated Thai: words of 1-3 syllables (a consonant,
    often a vowel or tone mark), drawn from a 20,000-word vocabulary by a Zipf
    law (the common words every page shares) mixed with 30% from a topic of
    40 words of the page's own, written without spaces within a phrase of 8
    words, as Thai is. No real Thai text ships with the tests; bench/fallback.py
    measures the same on words drawn from the Thai National Corpus's counts."""
    import random

    import numpy as np

    rng = random.Random(seed)
    consonants = [chr(c) for c in range(0x0E01, 0x0E2F)]
    vowels = ["\u0e30", "\u0e32", "\u0e34", "\u0e35", "\u0e38", "\u0e39", "\u0e40", "\u0e41", "\u0e42", "\u0e31",
              "\u0e48", "\u0e49"]

    def word() -> str:
        return "".join(rng.choice(consonants) + (rng.choice(vowels) if rng.random() < 0.6 else "")
                       for _ in range(rng.randint(1, 3)))

    vocab = list(dict.fromkeys(word() for _ in range(30_000)))[:20_000]
    cum = np.cumsum([1 / (r + 1) for r in range(len(vocab))])
    cum /= cum[-1]
    pages = []
    for _ in range(n_pages):
        topic = [vocab[rng.randrange(200, len(vocab))] for _ in range(40)]
        n = rng.randint(300, 1200)
        words = [rng.choice(topic) if rng.random() < 0.3 else vocab[int(np.searchsorted(cum, rng.random()))]
                 for _ in range(n)]
        paras = ["".join(words[i:i + 8]) for i in range(0, n, 8)]
        body = "".join(f"<p>{' '.join(paras[i:i + 8])}</p>" for i in range(0, len(paras), 8))
        pages.append(f"<html><body><h1>{''.join(topic[:3])}</h1>{body}</body></html>".encode())
    return pages


def test_unrelated_pages_of_a_script_without_spaces_stay_apart():
    """Thai, Lao, Khmer, Myanmar and Tibetan are cut in character trigrams: their
    letters and marks are few, so unrelated pages shared most of their
    bigrams (scheme v8 on this set: mean 19.8 bits, 2 pairs within 10, the closest 9; v9: 26.6, the closest 16)."""
    f = Fingerprinter()
    results = [f.fingerprint_html(p) for p in _thai_like_pages(40)]
    assert all(r.ok for r in results) and {r.language for r in results} == {"th"}
    fps = [r.value for r in results]
    d = [hamming(a, b) for i, a in enumerate(fps) for b in fps[i + 1:]]
    assert min(d) > 10, sorted(d)[:5]
    assert sum(d) / len(d) >= 24


def test_the_fingerprint_follows_its_weights():
    """``bench/spread_diagnosis.py``'s check, on 24 English pages of the guide:
    averaged over hash seeds, two pages lie ``64 * arccos(cos) / pi`` bits apart,
    ``cos`` being the weighted cosine of their feature vectors, as random
    hyperplanes would put them; so a small distance between unrelated pages is
    in the features and weights, not in the hashing (measured on all 19 languages:
    within 0.3 bits). The dot product's split by kind and by place adds up."""
    import tarfile
    import tempfile
    from pathlib import Path

    import spread_diagnosis as sd

    from scrapy_neardup.dedup.features import FeatureParams
    from scrapy_neardup.dedup.text import extract

    params = FeatureParams()
    fpers = [Fingerprinter(params, seed=s) for s in range(8)]
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(shared_path("sites", "installation-guide.tar.gz")) as tf:
            tf.extractall(tmp, members=[m for m in tf.getmembers() if "/site/en/" in m.name and m.name.endswith(".html")],
                          filter="data")
        files = sorted((Path(tmp) / "installation-guide" / "site" / "en").glob("*.html"))[:24]
        records = [r for f in files if (r := sd.page_record(f.name, extract(f.read_bytes()), params, fpers))]
    res = sd.diagnose("en", records, closest=2)
    assert res["pairs"] >= 200 and res["pairs_two_detected_languages"] == 0
    assert abs(res["observed_mean_all_seeds"] - res["predicted_mean"]) < 1.5, res
    assert abs(res["rademacher_projection_mean"] - res["predicted_mean"]) < 1.0, res
    assert abs(sum(res["dot_share_by_kind"].values()) - 1) < 1e-9
    assert abs(sum(res["dot_share_by_place"].values()) - 1) < 1e-9
