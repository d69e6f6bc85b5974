"""Weighted features of a page, the input of simhash.

A feature is a token (see ``tokens``) or, optionally, a pair of adjacent
tokens. Its weight sums, over its occurrences, ``block weight x term weight``:

* block weight: 1 for content, ``furniture_weight`` for text in
  nav/header/footer/aside, in link-dense blocks (menus, tag clouds,
  "related" lists) and in short blocks (under ``short_block_tokens``: ad
  lines, bylines, footers in plain divs, as boilerpipe observes): the parts
  that differ between copies of one article on two sites, and that make
  different pages of one site look alike;
* term weight: for a token common in general text of the page's prose
  language, ``min(1, 10 ** (zipf_knee - zipf))``, falling as 1 / its
  frequency (``term_table``, read by the language CLD2 detects);
  ``number_weight`` for tokens with digits (counters, dates, prices change
  between otherwise identical copies); else 1. A token the table damps
  counts once per page (presence damping): how often a page says "the"
  tells nothing of what it is about, while its content words keep their
  counts. In a language the table lacks (Thai, an undetermined page) every
  token counts once (see ``_final_weights``).

The summed weight is then damped by ``tf_power`` (1 = linear counts): a
near-duplicate differs in a few blocks, and counts keep the many repeated
topic words in charge of the fingerprint, while pure presence (power 0)
would let every new word in a changed block move it.

Finally no feature may carry more than ``max_share`` of the page's total
weight: otherwise one term repeated thousands of times (``html`` in a list of
file names) sets every bit by itself. The defaults were chosen by
``bench/quality.py`` (see BENCHMARKS.md).

Two paths give the same features (tested on every real page and on
generated text): the reference (``feature_vector``: Python strings, jieba's
words from rjieba, ``collections.Counter``, mmh3) and the compiled one
(``word_kernel``: tokens cut, hashed and counted over the UTF-8 bytes without
a Python object per token). ``hashed_features`` takes the compiled path when
``dedup.jit`` says this process may run it.

Cost: O(tokens); counting is done by ``collections.Counter`` in C or by the
kernel, the weights on numpy arrays.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from itertools import filterfalse

import numpy as np
import regex
from numba import njit

from .. import jit
from ..text.page import ROW_END, ROW_START, Page
from .blocks import _title_parts, block_plan, page_plan, split_title
from .han_segmenter import default_dictionary
from .language import page_language_code
from .murmur import feature_hashes
from .params import FeatureParams
from .term_table import data_language, term_factors, term_hashes
from .tokens import normalize, tokenize_normalized
from .word_kernel import CLASSES, HAN, NOSPACE, WORD, utf8_offsets, word_counts

__all__ = ["FeatureParams", "block_plan", "feature_vector", "hashed_features", "language_factors", "page_features",
           "page_plan", "page_texts", "split_title"]

_DIGIT = re.compile(r"\d")


@njit(cache=True, inline="always")
def _moved(moved, offset):
    return moved[offset] if moved.shape[0] else offset


@njit(cache=True)
def _plan_spans(data, ascii, rows, moved, content, furniture, text_len, title_lens, n_main):
    """(starts, ends, parts) for ``word_counts``: the blocks in ``page_plan``'s
    order, ``content`` then ``furniture`` (their offsets taken through ``moved`` unless it is empty), with the
    title parts (lengths ``title_lens``, the first ``n_main`` content) placed
    after the page text of ``text_len`` code points, one newline before each,
    in UTF-8 byte offsets of ``data`` (code point offsets are byte offsets
    when ``ascii``). One compiled call: the numpy steps cost ~0.2 ms a page
    with cold caches."""
    n_titles = title_lens.shape[0]
    total = n_titles + content.shape[0] + furniture.shape[0]
    starts = np.empty(total, dtype=np.int64)
    ends = np.empty(total, dtype=np.int64)
    parts = np.zeros(total, dtype=np.int64)
    title_starts = np.empty(n_titles, dtype=np.int64)
    pos = text_len + 1
    for j in range(n_titles):
        title_starts[j] = pos
        pos += title_lens[j] + 1
    k = 0
    for j in range(n_main):
        starts[k] = title_starts[j]
        ends[k] = title_starts[j] + title_lens[j]
        k += 1
    for j in range(content.shape[0]):
        starts[k] = _moved(moved, rows[content[j], ROW_START])
        ends[k] = _moved(moved, rows[content[j], ROW_END])
        k += 1
    parts[k:] = 1
    for j in range(n_main, n_titles):
        starts[k] = title_starts[j]
        ends[k] = title_starts[j] + title_lens[j]
        k += 1
    for j in range(furniture.shape[0]):
        starts[k] = _moved(moved, rows[furniture[j], ROW_START])
        ends[k] = _moved(moved, rows[furniture[j], ROW_END])
        k += 1
    if not ascii:
        offsets = utf8_offsets(data)
        for j in range(total):
            starts[j] = offsets[starts[j]]
            ends[j] = offsets[ends[j]]
    return starts, ends, parts


def page_texts(page: Page, params: FeatureParams) -> tuple[str, str]:
    """(content text, furniture text) of a page, parts joined by newlines, in
    the order of ``page_plan``."""
    content_idx, furniture_idx, main, rest = page_plan(page, params)
    text, spans = page.text, page.rows[:, :2]
    content = main + [text[a:b] for a, b in spans[content_idx].tolist()]
    furn = rest + [text[a:b] for a, b in spans[furniture_idx].tolist()]
    return "\n".join(content), "\n".join(furn)


def language_factors(params: FeatureParams, language: str) -> dict[str, float]:
    """{token: term weight < 1} of the tokens damped for being common in the
    prose language ``language`` (a CLD2 code, ``language.detect_code``);
    empty for a language the table lacks."""
    return term_factors(data_language(language), params.zipf_knee)


def _language_hashes(params: FeatureParams, language: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``language_factors`` as (sorted hashes, factors), for the kernel."""
    return term_hashes(data_language(language), params.zipf_knee, seed)


