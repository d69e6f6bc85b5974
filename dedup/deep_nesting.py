"""Bounding the parser's work on pathologically deep markup.

The HTML Standard's tree construction asks, for many start tags (``div ul
blockquote section h1``...), whether a ``p`` element is *in button scope*: a
walk up the stack of open elements to the nearest scope boundary. On a page
of n nested or unclosed ``<div>`` that makes parsing O(n²): lexbor took 32 s
on 100,000 nested divs (1.1 MB). Browsers cap the depth of the tree they
build (Chromium at 512).

Here a compiled pass over the bytes follows the nesting of those elements
and, past ``MAX_DEPTH``, renames their tags to ``marquee``: a scope
boundary, so every such walk stops within a level or two. The attributes
stay (``hidden``, ``style``), and the scan treats ``marquee`` as a block,
so the visible text of well-formed nesting comes out as before (tested).
What changes past that depth: a ``nav`` there no longer counts as
furniture; in broken markup, an end tag no longer closes an outer element
through inner ones, nor an ``<li>`` an open item through ``div``s, so a
hidden element may hold other text than a browser would hide; and inside
``<svg>`` or ``<math>`` a renamed tag no longer breaks out of it.

A page with at most ``MAX_DEPTH`` ``<`` cannot nest that deep and is
returned as it is after counting them (~0.02 ms; 943 of the 1,016 real
pages). The pass over the others visits only the ``<`` (numpy finds them):
~0.3 ms on a 200 KB page of 2,400 tags, against ~1 ms for a byte loop.

>>> bound_nesting(b"<div><div>x</div></div>", max_depth=1)
b'<div><marquee>x</marquee></div>'
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

#: The deepest nesting of ``NESTING_TAGS`` parsed as written.
MAX_DEPTH = 2048
#: Elements that nest and whose start tag makes the parser walk the stack:
#: the HTML Standard's "address, article, ..." group but p. Not p, li, dd,
#: dt or headings, which the next of their kind can close (a renamed one
#: would stay open), nor pre and listing, which keep their spaces.
NESTING_TAGS = ("address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl",
                "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol",
                "search", "section", "summary", "ul")
#: Elements whose content is text up to their end tag (no tags inside).
RAW_TAGS = ("script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript")
_RENAMED = np.frombuffer(b"marquee", dtype=np.uint8)


def _keys(names: tuple[str, ...]) -> np.ndarray:
    """Each name as (its first 8 bytes, the next 8, its length), little-endian
    packed: a tag name is compared in three integer comparisons."""
    out = np.zeros((len(names), 3), dtype=np.uint64)
    for i, name in enumerate(names):
        raw = name.encode().ljust(16, b"\0")
        out[i] = (int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little"), len(name))
    return out


_NESTING, _RAW = _keys(NESTING_TAGS), _keys(RAW_TAGS)


@njit(cache=True, inline="always")
def _lower(b):
    return b + 32 if 65 <= b <= 90 else b


@njit(cache=True, inline="always")
def _is_name_char(b):
    return not (b == 32 or b == 9 or b == 10 or b == 12 or b == 13 or b == 47 or b == 62)


@njit(cache=True, inline="always")
def _find(keys, k0, k1, length):
    """Row of ``keys`` for the packed name, or -1."""
    for r in range(keys.shape[0]):
        if keys[r, 0] == k0 and keys[r, 1] == k1 and keys[r, 2] == length:
            return r
    return -1


@njit(cache=True)
def _count_lt(data):
    n = 0
    for b in data:
        n += b == 60
    return n


@njit(cache=True)
def _renames(data, lt, max_depth, nesting, raw):
    """Start offsets and lengths of the tag names to rename (nested past
    max_depth). ``lt``: the offsets of every "<" in ``data`` (found by numpy,
    ~4x faster than a byte loop), so only tags are visited, not text. A "<"
    inside a quoted attribute value counts as a tag: it can only move the
    depth count of a broken page, never its text."""
    n = data.shape[0]
    found = []
    depth = 0
    raw_key = uint64(0)  # inside raw text (script, style...): the packed name that ends it
    raw_len = 0
    p = 0
    while p < lt.shape[0]:
        i = lt[p]
        p += 1
        if i + 3 < n and data[i + 1] == 33 and data[i + 2] == 45 and data[i + 3] == 45 and raw_len == 0:
            j = i + 4  # <!-- comment -->: on to the first "<" after its end
            while j + 2 < n and not (data[j] == 45 and data[j + 1] == 45 and data[j + 2] == 62):
                j += 1
            while p < lt.shape[0] and lt[p] < j + 3:
                p += 1
            continue
        closing = i + 1 < n and data[i + 1] == 47
        a = i + 2 if closing else i + 1
        if a >= n or not 97 <= _lower(data[a]) <= 122:
            continue  # not a tag: "<" in text, <!doctype>, <?...>
        b = a
        k0 = uint64(0)
        k1 = uint64(0)
        while b < n and _is_name_char(data[b]):
            if b - a < 8:
                k0 |= uint64(_lower(data[b])) << uint64(8 * (b - a))
            elif b - a < 16:
                k1 |= uint64(_lower(data[b])) << uint64(8 * (b - a - 8))
            b += 1
        length = b - a
        if raw_len:  # only the end tag of the raw text element ends it
            if closing and length == raw_len and k0 == raw_key:
                raw_len = 0
            continue
        if length <= 16 and _find(nesting, k0, k1, length) >= 0:
            if closing:
                if depth > max_depth:
                    found.append((a, length))
                if depth > 0:
                    depth -= 1
            else:
                depth += 1
                if depth > max_depth:
                    found.append((a, length))
        elif not closing and length <= 8 and _find(raw, k0, k1, length) >= 0:
            raw_key, raw_len = k0, length
    starts = np.empty(len(found), dtype=np.int64)
    lengths = np.empty(len(found), dtype=np.int64)
    for k in range(len(found)):
        starts[k], lengths[k] = found[k]
    return starts, lengths


@njit(cache=True)
def _rename(data, starts, lengths, name):
    size = data.shape[0] + starts.shape[0] * name.shape[0] - lengths.sum()
    out = np.empty(size, dtype=np.uint8)
    o = 0
    i = 0
    for k in range(starts.shape[0]):
        s = starts[k]
        out[o : o + s - i] = data[i:s]
        o += s - i
        out[o : o + name.shape[0]] = name
        o += name.shape[0]
        i = s + lengths[k]
    out[o:] = data[i:]
    return out


def bound_nesting(data: bytes, max_depth: int = MAX_DEPTH) -> bytes:
    """``data`` with the tags of ``NESTING_TAGS`` nested deeper than
    ``max_depth`` renamed to ``marquee`` (see the module docstring).

    O(len(data)); returns ``data`` itself when it has at most ``max_depth``
    ``<``, or nothing to rename.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    if _count_lt(buf) <= max_depth:  # (bytes.count is ~4x slower here)
        return data
    starts, lengths = _renames(buf, np.flatnonzero(buf == 60), max_depth, _NESTING, _RAW)
    if not starts.size:
        return data
    return _rename(buf, starts, lengths, _RENAMED).tobytes()
