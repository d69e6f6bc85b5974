"""Term weights from word frequencies (scheme v8): the table, the language codes, both paths."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_neardup.dedup.features import FeatureParams, feature_vector, hashed_features, page_features
from scrapy_neardup.dedup.features.language import detect_code
from scrapy_neardup.dedup.features.term_table import data_language, factors_of, term_factors, term_hashes
from scrapy_neardup.dedup.text import extract


@pytest.mark.parametrize(("cld2", "data"), [("no", "nb"), ("nn", "nb"), ("iw", "he"), ("tl", "fil"), ("hr", "sh"),
                                            ("zh", "zh"), ("zh-Hant", "zh-Hant"), ("en", "en"), ("el", "el"),
                                            ("ja", "ja"), ("ko", "ko"), ("th", None), ("und", None), ("", None)])
def test_cld2_codes_map_to_the_data(cld2, data):
    assert data_language(cld2) == data


def test_cld2_says_what_the_mapping_expects():
    assert detect_code("Dette er en norsk tekst om hvordan man installerer systemet på en datamaskin, "
                       "og hva man må gjøre etterpå for at det skal virke som det skal.") == "no"
    assert detect_code("這是一個關於如何在電腦上安裝作業系統的說明文件，請仔細閱讀以下各個章節的內容。") == "zh-Hant"


def test_weight_falls_as_one_over_frequency_above_the_knee():
    z = np.array([3.0, 4.0, 5.0, 7.0])
    assert factors_of(z, 4.0).tolist() == [1.0, 1.0, 0.1, 0.001]
    nb = term_factors("nb", 4.0)
    assert nb["og"] < 0.002 and "installasjonsprogrammet" not in nb  # common words damped, rare ones not listed
    assert term_factors(None, 4.0) == {}


def test_traditional_chinese_and_kana_tokens_are_in_the_table():
    assert "們" in "".join(term_factors("zh-Hant", 4.0)) and "的" in term_factors("zh-Hant", 4.0)
    ja = term_factors("ja", 4.0)
    assert {"は", "を", "ます", "です", "して"} <= ja.keys()  # lone particles and kana bigrams as the kernel cuts them


def test_hash_table_is_sorted_and_matches_the_factors():
    hashes, factors = term_hashes("en", 4.0, 7)
    assert (np.diff(hashes.astype(np.float64)) >= 0).all() and len(hashes) == len(term_factors("en", 4.0))
    assert sorted(factors.tolist()) == sorted(term_factors("en", 4.0).values())


@pytest.mark.parametrize("text", [
    "Η εγκατάσταση του συστήματος είναι απλή και γίνεται σε λίγα βήματα από τον χρήστη με το πρόγραμμα. " * 4,
    "インストーラはディスクを分割してから、システムをインストールします。設定は後で変更できます。" * 4,
    "설치 프로그램은 디스크를 나눈 다음 시스템을 설치합니다. 설정은 나중에 바꿀 수 있습니다. " * 4,
    "這是一個關於如何在電腦上安裝作業系統的說明文件，請仔細閱讀以下各個章節的內容。" * 4,
    "ระบบติดตั้งจะแบ่งพาร์ติชันของดิสก์ก่อน แล้วจึงติดตั้งระบบลงในเครื่องของคุณ " * 4])
@pytest.mark.parametrize("seed", [0, 12345])
@pytest.mark.parametrize("params", [FeatureParams(zipf_knee=4.0, max_share=0.01), FeatureParams(),
                                    FeatureParams(tf_power=0.5, max_share=0.0), FeatureParams(bigrams=True)])
def test_both_paths_give_the_same_weighted_features(text, seed, params):
    page = extract(f"<html><body><p>{text}</p><nav>Home · Next the the</nav></body></html>".encode())
    names, weights, n = feature_vector(page, params)
    from scrapy_neardup.dedup.features import feature_hashes

    hashes, cweights, cn = hashed_features(page, params, seed, compiled=True)
    assert n == cn
    assert dict(zip(feature_hashes(names, seed).tolist(), weights.tolist())) == dict(zip(hashes.tolist(), cweights.tolist()))


def test_a_common_word_counts_once_per_page_and_content_words_keep_their_counts():
    text = "the installer partitions the disk and the installer then installs the system on the disk " * 5
    page = extract(f"<html><body><p>{text}</p></body></html>".encode())
    factors = term_factors("en", 5.0)
    weights, _ = page_features(page, FeatureParams(max_share=0.0))
    assert weights["the"] == pytest.approx(factors["the"])  # 25 times on the page, once in its weight
    assert weights["installer"] == 10.0 and "installer" not in factors
    assert weights["disk"] == 10.0


def test_a_language_the_table_lacks_counts_every_token_once():
    """Thai (no wordfreq data): no factor, and any token may be one of the
    language's common words, so each counts once (weighs 1; a number 0.2),
    whatever its count; then the share cap and the furniture weight apply."""
    text = "ระบบติดตั้งจะแบ่งพาร์ติชันของดิสก์ก่อน แล้วจึงติดตั้งระบบลงในเครื่องของคุณ 2024 " * 4
    page = extract(f"<html><body><p>{text}</p></body></html>".encode())
    assert detect_code(text) == "th" and data_language("th") is None
    weights, _ = page_features(page, FeatureParams(max_share=0.0))
    assert weights["2024"] == pytest.approx(0.2)
    assert {w for t, w in weights.items() if t != "2024"} == {1.0}


def test_an_uncovered_language_is_not_a_knee_no_token_reaches():
    """Counting once is for a language the table lacks, not for a page whose
    language damps nothing under unusual parameters (knee 9: plain counts)."""
    text = "the installer partitions the disk and the installer then installs the system on the disk " * 5
    page = extract(f"<html><body><p>{text}</p></body></html>".encode())
    weights, _ = page_features(page, FeatureParams(max_share=0.0, zipf_knee=9.0))
    assert weights["the"] == 25.0 and weights["disk"] == 10.0


def test_the_scheme_names_the_table():
    from scrapy_neardup.dedup.features.term_table import table_digest
    from scrapy_neardup.dedup.fingerprint import SCHEME_VERSION, Fingerprinter

    scheme = Fingerprinter().scheme
    assert SCHEME_VERSION == 9 and scheme.startswith("neardup-v9;")
    assert f";terms=wordfreq-3.1.1:{table_digest()};" in scheme and len(table_digest()) == 12


V7_SCHEME = ("neardup-v7;text=lexbor-visible;tok=jieba-dict+bigram-fallback;"
             "feat=fw0.2ld0.5sw0.05nw0.2tf1unitw1sb20ms0.05lp40lang;lang=cld2;hash=mmh3x64s0;f=64")
V8_SCHEME = ("neardup-v8;text=lexbor-visible;tok=jieba-dict+bigram-fallback;"
             "feat=fw0.2ld0.5zk5nw0.2tf1unitw1sb20ms0.05lp40lang;terms=wordfreq-3.1.1:f91ae19cdb7a;lang=cld2;"
             "hash=mmh3x64s0;f=64")


@pytest.mark.parametrize("old", [V7_SCHEME, V8_SCHEME], ids=["v7", "v8"])
def test_an_older_store_is_refused_with_the_clear_error(tmp_path, old):
    from scrapy_neardup.dedup.fingerprint import Fingerprinter
    from scrapy_neardup.dedup.store import SimhashStore, StoreMismatchError

    SimhashStore.open(tmp_path / "store", scheme=old).close()
    with pytest.raises(StoreMismatchError, match=rf"holds fingerprints of scheme '{old[:10]};.*asked for 'neardup-v9;"
                                                 r".*cannot be compared: use another store"):
        SimhashStore.open(tmp_path / "store", scheme=Fingerprinter().scheme)