def _term_weight(token: str, params: FeatureParams, factors: dict[str, float]) -> float:
    f = factors.get(token)
    if f is not None:
        return f
    if not token.isalpha() and _DIGIT.search(token):
        return params.number_weight
    return 1.0


def page_features(page: Page, params: FeatureParams = FeatureParams(), language: str | None = None
                  ) -> tuple[dict[str, float], int]:
    """``({feature: weight}, number of tokens)`` for a page."""
    names, weights, n_tokens = feature_vector(page, params, language)
    return dict(zip(names, weights.tolist())), n_tokens


def _counts(tokens: list[str], bigrams: bool) -> Counter[str]:
    c = Counter(tokens)
    if bigrams and len(tokens) > 1:
        c.update(f"{a} {b}" for a, b in zip(tokens, tokens[1:]))
    return c


def feature_vector(page: Page, params: FeatureParams = FeatureParams(), language: str | None = None
                   ) -> tuple[list[str], np.ndarray, int]:
    """(features, their float64 weights, number of tokens) for a page, features
    in order of first occurrence (content first). ``language``: the CLD2 code
    of the page's prose (``language.page_language_code``), read when None.

    The reference for ``hashed_features``; per distinct feature only a set
    lookup and a string test run in Python, the arithmetic is done on arrays.
    """
    if language is None:
        language = page_language_code(page, params)
    content, furniture = page_texts(page, params)
    return _vector_of_texts(normalize(content), normalize(furniture), params, language_factors(params, language),
                            data_language(language) is None)


