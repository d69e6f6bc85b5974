"""Language-aware, case-folded tokens.

The text is NFKC-normalised (full-width Latin and digits become ASCII) and
case-folded, then cut into runs by script:

* **Han** runs are segmented with jieba's dictionary (exact mode, HMM off, so
  a given text always gives the same words). rjieba, a Rust port of jieba
  with the same dictionary and algorithm, runs it when installed; it gives
  identical tokens (tested) about 18x faster. Without it, pure-Python jieba.
* **Kana** falls back to overlapping character bigrams (as Lucene's CJK
  analyser does): no dictionary needed, and a shared phrase still gives
  shared features. The term table holds the kana bigrams of wordfreq's
  Japanese words.
* **Thai, Lao, Khmer, Myanmar, Tibetan** — alphabets and abugidas written
  without spaces — give overlapping character *trigrams*: their letters and
  marks are few, so two unrelated pages share most of their bigrams (on
  generated Thai text, unrelated pages came 15.0 bits apart on average with
  bigrams, 26.5 with trigrams; ``bench/fallback.py``). A run of fewer than
  three characters is one token.
* Everything else is cut into **words**: runs of letters, digits and
  combining marks (so Devanagari or Arabic words stay whole). Hangul is
  space-delimited and takes this path.

This module is the reference: it makes Python strings. Fingerprinting uses
``word_kernel``, which cuts the same runs from a character table built from
these classes, with jieba's algorithm compiled (``han_segmenter``); tests
check that both give the same tokens.

Cost: O(length of the text); jieba's DP is linear in the Han run length.

>>> tokenize("The Quick  brown 狐狸跳过了懒狗 ｆｏｘ")
['the', 'quick', 'brown', '狐狸', '跳', '过', '了', '懒', '狗', 'fox']
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import numpy as np
import regex

from .codepoints import class_masks

_KANA = r"\p{Hiragana}\p{Katakana}\u30fc"
_TRIGRAM_SCRIPTS = r"\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"
_NOSPACE = _KANA + _TRIGRAM_SCRIPTS
# The kinds of run, as character classes of the regex module (V1); the
# compiled word kernel builds its own character table from these same classes.
HAN_CLASS = r"\p{Han}"
NOSPACE_CLASS = rf"[{_NOSPACE}]"  # kana (bigrams) and the trigram scripts
KANA_CLASS = rf"[[{_KANA}]--\p{{Han}}]"
TRIGRAM_CLASS = rf"[[{_TRIGRAM_SCRIPTS}]--\p{{Han}}]"
WORD_CLASS = rf"[[\p{{L}}\p{{N}}\p{{M}}]--[\p{{Han}}{_NOSPACE}]]"  # letters, digits and marks of other scripts
_RUNS = regex.compile(rf"(?P<han>{HAN_CLASS}+)|(?P<tri>{TRIGRAM_CLASS}+)|(?P<nospace>{KANA_CLASS}+)"
                      rf"|(?P<word>{WORD_CLASS}+)", regex.V1)


def _load_segmenter() -> tuple[str, Callable[[str], list[str]]]:
    try:
        import rjieba

        return "rjieba", lambda s: rjieba.cut(s, False)
    except ImportError:  # pragma: no cover - exercised when rjieba is absent
        import jieba

        jieba.setLogLevel(60)
        return "jieba", lambda s: jieba.lcut(s, HMM=False)


SEGMENTER_NAME, _segment = _load_segmenter()


def segment_han(run: str) -> list[str]:
    """jieba exact-mode words of a run of Han characters."""
    return _segment(run)


def char_bigrams(run: str) -> list[str]:
    """Overlapping bigrams; a one-character run is its own token."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def char_trigrams(run: str) -> list[str]:
    """Overlapping trigrams; a run of one or two characters is its own token."""
    if len(run) < 3:
        return [run]
    return [run[i : i + 3] for i in range(len(run) - 2)]


