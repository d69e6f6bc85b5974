"""Which code points a character class matches, as a mask over all of Unicode.

The tokeniser's classes are regular-expression classes (``regex``'s Unicode
properties, stdlib's ``\\d`` and ``\\w``); the compiled word kernel needs them
as a table of every code point (``word_kernel.CLASSES``) and the tokeniser's
fast path needs the few code points where two engines disagree
(``tokens._odd_characters``). Both are built at import, in every process
that fingerprints (the crawl's worker among them, before it can take its
first page), so they are built the cheap way: a class is matched as runs
(``[class]+``) over one string that holds every code point of ``RANGES`` in
order, decoded from a numpy array, and each run sets a slice of the mask.
That is the same set as testing each code point alone, for a class that
matches one code point with no context (``tests/test_codepoints.py``
compares them, code point by code point): no case-insensitive matching
(under ``(?i)`` a class such as ``[\uFB06]`` matches the neighbours "st",
not "s" or "t" alone: refused) and no lookaround or anchor. It costs ~10 ms a
class instead of the ~0.2 s that building the string code point by code
point and matching one at a time cost.

>>> mask = class_masks([r"\\d+"])[0]
>>> bool(mask[ord("7")]), bool(mask[ord("x")]), bool(mask[0x0663])
(True, False, True)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import regex

#: the code points the tables describe: every plane with assigned characters but
#: the surrogates (not characters) and planes 4-13 and 15-16 (unassigned or private use)
RANGES = ((0, 0xD7FF), (0xE000, 0x3FFFF), (0xE0000, 0xE0FFF))
SIZE = 0x110000  # a mask's length: every code point (those outside RANGES stay False)


def _every_code_point() -> list[tuple[int, str]]:
    """(first code point, the string of every code point of the range) for each of ``RANGES``. O(size)."""
    return [(lo, np.arange(lo, hi + 1, dtype="<u4").tobytes().decode("utf-32-le")) for lo, hi in RANGES]


def class_masks(patterns: Iterable[str | re.Pattern | regex.Pattern]) -> list[np.ndarray]:
    """A bool mask of ``SIZE`` per pattern: True where the pattern matches that
    code point. Each pattern must match runs of one character class (``[...]+``,
    ``\\p{Han}+``, a compiled ``re`` or ``regex`` pattern; a string is compiled
    with ``regex``, version 1), without case folding (``ValueError``). O(SIZE)
    per pattern; the strings are made once."""
    strings = _every_code_point()
    masks = []
    for pattern in patterns:
        compiled = regex.compile(pattern, regex.V1) if isinstance(pattern, str) else pattern
        if compiled.flags & re.IGNORECASE:  # (regex.IGNORECASE is the same bit)
            raise ValueError(f"{compiled.pattern!r}: a class matched without case folding is needed "
                             "(with it, a run can match characters that do not match alone)")
        mask = np.zeros(SIZE, dtype=bool)
        for lo, chars in strings:
            for m in compiled.finditer(chars):
                mask[lo + m.start() : lo + m.end()] = True
        masks.append(mask)
    return masks