def _vector_of_texts(content_text: str, furniture_text: str, params: FeatureParams, factors: dict[str, float],
                     uncovered: bool = False) -> tuple[list[str], np.ndarray, int]:
    """``feature_vector`` of the page's normalised content and furniture texts;
    ``factors``: ``language_factors`` of the page's language; ``uncovered``:
    the table lacks that language (``_final_weights``)."""
    content, furniture = tokenize_normalized(content_text), tokenize_normalized(furniture_text)
    n_tokens = len(content) + len(furniture)
    fw = params.furniture_weight
    # content: block weight 1; furniture adds fw per occurrence (float counts)
    counts: dict[str, float] = dict(_counts(content, params.bigrams))
    if furniture and fw > 0:
        get = counts.get
        for tok, n in _counts(furniture, params.bigrams).items():
            counts[tok] = get(tok, 0) + n * fw
    names = list(counts)
    if not names:
        return [], np.empty(0), n_tokens
    common_mask = None  # the features language_factors damps: each counts once
    if params.bigrams:
        term = np.array([min(_term_weight(a, params, factors), _term_weight(b, params, factors)) if " " in f
                         else _term_weight(f, params, factors) for f in names for a, _, b in (f.partition(" "),)])
        common_mask = np.array([f in factors for f in names], dtype=bool)
    else:
        # set and C-level filters find the few common words and numbers; no Python test per feature
        term = np.ones(len(names))
        common = list(factors.keys() & set(names))
        numbers = [t for t in filterfalse(str.isalpha, names) if t not in factors and _DIGIT.search(t)]
        if common or numbers:
            index = dict(zip(names, range(len(names))))
            at = [index[t] for t in common]
            term[at] = [factors[t] for t in common]
            term[[index[t] for t in numbers]] = params.number_weight
            if common:
                common_mask = np.zeros(len(names), dtype=bool)
                common_mask[at] = True
    weights, keep = _final_weights(counts.values(), term, params, common_mask, uncovered)
    if keep is not None:
        names = [f for f, k in zip(names, keep.tolist()) if k]
    return names, weights, n_tokens


