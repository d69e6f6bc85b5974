"""The bytes a ranged GET compares to confirm a predicted copy: windows of the
fetched page's body that are the page's text, and the page's head that keeps them.

One window of N bytes is blind to the rest of the page: a distinct page of its
copy's length whose window matches and which differs elsewhere (another first or
last paragraph, the same length and mtime: a helper's planted traps) was taken for
a copy. So the head keeps two things: ``SLICES`` windows of N / ``SLICES`` bytes,
one in each of the body's equal slices where it has text there (``slice_windows``;
asked for in one multi-range GET, ``Range: bytes=a-b,c-d,...``), so that any change
to a stretch of an eighth of the page or more, within its text, is seen; and the
one window of N bytes as before, for a page too short for the slices to pay, one
mostly template, and a server that answers a multi-range GET whole, with one
range or with 416 (Amazon S3, Varnish, aiohttp), which is asked for that one alone.

A page's middle is not always its text: a large inline ``<style>`` or
``<script>`` (sqlite3-doc's short pages: 60% of them), its ``<head>``, an
inline ``<svg>``. Such bytes are the template's, shared by every page of it:
a distinct page of the same length would be "confirmed" a copy by them (a
helper's static shop: nginx's ``ETag`` of mtime and size let the range
through, and 52 of its contents were never fetched). So the window is taken at
the middle of the body if that is text, else at the middle of its longest
stretch of text (``text_window``), and its place is kept with the page's head
(``page_head``); a page with none keeps a head that confirms nothing
(``neardup/url_rules/window_not_text``: its predicted copies are plain GETs).

The check is on raw byte offsets, which an HTML parser's tree does not give:
the spans of ``<head>`` and of those elements, found by regular expressions
over the page's lowercased bytes (``bench/window_cost.py``), the first
``MAX_CHECKED`` bytes only. It runs where the page is fingerprinted, in the
worker process (``jobs.fingerprint_job``), which reads the page's bytes anyway,
not on the crawl's thread (tens of microseconds a page, ``bench/window_cost.py``).
"""

from __future__ import annotations

import re

import mmh3

#: A boundary of an element whose content is not a page's text (in lowercased bytes)
_NOT_TEXT = re.compile(rb"<(/?)(script|style|svg|template|noscript|nav|header|footer|aside)[\s>/]")
_HEAD = re.compile(rb"<head[\s>]")
_HEAD_END = re.compile(rb"</head[\s>]|<body[\s>]")
#: Bytes of a page checked: a window past them is not taken for text (its cost stays bounded on any page)
MAX_CHECKED = 512 * 1024
_BLANK = b" \t\r\n\f\v"
#: Where a window sits first, in 256ths of the body: its middle
MIDDLE = 128
#: A boundary's tag is looked through this far for its end (``/>``): a page of unclosed tags costs no more
TAG_END = 1024
#: A head's hash of its window: 24 bits (beside the body's length, 32, and the window's place, 8)
DIGEST = 0xFFFFFF
#: The body's equal slices, each with a window of its text if it has one, compared in one multi-range GET (on the
#: generated mirrors of ``bench/other_mirrors``, of 47 traps of their copy's length, one paragraph or a page
#: rewritten, one window saw 18, 8 slices 24, 12 slices 39, 16 slices 41, 24 slices 45; each part of an
#: answer costs about 100 bytes of headers)
SLICES = 16
#: The smallest window of a slice: with fewer bytes to compare in all, there is one window (``slice_windows``)
MIN_SLICE_WINDOW = 16
#: A head's bytes as stored: the one window's 64 bits, then a place (8 bits) per slice and their digest (24)
HEAD_BYTES = 8 + SLICES + 3
#: Where a slice's window is tried, in 255ths of the slice: its middle first, then further out
_SLICE_PLACES = (128, 64, 192, 32, 96, 160, 224, 1, 255)
#: Boundaries read at most (a step in Python each): past them, the rest of the page is not text
MAX_BOUNDARIES = 2000


