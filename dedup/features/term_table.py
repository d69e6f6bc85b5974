"""Term weights from word frequencies: how much a token weighs falls with how
common it is in general text of the page's language.

The table (``data/term_zipf.npz``, built by ``scripts/build_term_table.py``
from ``wordfreq`` 3.1.1, CC BY-SA 4.0) gives, per language, the zipf value
(log10 of occurrences per billion words) of every token the fingerprint
makes whose zipf is at least 4.0. A token of zipf ``z`` weighs

    factor(z) = min(1, 10 ** (knee - z))        (1 for a token not in the table)

so above the knee a token's weight is inversely proportional to its
frequency: its *expected* weighted count on a page, frequency x factor, is
the same for every token above the knee, and equal to a token at the knee.
No common word can then carry more of the page than a word of middling
frequency does, however common it is, and the curve has one parameter with a
meaning. A token the table damps also counts once per page (presence
damping, ``weights``): it weighs at most its factor, so the common words a
page of the language always has add up to little, while its content words
keep their counts. A yes/no list (scheme v7's hand-made lists) left the
language's other common words at full weight, and pulled every page of the
language toward one fingerprint.

A language the table lacks (``UNDETERMINED``, Thai, ...) gets no factor:
every token weighs 1, and only the share cap, ``number_weight`` and the
furniture weight apply, see ``data_language``.

Cost: a dict lookup per distinct token (reference) or a binary search of a
sorted hash array (compiled); a language's arrays are built at its first page
(~5 ms) and kept.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np

from .murmur import feature_hashes

TABLE_PATH = Path(__file__).resolve().parent / "data" / "term_zipf.npz"

#: CLD2's codes where the data's differ. Norwegian: CLD2 says "no" for Bokmål
#: (and "nn" for Nynorsk, whose function words are mostly Bokmål's); Hebrew,
#: Filipino; Croatian, Serbian and Bosnian are wordfreq's Serbo-Croatian (Latin
#: script); Chinese in Traditional script has its own table.
CLD2_TO_DATA = {"no": "nb", "nn": "nb", "iw": "he", "tl": "fil", "hr": "sh", "sr": "sh", "bs": "sh",
                "zh-Hant": "zh-Hant", "zh": "zh"}


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, tuple[int, int, int, int]], np.ndarray, np.ndarray, str]:
    """({language: (first token, end token, first byte, end byte)}, UTF-8 blob,
    zipf x 100, content digest). The blob stays bytes: a language's tokens
    become strings at its first page only."""
    with np.load(TABLE_PATH, allow_pickle=False) as z:
        langs, starts, byte_starts, blob, zipf = (z[k] for k in ("langs", "starts", "byte_starts", "blob", "zipf_cb"))
    digest = hashlib.sha256()
    for a in (langs, starts, byte_starts, blob, zipf):
        digest.update(np.ascontiguousarray(a).tobytes())
    spans = {str(lang): (int(starts[i]), int(starts[i + 1]), int(byte_starts[i]), int(byte_starts[i + 1]) - 1)
             for i, lang in enumerate(langs.tolist())}
    return spans, blob, zipf, digest.hexdigest()[:12]


def table_digest() -> str:
    """12 hex digits of the table's content: part of the scheme string."""
    return _table()[3]


def data_language(cld2_code: str) -> str | None:
    """The table's language for a CLD2 code (``detect_code``), or None when
    the table has no data for it."""
    spans = _table()[0]
    code = CLD2_TO_DATA.get(cld2_code, cld2_code.split("-")[0])
    return code if code in spans else None


def _tokens(lang: str) -> tuple[list[str], np.ndarray]:
    """(tokens, their zipf values) of a language of the table."""
    spans, blob, zipf, _ = _table()
    first, end, byte_start, byte_end = spans[lang]
    if first == end:
        return [], np.empty(0)
    return blob[byte_start:byte_end].tobytes().decode("utf-8").split("\n"), zipf[first:end].astype(np.float64) / 100


def factors_of(zipf: np.ndarray, knee: float) -> np.ndarray:
    """``factor`` of each zipf value (see the module docstring)."""
    return np.minimum(1.0, 10.0 ** (knee - zipf))


@lru_cache(maxsize=128)
def term_factors(lang: str | None, knee: float) -> dict[str, float]:
    """{token: factor < 1} of ``lang`` (a ``data_language``); empty for None."""
    if lang is None:
        return {}
    tokens, zipf = _tokens(lang)
    f = factors_of(zipf, knee)
    keep = f < 1.0
    return dict(zip([t for t, k in zip(tokens, keep.tolist()) if k], f[keep].tolist()))


@lru_cache(maxsize=128)
def term_hashes(lang: str | None, knee: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted feature hashes, their factors) of ``term_factors``: what the
    compiled kernel searches. Two tokens of one hash (never seen) keep the
    smaller factor."""
    factors = term_factors(lang, knee)
    if not factors:
        return np.empty(0, dtype=np.uint64), np.empty(0)
    hashes = feature_hashes(list(factors), seed)
    values = np.fromiter(factors.values(), dtype=np.float64, count=len(factors))
    order = np.lexsort((values, hashes))
    hashes, values = hashes[order], values[order]
    first = np.r_[True, hashes[1:] != hashes[:-1]]
    return hashes[first], values[first]
