"""Which characters keep a text NFKC-normalised, as tables the compiled scans read.

The features read a page's own text when it is NFKC already (so block offsets
hold), after putting a space for each *separator* that NFKC changes
(full-width punctuation such as "，": a separator before and after NFKC, so the
tokens are the same). ``SEPARATORS_NOT_NFKC`` matches those; ``QUICK_CHECK``
says, per BMP code point, 0 when the character can never make a text
non-NFKC (the Standard's quick check is Yes and it composes with nothing
before it), 1 when it is such a separator, 2 otherwise (unknown: check the
text). ``raw_scan`` keeps the largest value over the characters it writes, so a
page of values 0 and 1 needs no check in Python.

>>> int(QUICK_CHECK[ord("中")]), int(QUICK_CHECK[ord("，")]), int(QUICK_CHECK[ord("Ａ")]), int(QUICK_CHECK[0x301])
(0, 1, 2, 2)
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import regex

from .word_kernel import CLASSES, HAN, NOSPACE, WORD


def _separators() -> list[str]:
    """BMP characters that NFKC changes, where both the character and what NFKC
    makes of it are only separators: no word character, Han, combining mark or
    no-space script. (No mark, so NFKC cannot compose them
    with a neighbour: NFKC of the text equals the text with each replaced.)"""
    refused = WORD | HAN | NOSPACE
    mark = regex.compile(r"\p{M}")

    def separator(ch: str) -> bool:
        return ord(ch) <= 0xFFFF and not (CLASSES[ord(ch)] & refused or mark.match(ch))

    return [ch for ch in map(chr, range(0x10000)) if not 0xD800 <= ord(ch) <= 0xDFFF
            and separator(ch) and (n := unicodedata.normalize("NFKC", ch)) != ch and n and all(map(separator, n))]


def _quick_check(separators: list[str]) -> np.ndarray:
    """uint8 per BMP code point: 0 quick check Yes and never the second of a
    composition, 1 a separator NFKC changes, 2 anything else."""
    table = np.zeros(0x10000, dtype=np.uint8)
    seconds = set()  # characters that canonically compose with the one before them
    for cp in range(0x10000):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or not unicodedata.is_normalized("NFKC", ch) or unicodedata.combining(ch):
            table[cp] = 2
        d = unicodedata.decomposition(ch)
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                seconds.add(int(parts[1], 16))
    for cp in seconds:
        if cp < 0x10000:
            table[cp] = 2
    table[0x1100:0x1200] = 2  # Hangul jamo compose algorithmically
    for ch in separators:
        table[ord(ch)] = 1
    return table


_SEPARATOR_CHARS = _separators()
SEPARATORS_NOT_NFKC = re.compile("[" + "".join(map(re.escape, _SEPARATOR_CHARS)) + "]")
QUICK_CHECK = _quick_check(_SEPARATOR_CHARS)