def _final_weights(counts, term: np.ndarray, params: FeatureParams, common: np.ndarray | None = None,
                   uncovered: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Summed counts -> weights: tf power, presence of common tokens, term
    weights, the share cap. ``common`` marks the tokens ``language_factors``
    damps: each counts at most once (its weight is at most its factor).
    ``uncovered``: the page's language is one the table lacks, so any token
    may be one of its common words, and every token counts at most once.
    Returns (weights of the features kept, mask of those kept, or None when
    all are)."""
    if params.tf_power != 1.0:
        p = params.tf_power
        counts = [n**p for n in counts]  # Python's pow, not numpy's SIMD one: the same bits everywhere
    # float64 either way; np.minimum and the product are exact IEEE operations, element by element,
    # so these array steps give the bits Python's min() and * gave, without a Python step per feature
    # (on Chinese pages of ~840 features that loop cost ~0.3 ms, the term weights' whole extra cost)
    weights = (counts.astype(np.float64) if isinstance(counts, np.ndarray)
               else np.fromiter(counts, dtype=np.float64, count=len(term)))
    if uncovered:
        # Without frequencies, the language's common words are not known: counted as they come, they
        # carry the page (a leave-one-out of the guide's 19 languages put 129 unrelated pairs within
        # 6 bits; counted once, none; bench/quality.py --uncovered all)
        np.minimum(weights, 1.0, out=weights)
    elif common is not None and common.any():
        # presence damping: how often a page says "the" tells nothing of what it is about
        np.minimum(weights, 1.0, out=weights, where=common)
    weights *= term
    keep = weights > 0
    if keep.all():
        keep = None
    else:
        weights = weights[keep]
    if params.max_share > 0 and weights.size:
        # One term repeated thousands of times (a file extension in a link list,
        # a product code) would otherwise set every bit by itself.
        cap = params.max_share * math.fsum(weights.tolist())  # exact: the same cap in any order, on any machine
        np.minimum(weights, cap, out=weights)
    return weights, keep


def hashed_features(page: Page, params: FeatureParams = FeatureParams(), seed: int = 0,
                    compiled: bool | None = None, language: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(feature hashes uint64, weights float64, number of tokens): what simhash takes.
    ``language`` as in ``feature_vector``.

    Compiled (``compiled`` True, or None and ``jit.ready("fingerprint")``):
    tokens are made, hashed and counted by ``word_kernel`` (no Python object
    per token), straight from the page's text when casefolding keeps it as
    long (so block offsets hold) and it is NFKC already, else from the joined
    content and furniture texts. Otherwise, and for lone surrogates, bigram
    features and unusual parameters: ``feature_vector`` and mmh3. All give
    the same arrays (tested).
    """
    if compiled is None:
        compiled = jit.ready("fingerprint")
    if language is None:
        language = page_language_code(page, params)
    if not compiled or params.bigrams or params.furniture_weight <= 0 or not 0 <= seed < 2**32:
        names, weights, n_tokens = feature_vector(page, params, language)
        return feature_hashes(names, seed, compiled=compiled), weights, n_tokens
    spans = _page_spans(page, params)
    if spans is None:
        content, furniture = map(normalize, page_texts(page, params))
        try:
            data = f"{content}\n{furniture}".encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            names, weights, n_tokens = _vector_of_texts(content, furniture, params,
                                                        language_factors(params, language),
                                                        data_language(language) is None)
            return feature_hashes(names, seed), weights, n_tokens
        n_content = len(content.encode("utf-8"))
        spans = (np.frombuffer(data, dtype=np.uint8), np.array([0, n_content + 1]),
                 np.array([n_content, len(data)]), np.array([0, 1]))
    hanzi = default_dictionary()
    table, factors = _language_hashes(params, language, seed)
    hashes, counts, term, n_tokens = word_counts(
        *spans, float(params.furniture_weight), CLASSES, seed, table, factors, float(params.number_weight), *hanzi)
    common = None
    if table.size:
        at = np.minimum(np.searchsorted(table, hashes), table.size - 1)
        common = table[at] == hashes  # the kernel's own test: its term factor came from the table
    uncovered = data_language(language) is None
    weights, keep = _final_weights(counts if params.tf_power == 1.0 else counts.tolist(), term, params, common,
                                   uncovered)
    return (hashes if keep is None else hashes[keep]), weights, n_tokens


@lru_cache(maxsize=1)
def _separators_not_nfkc() -> re.Pattern:
    """The BMP characters that NFKC changes, where both the character and what
    NFKC makes of it are only separators: no word character, Han, combining
    mark or no-space script (full-width punctuation such as "，", "…"). No
    mark, so NFKC cannot compose them with a neighbour: NFKC of a text equals
    the text with each replaced, and a space in their place gives the same
    tokens. Built at first use (~0.1 s)."""
    refused = WORD | HAN | NOSPACE
    mark = regex.compile(r"\p{M}")

    def separator(ch: str) -> bool:
        return ord(ch) <= 0xFFFF and not (CLASSES[ord(ch)] & refused or mark.match(ch))

    chars = [ch for ch in map(chr, range(0x10000)) if not 0xD800 <= ord(ch) <= 0xDFFF
             and separator(ch) and (n := unicodedata.normalize("NFKC", ch)) != ch and n and all(map(separator, n))]
    return re.compile("[" + "".join(map(re.escape, chars)) + "]")


@lru_cache(maxsize=1)
def _compat_singles() -> tuple[re.Pattern, dict[str, str]]:
    """(pattern, mapping) of the BMP characters whose NFKD is one other
    character (built at first use, ~30 ms)."""
    mapping = {}
    for cp in range(0x80, 0x10000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        d = unicodedata.normalize("NFKD", ch)
        if len(d) == 1 and d != ch:
            mapping[ch] = d
    return re.compile("[" + "".join(map(re.escape, mapping)) + "]"), mapping


def _page_spans(page: Page, params: FeatureParams) -> tuple[np.ndarray, ...] | None:
    """(UTF-8 data, span starts, span ends, span parts) over the page's own
    casefolded text, for ``word_counts``; None when that text would
    not give the reference's tokens (not NFKC, or casefolding changes its
    length), so the caller joins and normalises instead."""
    text = page.text
    offsets = _NO_MOVES  # where the page text's offsets 0..n lie in the text read, when some moved
    if not unicodedata.is_normalized("NFKC", text):
        # The usual reasons are "…" (NFKC: "...") and full-width punctuation
        # ("，" -> ","): characters that separate tokens before and after NFKC,
        # so a space in their place gives the same tokens and keeps the offsets.
        text = _separators_not_nfkc().sub(" ", text)
        if not unicodedata.is_normalized("NFKC", text):
            # Full-width letters and digits, circled digits, "º": characters whose
            # NFKD is one other character. Put in its place, the text has the
            # same NFKD, hence the same NFKC; when that is the text itself (the
            # check), the offsets hold.
            pattern, mapping = _compat_singles()
            text = pattern.sub(lambda m: mapping[m.group()], text)
            if not unicodedata.is_normalized("NFKC", text):
                # "™" -> "TM", "Ⅱ" -> "II", Arabic presentation forms: the same with
                # each character's NFKC (whose NFKD is the character's), moving the
                # offsets after those that are longer
                text, moves = _rewrite(text, *_compat_rest())
                if not unicodedata.is_normalized("NFKC", text):
                    return None
                offsets = _offset_map(offsets, len(page.text), moves)
    folded = text.casefold()
    if len(folded) != len(text):
        # "ß" -> "ss", "İ" -> "i̇": casefolding is per character, so the offsets
        # move by the length each such character gains
        pattern = _longer_folds()
        moves = [(m.start(), len(m.group().casefold()) - 1) for m in pattern.finditer(text)]
        if len(folded) != len(text) + sum(d for _, d in moves):
            return None
        offsets = _offset_map(offsets, len(page.text), moves)
    main, rest = _title_parts(page, params)
    titles = [normalize(t) for t in main + rest]
    full = "\n".join([folded, *titles])
    try:
        data = full.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    title_lens = np.array([len(t) for t in titles], dtype=np.int64)
    content, furniture, _ = block_plan(page, params)
    return (buf, *_plan_spans(buf, len(data) == len(full), page.rows, offsets, content, furniture, len(folded),
                              title_lens, len(main)))


def _rewrite(text: str, pattern: re.Pattern, mapping: dict[str, str]) -> tuple[str, list[tuple[int, int]]]:
    """(``text`` with each character ``pattern`` matches replaced by its
    ``mapping``, [(offset in ``text``, length added there)])."""
    pieces: list[str] = []
    moves: list[tuple[int, int]] = []
    last = 0
    for m in pattern.finditer(text):
        new = mapping[m.group()]
        pieces += (text[last:m.start()], new)
        last = m.end()
        moves.append((m.start(), len(new) - len(m.group())))
    pieces.append(text[last:])
    return "".join(pieces), moves


def _offset_map(offsets: np.ndarray, n: int, moves: list[tuple[int, int]]) -> np.ndarray:
    """``offsets`` (where the page text's offsets 0..n lie in a text; empty:
    at themselves) moved as the ``moves`` of ``_rewrite`` move that text's."""
    if not offsets.size:
        offsets = np.arange(n + 1, dtype=np.int64)
    at = np.array([a for a, _ in moves], dtype=np.int64)
    added = np.cumsum([0] + [d for _, d in moves])
    return offsets + added[np.searchsorted(at, offsets, side="left")]


_NO_MOVES = np.empty(0, dtype=np.int64)


@lru_cache(maxsize=1)
def _compat_rest() -> tuple[re.Pattern, dict[str, str]]:
    """(pattern, mapping) of the BMP characters whose NFKC is another string
    ("™" -> "TM"), built at first use (~40 ms)."""
    mapping = {}
    for cp in range(0x80, 0x10000):
        if not 0xD800 <= cp <= 0xDFFF:
            n = unicodedata.normalize("NFKC", chr(cp))
            if n != chr(cp):
                mapping[chr(cp)] = n
    return re.compile("[" + "".join(map(re.escape, mapping)) + "]"), mapping


@lru_cache(maxsize=1)
def _longer_folds() -> re.Pattern:
    """The characters whose casefold is longer than themselves ("ß" -> "ss"),
    built at first use (all are in the BMP; the length check after says if not)."""
    chars = [chr(cp) for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF and len(chr(cp).casefold()) > 1]
    return re.compile("[" + "".join(map(re.escape, chars)) + "]")
