"""The bytes a ranged GET compares to confirm a predicted copy: a window from
the middle of the fetched page's body, and whether that window is the page's
text at all.

A page whose middle is not its text (a large inline ``<style>`` or
``<script>`` in ``<head>``, a hydration blob, an inline ``<svg>``) shares that
window with every page of its template: a distinct page of the same length
would be "confirmed" a copy by its bytes (a helper's static shop: nginx's
``ETag`` of mtime and size let the range through, and 52 of its contents were
never fetched). Such a page keeps no head, so its predicted copies are plain
GETs (``neardup/url_rules/unconfirmable``).

The check is on raw byte offsets, which an HTML parser's tree does not give:
the last element boundary of those kinds before the window's end, and whether
``<head>`` ended before it, by regular expressions over the page's first half
lowercased, on the crawl's thread (40 us for a page of 45 kB on average over
the shared data's pages; a page of many inline SVGs costs more, and a window
past ``MAX_CHECKED`` is not checked, nor taken for text).
"""

from __future__ import annotations

import re

#: A boundary of an element whose content is not a page's text (in lowercased bytes)
_NOT_TEXT = re.compile(rb"<(/?)(script|style|svg|template|noscript)[\s>/]")
_HEAD = re.compile(rb"<head[\s>]")
_HEAD_END = re.compile(rb"</head[\s>]|<body[\s>]")
#: A window ending past this many bytes is not checked, and not taken for text: the scan is of the bytes
#: before it, on the crawl's thread (pages past about 1 MiB confirm no copy)
MAX_CHECKED = 512 * 1024


def window_offset(length: int, size: int) -> int:
    """The offset of the ``size`` bytes compared in a body of ``length`` bytes: its middle.

    >>> window_offset(1000, 256), window_offset(100, 256)
    (372, 0)
    """
    return max(0, length // 2 - size // 2)


def in_text(body: bytes, offset: int, size: int) -> bool:
    """Whether ``body[offset:offset + size]`` lies outside the page's ``<head>`` and outside any
    ``<script>``, ``<style>``, ``<svg>``, ``<template>`` or ``<noscript>``, with no such element
    starting inside it. O(offset + size).

    >>> page = b"<html><head><style>" + b"x" * 500 + b"</style></head><body><p>" + b"word " * 100 + b"</p></body></html>"
    >>> in_text(page, 300, 64), in_text(page, 600, 64)
    (False, True)
    >>> in_text(b"<p>" + b"a" * 200 + b"<script>var x;</script>" + b"b" * 200, 150, 100)
    False
    >>> svg = b"<body><svg><style>.a{}</style>" + b"<path d='M0 0'/>" * 50 + b"</svg>" + b"<p>word</p>" * 80
    >>> in_text(svg, 400, 64), in_text(svg, 1200, 64), in_text(b'<script src="a.js"/>' + b"text " * 100, 200, 64)
    (False, True, True)
    """
    end = offset + size
    if end > MAX_CHECKED:
        return False
    low = body[:end].lower()  # (tag names in any case: one pass in C, then case-sensitive searches)
    head = _HEAD.search(low, 0, offset)
    if head is not None and _HEAD_END.search(low, head.end(), offset) is None:
        return False  # (in <head>)
    if _HEAD_END.search(low, offset) is not None:
        return False  # (<head> ends inside the window)
    open_: dict[bytes, int] = {}  # (per element name, those open: a <style> inside an <svg> closes, the svg not)
    for m in _NOT_TEXT.finditer(low):
        if m.start() >= offset:
            return False  # (a boundary inside the window: part of it is not text)
        if m[1]:
            open_[m[2]] = max(0, open_.get(m[2], 0) - 1)
        elif low[max(m.start(), low.find(b">", m.end() - 1) - 1)] != ord("/"):  # (not a self-closing <script/>)
            open_[m[2]] = open_.get(m[2], 0) + 1
    return not any(open_.values())