def run_tokens(kind: str | None, run: str) -> list[str]:
    """The tokens of one run of ``_RUNS`` of kind ``kind`` (its group name), Han
    runs segmented one by one (``tokenize_normalized`` batches them)."""
    if kind == "word":
        return [run]
    if kind == "han":
        return segment_han(run)
    return char_trigrams(run) if kind == "tri" else char_bigrams(run)


def normalize(text: str) -> str:
    # the quick check is ~100x cheaper than normalising text that is already NFKC (most pages)
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


# Fast path, stdlib re (several times faster than regex on long texts): a text
# with no Han, no no-space script and no combining mark is cut at non-[letter
# or digit] characters, which is exactly what the full pattern does on it
# (str.isalnum is \p{L} | \p{N}). The class of what needs the full pattern is
# made of the full pattern's own classes (see _NEEDS_FULL), so no script or mark
# is forgotten.
def _odd_characters() -> str:
    """The few BMP code points on which regex's letter-or-digit test and
    stdlib's disagree (their Unicode versions differ), found at import from
    masks of the two classes over every code point (``codepoints``), escaped
    for a character class."""
    slow_word, fast_word = class_masks([regex.compile(r"[\p{L}\p{N}]+"), re.compile(r"[^\W_]+")])
    odd = np.flatnonzero((slow_word ^ fast_word)[:0x10000])
    return "".join(regex.escape(chr(c)) for c in odd.tolist())


# What only the full pattern cuts right: Han, combining marks, no-space
# scripts and the odd characters. Property classes, because a long list of
# ranges makes either engine scan slowly.
_NEEDS_FULL = regex.compile(rf"[\p{{Han}}\p{{M}}{_NOSPACE}{_odd_characters()}]", regex.V1)
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")
_ASTRAL_WORD = regex.compile(r"[[\p{L}\p{N}]&&[\U00010000-\U0010FFFF]]", regex.V1)


_ASCII_RUNS = re.compile(r"[\x00-\x7f]+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def fast_path_ok(text: str) -> bool:
    """True when normalised ``text`` holds only plain words: no Han, no no-space
    script, no combining mark, no letter or digit beyond the BMP."""
    if text.isascii():
        return True
    # regex's property classes scan slowly: look at the non-ASCII characters only,
    # the first of them alone first, which finds a Han or kana page at once
    first = _NON_ASCII.search(text)
    if first and _NEEDS_FULL.match(text, first.start()):
        return False
    rest = _ASCII_RUNS.sub("", text)
    if _NEEDS_FULL.search(rest):
        return False
    # letters/digits beyond the BMP: checked only when there is such a character (emoji are not)
    return not _has_astral_words(rest)


def _has_astral_words(text: str) -> bool:
    """Whether ``text`` has a letter or digit beyond the BMP (emoji are not)."""
    return bool(_ASTRAL.search(text) and _ASTRAL_WORD.search(text))


_FAST_WORDS = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order; see the module docstring."""
    return tokenize_normalized(normalize(text))


def tokenize_normalized(text: str) -> list[str]:
    """``tokenize`` of a text that ``normalize`` has already been applied to."""
    if fast_path_ok(text):  # only space-delimited scripts without combining marks
        return _FAST_WORDS.findall(text)
    runs = [(m.lastgroup, m.group()) for m in _RUNS.finditer(text)]
    # All Han runs in one segmenter call (a page has hundreds): joined by
    # newlines, which end a run for jieba and come back as tokens of their own.
    han = [run for kind, run in runs if kind == "han"]
    words = iter(_segment("\n".join(han)) if han else ())
    out: list[str] = []
    append, extend = out.append, out.extend
    for kind, run in runs:
        if kind == "word":
            append(run)
        elif kind == "han":
            for w in words:
                if w == "\n":
                    break
                append(w)
        elif kind == "tri":
            extend(char_trigrams(run))
        else:
            extend(char_bigrams(run))
    return out
