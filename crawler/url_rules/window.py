"""The bytes a ranged GET compares to confirm a predicted copy: a window of the
fetched page's body that is the page's text.

A page's middle is not always its text: a large inline ``<style>`` or
``<script>`` (sqlite3-doc's short pages: 60% of them), its ``<head>``, an
inline ``<svg>``. Such bytes are the template's, shared by every page of it:
a distinct page of the same length would be "confirmed" a copy by them (a
helper's static shop: nginx's ``ETag`` of mtime and size let the range
through, and 52 of its contents were never fetched). So the window is taken at
the middle of the body if that is text, else at the first of a few other
fractions of it that is (``FRACTIONS``), and the fraction is kept with the
page's head; a page with none keeps a head that confirms nothing
(``neardup/url_rules/window_not_text``: its predicted copies are plain GETs).

The check is on raw byte offsets, which an HTML parser's tree does not give:
the spans of ``<head>`` and of those elements, found by regular expressions
over the page's lowercased bytes, on the crawl's thread (``bench/window_cost.py``);
the first ``MAX_CHECKED`` bytes only.
"""

from __future__ import annotations

import re

#: A boundary of an element whose content is not a page's text (in lowercased bytes)
_NOT_TEXT = re.compile(rb"<(/?)(script|style|svg|template|noscript)[\s>/]")
_HEAD = re.compile(rb"<head[\s>]")
_HEAD_END = re.compile(rb"</head[\s>]|<body[\s>]")
#: Bytes of a page checked: a window past them is not taken for text (the scan is on the crawl's thread)
MAX_CHECKED = 512 * 1024
_BLANK = b" \t\r\n\f\v"
#: Where a window may sit, in 256ths of the body: its middle first, then farther out on either side
FRACTIONS = (128, 96, 160, 64, 192, 32, 224)


def window_at(length: int, fraction: int, size: int) -> int:
    """The offset of the ``size`` bytes compared in a body of ``length`` bytes, centred at
    ``fraction`` 256ths of it (within the body).

    >>> window_at(1000, 128, 256), window_at(1000, 224, 256), window_at(100, 128, 256)
    (372, 744, 0)
    """
    return max(0, min(length - size, length * fraction // 256 - size // 2))


def window_offset(length: int, size: int) -> int:
    """The middle window's offset (``window_at`` the middle)."""
    return window_at(length, 128, size)


def not_text_spans(body: bytes, until: int = MAX_CHECKED) -> list[tuple[int, int]]:
    """The spans (start, end) of ``body``'s first ``until`` bytes (``MAX_CHECKED`` at most) that are not
    its text: its ``<head>``, and each outermost ``<script>``, ``<style>``, ``<svg>``, ``<template>`` or
    ``<noscript>`` (nested ones counted per name, a self-closing ``<script/>`` none; one still open runs
    to the end). O(until), in C but for a step per boundary.

    >>> not_text_spans(b"<html><head><title>t</title></head><body><p>x</p><svg><style>a</style></svg>y")
    [(6, 35), (49, 76)]
    """
    low = body[: min(until, MAX_CHECKED)].lower()  # (tag names in any case: one pass in C, then searches)
    spans: list[tuple[int, int]] = []
    head = _HEAD.search(low)
    if head is not None:
        end = _HEAD_END.search(low, head.end())
        spans.append((head.start(), end.end() if end is not None else len(low)))
    depth: dict[bytes, int] = {}
    start = -1
    for m in _NOT_TEXT.finditer(low):
        name = m[2]
        if m[1]:
            if depth.get(name):
                depth[name] -= 1
                if not any(depth.values()):
                    spans.append((start, m.end()))
        elif low[max(m.start(), low.find(b">", m.end() - 1) - 1)] != ord("/"):  # (not a self-closing <script/>)
            if not any(depth.values()):
                start = m.start()
            depth[name] = depth.get(name, 0) + 1
    if any(depth.values()):
        spans.append((start, len(low)))
    return spans


def in_text(body: bytes, offset: int, size: int, spans: list[tuple[int, int]] | None = None) -> bool:
    """Whether ``body[offset:offset + size]`` is the page's text: within the checked bytes, not blank
    (an eighth of it at least not white space), and overlapping none of ``not_text_spans`` (given, or
    found up to the window's end).

    >>> page = b"<html><head><style>" + b"x" * 500 + b"</style></head><body><p>" + b"word " * 100 + b"</p></body></html>"
    >>> in_text(page, 300, 64), in_text(page, 600, 64)
    (False, True)
    >>> in_text(b"<p>" + b"a" * 200 + b"<script>var x;</script>" + b"b" * 200, 150, 100)
    False
    >>> svg = b"<body><svg><style>.a{}</style>" + b"<path d='M0 0'/>" * 50 + b"</svg>" + b"<p>word</p>" * 80
    >>> in_text(svg, 400, 64), in_text(svg, 1200, 64), in_text(b'<script src="a.js"/>' + b"text " * 100, 200, 64)
    (False, True, True)
    """
    if offset + size > MAX_CHECKED or len(body[offset : offset + size].translate(None, _BLANK)) < size // 8:
        return False  # (past the checked bytes; or blank, padding that every page of a length shares)
    spans = not_text_spans(body, offset + size) if spans is None else spans
    return not any(start < offset + size and offset < end for start, end in spans)


def text_window(body: bytes, size: int) -> int | None:
    """The first of ``FRACTIONS`` whose window of ``size`` bytes is ``body``'s text, or None.

    >>> script = b"<html><head></head><body><p>" + b"word " * 40 + b"</p><script>" + b"x" * 300 + b"</script>"
    >>> page = script + b"<p>" + b"more " * 60 + b"</p></body></html>"
    >>> text_window(page, 64), text_window(b"<style>" + b"x" * 900 + b"</style>", 64)
    (192, None)
    """
    if in_text(body, window_at(len(body), FRACTIONS[0], size), size):  # (most pages: half of them scanned)
        return FRACTIONS[0]
    spans = not_text_spans(body)
    for fraction in FRACTIONS[1:]:
        if in_text(body, window_at(len(body), fraction, size), size, spans):
            return fraction
    return None
