"""Tokenisation across scripts, and jieba/rjieba agreement."""

from __future__ import annotations

import pytest

from scrapy_neardup.dedup.features.tokens import SEGMENTER_NAME, char_bigrams, char_trigrams, segment_han, tokenize
from tests.conftest import shared_path


def test_words_casefold_and_nfkc():
    assert tokenize("Straße ÉTÉ Ｆｕｌｌ１２") == ["strasse", "été", "full12"]


def test_chinese_segmented_by_jieba_dictionary():
    assert tokenize("我来到北京清华大学") == ["我", "来到", "北京", "清华大学"]


def test_mixed_scripts():
    assert tokenize("Python是一种编程语言 version 3") == ["python", "是", "一种", "编程语言", "version", "3"]


def test_fallback_bigrams_for_kana_and_trigrams_for_thai_and_its_neighbours():
    assert tokenize("สวัสดี") == char_trigrams("สวัสดี") == ["สวั", "วัส", "ัสด", "สดี"]
    assert tokenize("ひらがな") == ["ひら", "らが", "がな"]
    assert char_bigrams("a") == ["a"] and char_trigrams("ab") == ["ab"]
    # a kana run and a Thai run that touch are two runs, each cut its own way
    assert tokenize("ひらがสวัส ລາວ") == ["ひら", "らが", "สวั", "วัส", "ລາວ"]


def test_space_delimited_scripts_keep_combining_marks():
    assert tokenize("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]
    assert tokenize("مرحبا بالعالم") == ["مرحبا", "بالعالم"]
    assert tokenize("Привет, мир!") == ["привет", "мир"]
    assert tokenize("안녕하세요 세계") == ["안녕하세요", "세계"]


def test_rjieba_matches_jieba_on_real_chinese_text():
    """rjieba is only a faster runner of jieba's algorithm: it must give the same words."""
    if SEGMENTER_NAME != "rjieba":
        pytest.skip("rjieba not installed; pure jieba in use")
    import jieba

    root = shared_path("zh-cwced", "cleaned")
    for p in sorted(root.glob("*.txt")):
        text = p.read_text(encoding="utf-8")
        assert segment_han(text) == jieba.lcut(text, HMM=False), p.name


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_fast_path_equals_full_pattern(text):
    """The stdlib fast path must cut exactly as the full script-aware pattern."""
    from scrapy_neardup.dedup.features import tokens as T

    norm = T.normalize(text)
    full = []
    for m in T._RUNS.finditer(norm):
        run = m.group()
        full.extend(T.run_tokens(m.lastgroup, run))
    assert T.tokenize(text) == full


def _per_run_reference(text: str) -> list[str]:
    """Tokens with one segmenter call per Han run (what the batched call must equal)."""
    from scrapy_neardup.dedup.features import tokens as T

    out: list[str] = []
    for m in T._RUNS.finditer(T.normalize(text)):
        run = m.group()
        out.extend(T.run_tokens(m.lastgroup, run))
    return out


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("中文北京大学生活的了是在我国〇々㐀㐁豈丽𠀀𠀁かなカナab1 ，。\n\t-_")), max_size=120))
def test_one_segmenter_call_per_text_equals_one_per_run(text):
    assert tokenize(text) == _per_run_reference(text)


def test_one_segmenter_call_per_page_on_zh_pages():
    from scrapy_neardup.dedup.text import extract

    for p in sorted((shared_path("zh-cwced") / "original").glob("*.html"))[:30]:
        text = extract(p.read_bytes()).text
        assert tokenize(text) == _per_run_reference(text), p.name
