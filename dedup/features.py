"""Weighted features of a page, the input of simhash.

A feature is a token (see ``tokens``) or, optionally, a pair of adjacent
tokens. Its weight sums, over its occurrences, ``block weight x term weight``:

* block weight: 1 for content, ``furniture_weight`` for text in
  nav/header/footer/aside, in link-dense blocks (menus, tag clouds,
  "related" lists) and in short blocks (under ``short_block_tokens``: ad
  lines, bylines, footers in plain divs, as boilerpipe observes): the parts
  that differ between copies of one article on two sites, and that make
  different pages of one site look alike;
* term weight: ``stop_weight`` for function words (``stopwords``),
  ``number_weight`` for tokens with digits (counters, dates, prices change
  between otherwise identical copies), else 1.

The summed weight is then damped by ``tf_power`` (1 = linear counts): a
near-duplicate differs in a few blocks, and counts keep the many repeated
topic words in charge of the fingerprint, while pure presence (power 0)
would let every new word in a changed block move it.

Finally no feature may carry more than ``max_share`` of the page's total
weight: otherwise one term repeated thousands of times (``html`` in a list of
file names) sets every bit by itself. The defaults were chosen by
``bench/quality.py`` (see BENCHMARKS.md).

Cost: O(tokens); counting is done by ``collections.Counter`` in C, the weights on numpy arrays.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import filterfalse
from dataclasses import dataclass

import numpy as np


from .stopwords import STOPWORDS
from .text import Block, Page
from .tokens import tokenize


_DIGIT = re.compile(r"\d")


@dataclass(frozen=True, slots=True)
class FeatureParams:
    furniture_weight: float = 0.2
    link_density_cutoff: float = 0.5  # blocks with more link text than this are furniture
    stop_weight: float = 0.05
    number_weight: float = 0.2
    tf_power: float = 1.0
    bigrams: bool = False
    title_weight: float = 1.0
    short_block_tokens: int = 20  # blocks with fewer (estimated) tokens count as furniture; 0: off
    max_share: float = 0.05  # cap on one feature's share of the page's total weight; 0: off

    @property
    def tag(self) -> str:
        """Short text naming these parameters, part of the scheme identity."""
        return (f"fw{self.furniture_weight:g}ld{self.link_density_cutoff:g}sw{self.stop_weight:g}"
                f"nw{self.number_weight:g}tf{self.tf_power:g}{'bi' if self.bigrams else 'uni'}"
                f"tw{self.title_weight:g}sb{self.short_block_tokens}ms{self.max_share:g}")


# stdlib re with explicit ranges: much faster than regex's \p{Han} for counting
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def _estimated_tokens(block: Block) -> float:
    # cheap: words between spaces, plus ~0.6 words per Han character (jieba's average);
    # the extraction's scan has counted both
    if block.n_words >= 0 and block.n_han >= 0:
        return block.n_words + 0.6 * block.n_han
    text = block.text
    n = len(text.split())
    if text.isascii():  # most blocks: no Han to count
        return n
    return n + 0.6 * len(_HAN.findall(text))


# "Article title - Site name", "Site | Section | Article", "标题_频道_新浪网"
_TITLE_SEPARATORS = re.compile(r"\s+[-|–—:·»/]\s+|\s*(?:\||_{1,2}|——|::)\s*")


def split_title(title: str) -> tuple[str, list[str]]:
    """(the title's longest segment, the other segments), split at the separators
    sites put between an article's title and their own name or sections."""
    parts = [p.strip() for p in _TITLE_SEPARATORS.split(title) if p and p.strip()]
    if len(parts) < 2:
        return title, []
    main = max(parts, key=len)
    parts.remove(main)
    return main, parts


def page_tokens(page: Page, params: FeatureParams) -> tuple[list[str], list[str]]:
    """(content tokens, furniture tokens) of a page. The title's main segment
    counts as content; site names and sections around it count as furniture."""
    content: list[str] = []
    furniture: list[str] = []
    if page.title and params.title_weight:
        main, rest = split_title(page.title)
        content.append(main)
        furniture.extend(rest)
    short: list[str] = []
    long_tokens = short_tokens = 0.0
    cutoff = params.link_density_cutoff
    for block in page.blocks:
        if block.furniture or block.link_density > cutoff:
            furniture.append(block.text)
            continue
        n = _estimated_tokens(block) if params.short_block_tokens else float("inf")
        if n < params.short_block_tokens:
            short.append(block.text)
            short_tokens += n
        else:
            content.append(block.text)
            long_tokens += n
    # Short blocks are furniture only beside a real body of long ones (an
    # article among ad lines and bylines); on a page made of short blocks
    # (release notes, lists) they are the content.
    (furniture if long_tokens >= short_tokens else content).extend(short)
    # One tokenize call per group: tokens never span a newline, so this equals
    # tokenising block by block, without the per-call overhead.
    return tokenize("\n".join(content)), tokenize("\n".join(furniture))


def _term_weight(token: str, params: FeatureParams) -> float:
    if token in STOPWORDS:
        return params.stop_weight
    if not token.isalpha() and _DIGIT.search(token):
        return params.number_weight
    return 1.0


def weighted_features(page: Page, params: FeatureParams = FeatureParams()) -> dict[str, float]:
    """``{feature: weight}`` for a page; empty when the page has no tokens."""
    return page_features(page, params)[0]


def page_features(page: Page, params: FeatureParams = FeatureParams()) -> tuple[dict[str, float], int]:
    """``({feature: weight}, number of tokens)`` for a page."""
    names, weights, n_tokens = feature_vector(page, params)
    return dict(zip(names, weights.tolist())), n_tokens


def _counts(tokens: list[str], bigrams: bool) -> Counter[str]:
    c = Counter(tokens)
    if bigrams and len(tokens) > 1:
        c.update(f"{a} {b}" for a, b in zip(tokens, tokens[1:]))
    return c


def feature_vector(page: Page, params: FeatureParams = FeatureParams()) -> tuple[list[str], np.ndarray, int]:
    """(features, their float64 weights, number of tokens) for a page, features
    in order of first occurrence (content first). What ``Fingerprinter`` hashes.

    Per distinct feature only a set lookup and a string test run in Python;
    the arithmetic is done on arrays.
    """
    content, furniture = page_tokens(page, params)
    n_tokens = len(content) + len(furniture)
    fw = params.furniture_weight
    counts = _counts(content, params.bigrams)  # content: block weight 1
    if furniture and fw > 0:
        get = counts.get
        for tok, n in _counts(furniture, params.bigrams).items():
            counts[tok] = get(tok, 0) + n * fw
    names = list(counts)
    if not names:
        return [], np.empty(0), n_tokens
    values = counts.values()
    if params.tf_power != 1.0:
        p = params.tf_power
        values = [n**p for n in values]  # Python's pow, not numpy's SIMD one: the same bits everywhere
    weights = np.fromiter(values, dtype=np.float64, count=len(names))
    if params.bigrams:
        term = np.array([min(_term_weight(a, params), _term_weight(b, params)) if " " in f
                         else _term_weight(f, params) for f in names for a, _, b in (f.partition(" "),)])
    else:
        # set and C-level filters find the few stop words and numbers; no Python test per feature
        term = np.ones(len(names))
        stops = STOPWORDS.intersection(names)
        numbers = [t for t in filterfalse(str.isalpha, names) if t not in STOPWORDS and _DIGIT.search(t)]
        if stops or numbers:
            index = dict(zip(names, range(len(names))))
            term[[index[t] for t in stops]] = params.stop_weight
            term[[index[t] for t in numbers]] = params.number_weight
    weights *= term
    keep = weights > 0
    if not keep.all():
        names = [f for f, k in zip(names, keep.tolist()) if k]
        weights = weights[keep]
    if params.max_share > 0 and names:
        # One term repeated thousands of times (a file extension in a link list,
        # a product code) would otherwise set every bit by itself.
        cap = params.max_share * sum(weights.tolist())  # summed in order: the same cap on every platform
        np.minimum(weights, cap, out=weights)
    return names, weights, n_tokens
