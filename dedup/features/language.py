"""The language of a page's prose, part of its identity.

Two pages whose prose is in two languages are not near-duplicates, whatever
they share: a partly translated chapter and its original share untranslated
passages and listings, yet a reader sees two different pages. The language is
read from the text (CLD2, Google's compact language detector, through
``pycld2``), never from the URL, so an untranslated page under another
language's path is still the near-duplicate it is.

Only prose is read: not furniture, not listings (``<pre>``, ``<code>``...;
see ``blocks.page_plan``), whose English commands would otherwise decide the
language of a German chapter that quotes them at length.

The fingerprint is then XORed with a 64-bit mask drawn from the language's
code (``language_mask``): distances between pages in one language are
unchanged, and two pages in two languages are as far apart as two unrelated
pages (their masks differ in about 32 bits). A page whose language is not
read at all (no letters) keeps mask 0, as every page had before. CLD2's own
"reliable" flag is not used: it flips between near-copies of one page more
often than its first guess does (measured in ``bench/quality.py``'s variants),
and an undetermined page differs from one in a language as much as two
languages do.

Cost: CLD2 reads ~15 MB/s here: about 0.15 ms for 2,000 characters, which is
as much as it reads of a page (``MAX_CHARS``).

>>> detect("Der schnelle braune Fuchs springt über den faulen Hund, und die Katze schläft im Garten.")
'de'
>>> detect("ls -l") , language_mask("und")
('und', 0)

The code a page is reported in (``Fingerprint.language``, items, the index)
is a BCP 47 primary language subtag (``public_code``): ISO 639-1 where the
language has one, else ISO 639-2/3 (``ceb``, ``haw``, ``syr``), ``zh`` for
Chinese in either script, and ``und`` when the language is undetermined,
which includes CLD2's pseudo-languages: a script without a language
(``xx-Qaai``, ``xx-Latn``...) and its joke languages (``zzb``, ``zzp``,
``tlh``), what CLD2 answers for garbled text.

>>> public_code("xx-Qaai"), public_code("zh-Hant"), public_code("syr"), public_code("no")
('und', 'zh', 'syr', 'no')
"""

from __future__ import annotations

import re
from functools import lru_cache

import mmh3
import pycld2

from ..text.page import Page
from .blocks import block_plan
from .params import FeatureParams

#: The code of a page whose prose language is not read reliably (BCP 47).
UNDETERMINED = "und"
#: CLD2's codes that name no language (its names start with "X_"): a script alone
#: (``xx-Latn``, ``xx-Qaai``), or a joke (``zzb`` Bork Bork Bork, ``zzp`` Pig Latin,
#: ``tlh`` Klingon). CLD2 gives them for garbled text.
PSEUDO_CODES = frozenset(code for name, code in pycld2.LANGUAGES if name.startswith("X_"))
#: Characters of prose read at most (CLD2 is linear in them): a longer prose is
#: read in ``WINDOWS`` evenly spaced pieces, so that a page translated from the
#: top down is read as the language most of it is in, not as its first part's.
MAX_CHARS = 2_048
WINDOWS = 8

# What CLD2 refuses as "invalid UTF-8": control characters other than white
# space, surrogates and noncharacters. A space in their place changes no word.
_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef"
                      + "".join(f"{chr(p * 0x10000 + 0xFFFE)}{chr(p * 0x10000 + 0xFFFF)}" for p in range(17)) + "]")


def public_code(cld2_code: str) -> str:
    """The BCP 47 language subtag of a CLD2 code (see the module docstring):
    ``zh-Hant`` -> ``zh`` (the script is not the language), a pseudo-language
    -> ``UNDETERMINED``."""
    if cld2_code in PSEUDO_CODES:
        return UNDETERMINED
    return cld2_code.split("-")[0]


#: BCP 47 codes CLD2 spells otherwise (its older codes), and Chinese regions by their script
_ALIASES = {"he": "iw", "nb": "no", "fil": "tl", "jv": "jw", "zh-tw": "zh-Hant", "zh-hk": "zh-Hant",
            "zh-mo": "zh-Hant", "zh-hant": "zh-Hant", "zh-cn": "zh", "zh-sg": "zh", "zh-hans": "zh"}


