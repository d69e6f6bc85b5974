"""Bounding the parser's work on pathologically deep markup.

The HTML Standard's tree construction asks, for many start tags (``div ul
blockquote section h1``...), whether a ``p`` element is *in button scope*: a
walk up the stack of open elements to the nearest scope boundary. On a page
of n nested or unclosed ``<div>`` that makes parsing O(n²): lexbor took 32 s
on 100,000 nested divs (1.1 MB). Browsers cap the depth of the tree they
build (Chromium at 512).

Here one pass over the page's tags follows the nesting of those elements
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
returned as it is after counting them (``bytes.count``; most real pages).
The others are searched with one regular expression that finds only the
tags that matter (the nesting ones, raw-text ones and comments), so Python
runs per such tag, not per byte.

>>> bound_nesting(b"<div><div>x</div></div>", max_depth=1)
b'<div><marquee>x</marquee></div>'
"""

from __future__ import annotations

import re

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

#: where a tag name ends, as the tokenizer reads it (white space, "/", ">", or the end)
_NAME_END = rb"(?=[\t\n\f\r />]|\Z)"
_NESTING = frozenset(n.encode() for n in NESTING_TAGS)
_TAGS = re.compile(rb"<!--|<(/?)(" + b"|".join(n.encode() for n in NESTING_TAGS + RAW_TAGS) + rb")" + _NAME_END,
                   re.IGNORECASE)
_RAW_END = {n.encode(): re.compile(rb"</" + n.encode() + _NAME_END, re.IGNORECASE) for n in RAW_TAGS}
_RENAMED = b"marquee"


def _renames(data: bytes, max_depth: int) -> list[tuple[int, int]]:
    """(offset, length) of the tag names nested past ``max_depth``. A "<"
    inside a quoted attribute value counts as a tag: it can only move the
    depth count of a broken page, never its text."""
    found: list[tuple[int, int]] = []
    depth = 0
    pos = 0
    search = _TAGS.search
    while (m := search(data, pos)) is not None:
        pos = m.end()
        name = m.group(2)
        if name is None:  # <!-- comment -->: on after its end
            end = data.find(b"-->", m.start() + 4)
            if end < 0:
                break
            pos = end + 3
            continue
        name = name.lower()
        closing = bool(m.group(1))
        if name in _NESTING:
            if closing:
                if depth > max_depth:
                    found.append((m.start(2), len(name)))
                depth = max(depth - 1, 0)
            else:
                depth += 1
                if depth > max_depth:
                    found.append((m.start(2), len(name)))
        elif not closing:  # raw text: only its own end tag ends it
            raw_end = _RAW_END[name].search(data, pos)
            if raw_end is None:
                break
            pos = raw_end.end()
    return found


def bound_nesting(data: bytes, max_depth: int = MAX_DEPTH) -> bytes:
    """``data`` with the tags of ``NESTING_TAGS`` nested deeper than
    ``max_depth`` renamed to ``marquee`` (see the module docstring).

    O(len(data)); returns ``data`` itself when it has at most ``max_depth``
    ``<``, or nothing to rename.
    """
    if data.count(b"<") <= max_depth:
        return data
    renames = _renames(data, max_depth)
    if not renames:
        return data
    pieces: list[bytes] = []
    last = 0
    for start, length in renames:
        pieces += (data[last:start], _RENAMED)
        last = start + length
    pieces.append(data[last:])
    return b"".join(pieces)