def window_at(length: int, fraction: int, size: int) -> int:
    """The offset of the ``size`` bytes compared in a body of ``length`` bytes, centred at
    ``fraction`` 256ths of it (within the body).

    >>> window_at(1000, 128, 256), window_at(1000, 224, 256), window_at(100, 128, 256)
    (372, 744, 0)
    """
    return max(0, min(length - size, length * fraction // 256 - size // 2))


def not_text_spans(body: bytes, until: int = MAX_CHECKED) -> list[tuple[int, int]]:
    """The spans (start, end) of ``body``'s first ``until`` bytes (``MAX_CHECKED`` at most) that are not
    its text: its ``<head>`` and what comes before it (a doctype, ``<html>``), and each outermost ``<script>``, ``<style>``, ``<svg>``, ``<template>`` or
    ``<noscript>`` (nested ones counted per name, a self-closing ``<script/>`` none; one still open runs
    to the end). O(until), in C but for a step per boundary.

    >>> not_text_spans(b"<html><head><title>t</title></head><body><p>x</p><svg><style>a</style></svg>y")
    [(0, 35), (49, 76)]
    """
    low = body[: min(until, MAX_CHECKED)].lower()  # (tag names in any case: one pass in C, then searches)
    spans: list[tuple[int, int]] = []
    head = _HEAD.search(low)
    if head is not None:
        end = _HEAD_END.search(low, head.end())
        spans.append((0, end.end() if end is not None else len(low)))
    depth: dict[bytes, int] = {}
    start = -1
    for n, m in enumerate(_NOT_TEXT.finditer(low)):
        if n == MAX_BOUNDARIES:  # (a page of that many is taken for not text from there: its cost stays bounded)
            spans.append((start if any(depth.values()) else m.start(), len(low)))
            return spans
        name = m[2]
        if m[1]:
            if depth.get(name):
                depth[name] -= 1
                if not any(depth.values()):
                    spans.append((start, m.end()))
        elif low[max(m.start(), low.find(b">", m.end() - 1, m.end() + TAG_END) - 1)] != ord("/"):  # (not <x/>)
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
    if offset + size > MAX_CHECKED or len(body[offset : offset + size].translate(None, _BLANK)) < size // 2:
        return False  # (past the checked bytes; or half blank, padding that every page of a length shares)
    # (scanned a little past the window: a tag name that starts in it ends after it)
    spans = not_text_spans(body, offset + size + 16) if spans is None else spans
    return not any(start < offset + size and offset < end for start, end in spans)


def text_window(body: bytes, size: int, spans: list[tuple[int, int]] | None = None) -> int | None:
    """Where the window of ``size`` bytes compared for ``body`` sits, in 256ths of it: the middle if
    that is text, else the middle of the longest stretch of text between the spans that are not
    (``not_text_spans``: those, and a page's ``<nav>``, ``<header>``, ``<footer>`` and ``<aside>``, are
    what every page of a template shares; the longest stretch is the page's own text on most pages),
    or of the next longest; None if none holds a window.

    >>> script = b"<html><head></head><body><nav>" + b"menu " * 30 + b"</nav><p>" + b"word " * 40
    >>> page = script + b"</p><script>" + b"x" * 300 + b"</script><p>" + b"more " * 60 + b"</p></body></html>"
    >>> fraction = text_window(page, 64)
    >>> fraction, page[window_at(len(page), fraction, 64):][:15], text_window(b"<style>" + b"x" * 900 + b"</style>", 64)
    (216, b' more more more', None)
    """
    length = len(body)
    if in_text(body, window_at(length, MIDDLE, size), size, spans):  # (most pages: half of them scanned)
        return MIDDLE
    spans = sorted(not_text_spans(body) if spans is None else spans)
    stretches, at = [], 0
    for start, end in spans + [(min(length, MAX_CHECKED), min(length, MAX_CHECKED))]:
        if start - at >= size:
            stretches.append((at, start))
        at = max(at, end)
    for start, end in sorted(stretches, key=lambda st: st[0] - st[1]):  # (the longest first)
        centre = (start + end) // 2 * 256 // length
        for fraction in (centre, centre + 1, centre - 1):
            if 0 < fraction < 256 and in_text(body, window_at(length, fraction, size), size, spans):
                return fraction
    return None


def digest(window: bytes) -> int:
    """What a head keeps of a window's bytes, and a ranged GET's answer is compared with: 24 bits of mmh3."""
    return mmh3.hash(window, signed=False) & DIGEST


def slice_size(size: int) -> int:
    """The bytes of each slice's window when ``size`` bytes are compared in all; 0: too few for
    ``SLICES`` windows of ``MIN_SLICE_WINDOW`` (one window of ``size`` bytes is compared).

    >>> slice_size(256), slice_size(128)
    (16, 0)
    """
    each = size // SLICES
    return each if each >= MIN_SLICE_WINDOW else 0


def slice_offset(length: int, index: int, place: int, each: int) -> int:
    """The offset of slice ``index``'s window of ``each`` bytes at ``place`` (1-255) 255ths of the
    room it has in its slice of a body of ``length`` bytes (the window lies within its slice).

    >>> slice_offset(8000, 0, 1, 16), slice_offset(8000, 0, 255, 16), slice_offset(8000, 15, 128, 16)
    (0, 484, 7742)
    """
    start, end = length * index // SLICES, length * (index + 1) // SLICES
    return start + (end - start - each) * (place - 1) // 254


def slice_windows(body: bytes, each: int, spans: list[tuple[int, int]] | None = None) -> list[int]:
    """Per slice of ``body`` (``SLICES`` equal ones), where its window of ``each`` bytes sits in 255ths of
    the slice's room (``slice_offset``), or 0 when the slice has no text there (``in_text``: its
    ``<head>``, a ``<script>``, a ``<nav>``... are the template's, which every page of it shares;
    past the first ``MAX_CHECKED`` bytes; a slice shorter than its window). Tried at its middle,
    then further out (``_SLICE_PLACES``). O(the page's first ``MAX_CHECKED`` bytes).

    >>> page = b"<html><head><style>" + b"x" * 900 + b"</style></head><body><p>" + b"word " * 300 + b"</p></body></html>"
    >>> slice_windows(page, 16)
    [0, 0, 0, 0, 0, 0, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128]
    """
    length = len(body)
    if length // SLICES < each or each <= 0:
        return [0] * SLICES
    spans = not_text_spans(body) if spans is None else spans
    places = []
    for index in range(SLICES):
        places.append(next((place for place in _SLICE_PLACES
                            if in_text(body, slice_offset(length, index, place, each), each, spans)), 0))
    return places


def page_head(body: bytes, size: int) -> int:
    """The head a fetched page keeps for the ranged GETs that confirm its copies, an int of
    ``HEAD_BYTES``: its length << 32 | the window's place (``text_window``) << 24 | the ``digest`` of its
    ``size`` bytes there, in its low 64 bits; above them, each slice's window place (``slice_windows``,
    the first slice lowest) and the ``digest`` of those windows' bytes end to end (all 0 when
    ``slice_size`` is 0, or no slice has text). 0 for a page with no window of text (it confirms
    nothing). O(the page's first ``MAX_CHECKED`` bytes).

    >>> page = b"<html><body><p>" + b"word " * 200 + b"</p></body></html>"
    >>> head = page_head(page, 64)
    >>> head >> 32 == len(page), head >> 24 & 0xFF, head & DIGEST == digest(page[window_at(len(page), 128, 64):][:64])
    (True, 128, True)
    >>> page_head(b"<style>" + b"x" * 900 + b"</style>", 64)
    0
    >>> [(a, b - a) for a, b in head_ranges(page_head(page, 256), 256, multi=True)][:3]
    [(24, 16), (88, 16), (153, 16)]
    """
    each = slice_size(size)
    spans = not_text_spans(body) if each else None  # (the whole page's, once, for the one window and the slices')
    fraction = text_window(body, size, spans)
    if fraction is None:
        return 0
    offset = window_at(len(body), fraction, size)
    head = len(body) << 32 | fraction << 24 | digest(body[offset : offset + size])
    places = slice_windows(body, each, spans) if each else [0] * SLICES
    if any(places):
        length = len(body)
        windows = b"".join(body[at : at + each] for at in
                           (slice_offset(length, i, place, each) for i, place in enumerate(places) if place))
        head |= (sum(place << 8 * i for i, place in enumerate(places)) | digest(windows) << 8 * SLICES) << 64
    return head


def head_parts(head: int) -> tuple[int, int, int]:
    """A ``page_head``'s (body length, window place in 256ths, digest); a length of 0: no window.

    >>> head_parts(1000 << 32 | 128 << 24 | 0xABCDEF)
    (1000, 128, 11259375)
    """
    return head >> 32 & 0xFFFFFFFF, head >> 24 & 0xFF, head & DIGEST


def head_ranges(head: int, size: int, multi: bool) -> list[tuple[int, int]]:
    """The byte ranges (start, end, exclusive) a ranged GET confirming a copy of the page of ``head``
    (made with ``page_head(body, size)``) asks for: each slice's window (``multi``), or the one
    window; none when the head has no slice windows (``multi``) or no window. O(``SLICES``).

    >>> head = 1000 << 32 | 128 << 24 | 5
    >>> head_ranges(head, 256, multi=False), head_ranges(head, 256, multi=True)
    ([(372, 628)], [])
    """
    length, fraction, _ = head_parts(head)
    if not length:
        return []
    if not multi:
        offset = window_at(length, fraction, size)
        return [(offset, offset + size)]
    each = slice_size(size)
    places = head >> 64
    out = []
    for index in range(SLICES):
        place = places >> 8 * index & 0xFF
        if place and each:
            at = slice_offset(length, index, place, each)
            out.append((at, at + each))
    return out


def head_digest(head: int, multi: bool) -> int:
    """What the bytes of ``head_ranges(head, multi)``, end to end, ``digest`` to.

    >>> head_digest(1000 << 32 | 128 << 24 | 5, multi=False)
    5
    """
    return head >> (64 + 8 * SLICES) & DIGEST if multi else head & DIGEST