@lru_cache(maxsize=1)
def _cld2_names() -> dict[str, str]:
    """Every code and language name CLD2 knows (lower case) -> its code: ``en``, ``english``, ``zh-hant``."""
    names: dict[str, str] = {}
    for name, code in pycld2.LANGUAGES:
        if code in PSEUDO_CODES or code in ("un", "xxx") or name.startswith(("X_", "TG_")):
            continue  # (TG_UNKNOWN_LANGUAGE: no language)
        names.setdefault(code.lower(), code)
        names.setdefault(name.lower().replace("_", "-"), code)
    return names


@lru_cache(maxsize=1024)
def cld2_code_of(value: str) -> str | None:
    """The CLD2 code a language given by a user names (a corpus record's language field), or None
    when it names none CLD2 knows: a code in any case and with a region (``EN``, ``en_US``, ``en-GB``:
    ``en``), CLD2's language name (``English``), a BCP 47 code CLD2 spells otherwise (``he``: ``iw``,
    ``nb``: ``no``), Chinese by script or region (``zh-TW``: ``zh-Hant``). So a record gives the
    fingerprint CLD2 would, and two spellings of one language give one. O(1) after the first call.

    >>> [cld2_code_of(v) for v in ("en", "EN", "en_US", "English", "he", "zh-TW", "zh-Hant-TW", "zh_Hans_SG")]
    ['en', 'en', 'en', 'en', 'iw', 'zh-Hant', 'zh-Hant', 'zh']
    >>> [cld2_code_of(v) for v in ("Norwegian_N", "xx", "eng")]
    ['nn', None, None]
    """
    key = value.strip().lower().replace("_", "-")
    if not key:
        return None
    names, subtags = _cld2_names(), key.split("-")
    if subtags[0] == "zh" and ("hant" in subtags or "hans" in subtags):  # the script decides (zh-Hant-TW)
        return "zh-Hant" if "hant" in subtags else "zh"
    for candidate in (key, "-".join(subtags[:2]), subtags[0]):
        code = _ALIASES.get(candidate) or names.get(candidate)
        if code is not None:
            return code
    return None


def detect(text: str) -> str:
    """The language code (``public_code``) of CLD2's first guess at the
    language of ``text``, or ``UNDETERMINED``. Never raises.
    O(min(len, MAX_CHARS))."""
    return public_code(detect_code(text))


def detect_code(text: str) -> str:
    """CLD2's own code of its first guess (``zh-Hant`` kept: the term table
    has one per script), or ``UNDETERMINED``."""
    if len(text) > MAX_CHARS:
        size, step = MAX_CHARS // WINDOWS, len(text) // WINDOWS
        text = "\n".join(text[i * step:i * step + size] for i in range(WINDOWS))
    try:
        _, _, details = pycld2.detect(text.encode("utf-8", "replace"), isPlainText=True)
    except pycld2.error:  # rare, so not searched for first (a pass of _REFUSED costs as much as CLD2)
        try:
            _, _, details = pycld2.detect(_REFUSED.sub(" ", text).encode("utf-8"), isPlainText=True)
        except pycld2.error:  # what _REFUSED missed
            return UNDETERMINED
    code = details[0][1]
    if code in ("un", "xxx"):
        return UNDETERMINED
    return code


def page_language(page: Page, params: FeatureParams = FeatureParams()) -> str:
    """``detect`` of the page's prose: the blocks that are neither furniture
    nor listings by ``params``, in page order. O(blocks + prose read)."""
    return public_code(page_language_code(page, params))


def page_language_code(page: Page, params: FeatureParams = FeatureParams()) -> str:
    """``detect_code`` of the page's prose: CLD2's own code (``zh-Hant`` kept),
    which chooses the term weights (``term_table.data_language``); the
    fingerprint computes it once and passes it to the weights and the mask."""
    _, _, prose = block_plan(page, params)
    text = page.text
    return detect_code("\n".join([text[start:end] for start, end in page.rows[prose, :2].tolist()]))


@lru_cache(maxsize=256)
def language_mask(code: str, seed: int = 0) -> int:
    """The 64-bit mask a fingerprint of a page in language ``code`` is XORed with (0 for ``UNDETERMINED``)."""
    if code == UNDETERMINED:
        return 0
    return mmh3.hash64(f"neardup-language:{code}", seed, signed=False)[0]
