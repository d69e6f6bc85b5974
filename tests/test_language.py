"""The prose's language as part of a page's identity (``dedup.features.language``)."""

from __future__ import annotations

import html
import itertools

import pycld2
import pytest
from hypothesis import given, settings, strategies as st

from scrapy_neardup.dedup.features import UNDETERMINED, FeatureParams, language_mask, page_language
from scrapy_neardup.dedup.features.language import MAX_CHARS, PSEUDO_CODES, detect, detect_code, public_code
from scrapy_neardup.dedup.fingerprint import Fingerprinter
from scrapy_neardup.dedup.text import extract

SAMPLES = {
    "en": "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm garden all afternoon.",
    "de": "Der schnelle braune Fuchs springt über den faulen Hund, während die Katze im warmen Garten schläft.",
    "fr": "Le renard brun rapide saute par-dessus le chien paresseux pendant que le chat dort dans le jardin.",
    "ru": "Быстрая коричневая лиса прыгает через ленивую собаку, пока кошка спит в тёплом саду весь день.",
    "ja": "素早い茶色の狐が怠け者の犬を飛び越え、猫は一日中暖かい庭で眠っています。これは日本語の文章です。",
    "zh": "敏捷的棕色狐狸跳过了懒惰的狗，而猫整个下午都在温暖的花园里睡觉。这是一段中文文字。",
    "ar": "الثعلب البني السريع يقفز فوق الكلب الكسول بينما تنام القطة في الحديقة الدافئة طوال فترة بعد الظهر.",
}

LISTING = "\n".join(f"$ sudo apt-get install --no-install-recommends package-{i} && systemctl restart service-{i}"
                    for i in range(60))


@pytest.mark.parametrize("code", sorted(SAMPLES))
def test_detects_the_language_of_prose(code):
    assert detect(SAMPLES[code]) == code


def test_chinese_in_either_script_is_one_language():
    assert detect("這是一段繁體中文文字，敏捷的棕色狐狸跳過了懶惰的狗，而貓整個下午都在溫暖的花園裡睡覺。") == "zh"


def test_every_reported_code_is_a_bcp47_language_subtag_or_und():
    """What items and the index carry: ISO 639-1 where the language has one,
    else ISO 639-2/3 (lower-case letters, 2 or 3 of them), never CLD2's
    script-only or joke pseudo-languages (xx-Qaai, zzb...), which are "und"."""
    codes = {public_code(code) for _, code in pycld2.LANGUAGES}
    assert all(c.isascii() and c.isalpha() and c.islower() and len(c) in (2, 3) for c in codes), codes
    assert {"xx", "zzb", "zzp", "zzh", "zze", "tlh"}.isdisjoint(codes)
    assert {public_code(c) for c in PSEUDO_CODES} == {UNDETERMINED}
    assert {"xx-Qaai", "xx-Latn", "zzb", "tlh"} <= PSEUDO_CODES
    assert (public_code("zh-Hant"), public_code("sr-ME"), public_code("syr"), public_code("ceb")) == ("zh", "sr", "syr", "ceb")


def test_a_garbled_page_is_undetermined():
    """Runic letters: CLD2 names only the script (xx-Runr). The page is
    reported "und" (items, index) and gets the undetermined mask, 0."""
    runes = "ᚠᚢᚦᚨᚱᚲ ᚷᚹᚺᚾ ᛁᛃᛇᛈ ᛉᛊᛏᛒ ᛖᛗᛚᛜ ᛞᛟᚠᚢ " * 10
    assert detect_code(runes) == "xx-Runr" and detect(runes) == UNDETERMINED
    page = f"<html><body><p>{runes}</p></body></html>".encode()
    r = Fingerprinter().fingerprint_html(page)
    assert r.ok and r.language == UNDETERMINED
    assert r.value == Fingerprinter(FeatureParams(language=False)).fingerprint_html(page).value


def test_too_little_or_no_prose_is_undetermined():
    assert detect("") == UNDETERMINED
    assert detect("ls -l") == UNDETERMINED
    assert language_mask(UNDETERMINED) == 0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_detect_never_raises(text):
    assert isinstance(detect(text), str)


def test_detect_reads_at_most_max_bytes_and_survives_a_cut_character():
    assert detect("中" + SAMPLES["zh"] * (MAX_CHARS // 10)) == "zh"  # cut inside the text, not inside a character
    assert detect("x" + SAMPLES["ru"] * 2000) == "ru"


def test_masks_of_two_languages_differ_in_far_more_than_k_bits():
    """Every pair of codes CLD2 can give (and the undetermined one, mask 0):
    their masks differ in at least 2k + 1 = 7 bits, so two fingerprints within
    k before the masks are more than k apart after."""
    codes = sorted({code.split("-")[0] for _, code in pycld2.LANGUAGES} | {UNDETERMINED})
    masks = [language_mask(c) for c in codes]
    assert min((a ^ b).bit_count() for a, b in itertools.combinations(masks, 2)) >= 7


def _page(prose: str, listing: str = "", nav: str = "") -> bytes:
    return (f"<html><body><nav>{html.escape(nav)}</nav><p>{html.escape(prose)}</p>"
            f"<pre>{html.escape(listing)}</pre></body></html>").encode()


def test_the_language_is_read_from_prose_not_listings_or_furniture():
    prose = " ".join([SAMPLES["de"]] * 3)
    page = extract(_page(prose, LISTING, nav=SAMPLES["en"] * 5))
    assert detect(page.text) != "de"  # the whole visible text is mostly listing and English navigation
    assert page_language(page) == "de"


def test_pages_in_two_languages_sharing_a_long_listing_are_far_apart():
    fp = Fingerprinter()
    de = fp.fingerprint_html(_page(" ".join([SAMPLES["de"]] * 3), LISTING))
    fr = fp.fingerprint_html(_page(" ".join([SAMPLES["fr"]] * 3), LISTING))
    assert (de.language, fr.language) == ("de", "fr")
    assert (de.value ^ fr.value).bit_count() > 3
    plain = Fingerprinter(FeatureParams(language=False, listing_prose_tokens=0))
    assert plain.fingerprint_html(_page(" ".join([SAMPLES["de"]] * 3), LISTING)).language == UNDETERMINED


def test_the_mask_keeps_distances_within_one_language():
    with_lang, without = Fingerprinter(), Fingerprinter(FeatureParams(language=False))
    a = _page(" ".join([SAMPLES["en"]] * 4))
    b = _page(" ".join([SAMPLES["en"]] * 4) + " An update was appended at noon today.")
    d = [(f.fingerprint_html(a).value ^ f.fingerprint_html(b).value).bit_count() for f in (with_lang, without)]
    assert d[0] == d[1]
