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


def test_rerendered_articles_on_a_sample():
    root = shared_path("aeb")
    articles = quality.load_aeb(root)[:25]
    ps = quality.eval_articles("aeb-sample", "en", articles, Fingerprinter(), seed=1, n_distinct=10)
    rep = ps.report()
    k3 = rep["by_k"][3]
    assert k3["false_pairs"] == 0
    assert rep["recall_by_variant_k3"]["paragraphs-swapped"] == 1.0
    assert rep["recall_by_variant_k3"]["ad-counter-comments"] >= 0.9
    assert k3["recall"] >= 0.85


def test_short_release_notes_are_not_merged(sqlite_site):
    # pages made only of short blocks once lost their content weight to the template
    rl = sqlite_site / "releaselog"
    assert hamming(fp(rl / "3_3_7.html"), fp(rl / "3_7_7.html")) > 3
    assert hamming(fp(rl / "3_6_14_1.html"), fp(rl / "3_8_7_4.html")) > 3
