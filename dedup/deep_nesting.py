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

A page with fewer than ``MAX_DEPTH`` ``<`` cannot nest that deep and is
returned as it is, without the pass (~97% of real pages; the pass itself
costs ~1 ns per byte).

>>> bound_nesting(b"<div><div>x</div></div>", max_depth=1)
b'<div><marquee>x</marquee></div>'
"""

from __future__ import annotations

import numpy as np
from numba import njit

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


def _names(names: tuple[str, ...]) -> np.ndarray:
    """Names as rows of a zero-padded uint8 matrix (what the kernel compares)."""
    out = np.zeros((len(names), 16), dtype=np.uint8)
    for i, name in enumerate(names):
        out[i, : len(name)] = np.frombuffer(name.encode(), dtype=np.uint8)
    return out


_NESTING, _RAW = _names(NESTING_TAGS), _names(RAW_TAGS)


@njit(cache=True, inline="always")
def _lower(b):
    return b + 32 if 65 <= b <= 90 else b


@njit(cache=True, inline="always")
def _is_name_char(b):
    return not (b == 32 or b == 9 or b == 10 or b == 12 or b == 13 or b == 47 or b == 62)


@njit(cache=True)
def _find_name(data, start, end, names):
    """Row of ``names`` equal (ASCII case-insensitively) to data[start:end], or -1."""
    n = end - start
    if n > names.shape[1] - 1:
        return -1
    for r in range(names.shape[0]):
        if names[r, n] != 0 or names[r, n - 1] == 0:
            continue
        ok = True
        for k in range(n):
            if _lower(data[start + k]) != names[r, k]:
                ok = False
                break
        if ok:
            return r
    return -1


@njit(cache=True)
def _skip_raw(data, i, names, r):
    """Position of the ``</name`` that ends raw text opened by ``names[r]``, from i (or len)."""
    n = data.shape[0]
    length = 0
    while names[r, length] != 0:
        length += 1
    while i < n:
        if data[i] == 60 and i + 1 + length < n and data[i + 1] == 47:
            ok = True
            for k in range(length):
                if _lower(data[i + 2 + k]) != names[r, k]:
                    ok = False
                    break
            if ok and not _is_name_char(data[i + 2 + length]):
                return i
        i += 1
    return n


@njit(cache=True)
def _renames(data, max_depth, nesting, raw):
    """Start offsets and lengths of the tag names to rename (nested past max_depth)."""
    n = data.shape[0]
    starts = np.empty(n // 2 + 1, dtype=np.int64)
    lengths = np.empty(n // 2 + 1, dtype=np.int64)
    m = 0
    depth = 0
    i = 0
    while i < n:
        if data[i] != 60:  # '<'
            i += 1
            continue
        if i + 3 < n and data[i + 1] == 33 and data[i + 2] == 45 and data[i + 3] == 45:  # <!-- comment -->
            j = i + 4
            while j + 2 < n and not (data[j] == 45 and data[j + 1] == 45 and data[j + 2] == 62):
                j += 1
            i = j + 3
            continue
        closing = i + 1 < n and data[i + 1] == 47
        a = i + 2 if closing else i + 1
        if a >= n or not 97 <= _lower(data[a]) <= 122:
            i += 1  # not a tag: "<" in text, <!doctype>, <?...>
            continue
        b = a
        while b < n and _is_name_char(data[b]):
            b += 1
        r = _find_name(data, a, b, nesting)
        if r >= 0:
            if closing:
                if depth > max_depth:
                    starts[m] = a
                    lengths[m] = b - a
                    m += 1
                if depth > 0:
                    depth -= 1
            else:
                depth += 1
                if depth > max_depth:
                    starts[m] = a
                    lengths[m] = b - a
                    m += 1
        # to the end of the tag, past quoted attribute values
        j = b
        quote = 0
        while j < n:
            c = data[j]
            if quote:
                if c == quote:
                    quote = 0
            elif c == 34 or c == 39:
                quote = c
            elif c == 62:
                break
            j += 1
        i = j + 1
        if not closing:
            q = _find_name(data, a, b, raw)
            if q >= 0:
                i = _skip_raw(data, i, raw, q)
    return starts[:m], lengths[:m]


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
    if data.count(b"<") <= max_depth:
        return data
    buf = np.frombuffer(data, dtype=np.uint8)
    starts, lengths = _renames(buf, max_depth, _NESTING, _RAW)
    if not starts.size:
        return data
    return _rename(buf, starts, lengths, _RENAMED).tobytes()
