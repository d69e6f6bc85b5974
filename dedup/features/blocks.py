"""Which blocks of a page are read as content, which as furniture, and which
are prose (the text whose language is read): the block plan, decided on the
page's block rows as arrays. ``weights`` and ``language`` both read it.
"""

from __future__ import annotations

import re

import numpy as np

from ..text.page import ROW_CODE, ROW_END, ROW_FURNITURE, ROW_HAN, ROW_LINK, ROW_START, ROW_WORDS, Page
from .params import FeatureParams

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


def page_plan(page: Page, params: FeatureParams) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Which blocks are content and which furniture, in the order their text is read.

    Returns (content block indices, furniture block indices, content title
    parts, furniture title parts). Furniture: blocks in page furniture or
    denser in links than the cutoff. Listings (blocks more than half inside
    ``<pre> <code> <kbd> <samp>``: commands, code, output) count as furniture
    on a page with at least ``listing_prose_tokens`` tokens of prose: a
    listing two pages quote, or one that is long and repetitive, would
    otherwise outweigh prose that differs; on a page that is mostly listing
    (a source file, a mail in ``<pre>``) they are the content, read last.
    Short blocks (fewer estimated tokens than ``short_block_tokens``: words
    between spaces plus ~0.6 per Han character, jieba's average) are furniture
    only beside a real body of long ones (an article among ad lines and
    bylines); on a page made of short blocks (release notes, lists) they are
    the content, read after the long ones. The title's main segment counts as
    content; site names and sections around it count as furniture. Decided on
    the block rows as arrays, in integers (tokens x 10), so no float rounding
    can flip a block.
    """
    content_idx, furniture_idx, _ = block_plan(page, params)
    return (content_idx, furniture_idx, *_title_parts(page, params))


def block_plan(page: Page, params: FeatureParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_block_plan`` of the page's rows, kept on the page: the features and
    the language both read it (~0.08 ms a page)."""
    key = (params.link_density_cutoff, params.short_block_tokens, params.listing_prose_tokens)
    if page.plan is None or page.plan[0] != key:
        page.plan = (key, _block_plan(page.rows, float(key[0]), int(key[1]), int(key[2])))
    return page.plan[1]


def _title_parts(page: Page, params: FeatureParams) -> tuple[list[str], list[str]]:
    """(content title parts, furniture title parts) of ``page_plan``."""
    main, rest = split_title(page.title) if page.title and params.title_weight else ("", [])
    return ([main] if main else []), rest


def _block_plan(rows: np.ndarray, cutoff: float, short_block_tokens: int, listing_prose_tokens: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(content block indices, furniture block indices, prose block indices)
    of ``page_plan``, on the rows as arrays: long blocks, then short ones and
    listings where they go; furniture, then short ones and listings where they
    go. Prose: the blocks that are neither furniture nor listings, in page
    order (``language`` reads them). O(blocks)."""
    length = rows[:, ROW_END] - rows[:, ROW_START]
    # link density > cutoff, without a division: link chars > cutoff x length
    furniture = (rows[:, ROW_FURNITURE] != 0) | (rows[:, ROW_LINK] > cutoff * length)
    listing = ~furniture & (2 * rows[:, ROW_CODE] > length)
    prose = ~furniture & ~listing
    tokens10 = 10 * rows[:, ROW_WORDS] + 6 * rows[:, ROW_HAN]
    short = prose & (tokens10 < 10 * short_block_tokens) if short_block_tokens else np.zeros(len(rows), bool)
    long = prose & ~short
    content, furn = [np.flatnonzero(long)], [np.flatnonzero(furniture)]
    if short_block_tokens and int(tokens10[long].sum()) >= int(tokens10[short].sum()):
        furn.append(np.flatnonzero(short))
    else:
        content.append(np.flatnonzero(short))
    if listing_prose_tokens and int(tokens10[prose].sum()) >= 10 * listing_prose_tokens:
        furn.append(np.flatnonzero(listing))
    else:
        content.append(np.flatnonzero(listing))
    return np.concatenate(content), np.concatenate(furn), np.flatnonzero(prose)

