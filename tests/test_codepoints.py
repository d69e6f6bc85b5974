"""Code-point masks (``dedup.features.codepoints``) against the definition:
each code point of ``RANGES`` tested alone, one match at a time, for every
class the tokeniser and the word kernel build tables from."""

from __future__ import annotations

import re

import numpy as np
import pytest
import regex

from scrapy_neardup.dedup.features import codepoints, tokens, word_kernel

CLASSES = [
    regex.compile(f"{tokens.HAN_CLASS}", regex.V1),
    regex.compile(f"{tokens.NOSPACE_CLASS}", regex.V1),
    regex.compile(f"{tokens.WORD_CLASS}", regex.V1),
    regex.compile(f"{tokens.TRIGRAM_CLASS}", regex.V1),
    regex.compile(r"[\p{L}\p{N}]"),
    re.compile(r"\d"),
    re.compile(r"[^\W_]"),
]


def one_at_a_time(single: re.Pattern | regex.Pattern) -> np.ndarray:
    """The mask by its definition: every code point of RANGES matched alone (a string of one character)."""
    mask = np.zeros(codepoints.SIZE, dtype=bool)
    match = single.fullmatch
    for lo, hi in codepoints.RANGES:
        mask[lo : hi + 1] = [match(chr(c)) is not None for c in range(lo, hi + 1)]
    return mask


@pytest.mark.parametrize("single", CLASSES, ids=lambda p: p.pattern[:40])
def test_runs_give_the_mask_of_each_code_point_alone(single):
    engine = re if isinstance(single, re.Pattern) else regex
    runs = engine.compile(single.pattern + "+", single.flags)
    (mask,) = codepoints.class_masks([runs])
    np.testing.assert_array_equal(mask, one_at_a_time(single))


def test_outside_the_ranges_nothing_is_set():
    (mask,) = codepoints.class_masks([r"[\s\S]+"])  # (every code point)
    inside = np.zeros(codepoints.SIZE, dtype=bool)
    for lo, hi in codepoints.RANGES:
        inside[lo : hi + 1] = True
    np.testing.assert_array_equal(mask, inside)


def test_case_folding_is_refused():
    """Under case folding a run can match what no character of it matches alone
    (U+FB06, the "st" ligature, folds to "st"), so such a pattern is refused."""
    assert regex.compile(r"(?i)[\uFB06]+", regex.V1).fullmatch("st")
    assert not regex.compile(r"(?i)[\uFB06]", regex.V1).fullmatch("s")
    with pytest.raises(ValueError, match="case folding"):
        codepoints.class_masks([regex.compile(r"(?i)[\uFB06]+", regex.V1)])
    with pytest.raises(ValueError, match="case folding"):
        codepoints.class_masks([re.compile(r"[a-z]+", re.IGNORECASE)])


def test_the_word_kernel_table_agrees_with_the_masks():
    """The kernel's table, bit by bit, from the definition's masks."""
    han, nospace, word, trigram, digit = (one_at_a_time(c) for c in (CLASSES[0], CLASSES[1], CLASSES[2], CLASSES[3],
                                                                       CLASSES[5]))
    table = word_kernel.CLASSES
    np.testing.assert_array_equal(table & word_kernel.HAN != 0, han)
    np.testing.assert_array_equal(table & word_kernel.NOSPACE != 0, nospace & ~han)
    np.testing.assert_array_equal(table & word_kernel.WORD != 0, word & ~(han | nospace))
    np.testing.assert_array_equal(table & word_kernel.TRIGRAM != 0, nospace & ~han & trigram)
    np.testing.assert_array_equal(table & word_kernel.DIGIT != 0, digit)


def test_odd_characters_are_where_the_engines_disagree():
    odd = set(tokens._odd_characters().replace("\\", ""))
    disagree = one_at_a_time(CLASSES[4])[:0x10000] ^ one_at_a_time(CLASSES[6])[:0x10000]
    assert odd == {chr(c) for c in np.flatnonzero(disagree).tolist()}
