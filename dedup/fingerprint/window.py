"""The bytes a ranged GET compares to confirm a predicted copy: windows of the
fetched page's body that are the page's text, and the page's head that keeps them.

One window of N bytes is blind to the rest of the page: a distinct page of its
copy's length whose window matches and which differs elsewhere (another first or
last paragraph, the same length and mtime: a helper's planted traps) was taken for
a copy. So the head keeps two things: ``SLICES`` windows of N / ``SLICES`` bytes at
equal steps through the page's text (``slice_windows``; asked for in one multi-range
GET, ``Range: bytes=a-b,c-d,...``, or every other one where their answer would cost
too much), so that any change to a stretch of an eighth of its text or more is seen
(a quarter, with every other one); and the one window of N bytes as before, for a
page too short for the windows to pay, one with little text, and a server that
answers a multi-range GET whole, with one range or with 416 (Amazon S3, Varnish,
aiohttp), which is asked for that one alone.

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
#: Windows of the page's text compared in one multi-range GET, at equal steps through its text (on the generated
#: mirrors of ``bench/other_mirrors``, of 47 traps of their copy's length, one paragraph or a page rewritten, one
#: window saw 18, a window in each eighth of the body 24, each sixteenth 41, each 24th 45, these 42; each part
#: of an answer costs about 100 bytes of headers). Half of them, every other one, where their answer would cost
#: too much
SLICES = 16
#: The smallest of those windows: with fewer bytes to compare in all, there is one window (``slice_size``)
MIN_SLICE_WINDOW = 16
#: A window's place in a head: its offset in 65536ths of the body (``slice_offset``), 0 for none
_PLACE = 0xFFFF
#: Places a window is tried at, a window's length apart, from the middle of its share of the text on
_TRIES = 8
#: A head's bytes as stored: the one window's 64 bits, a place (16 bits) per window, the digests of all of them and
#: of every other one (24 bits each)
HEAD_BYTES = 8 + 2 * SLICES + 3 + 3
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
    """The bytes of each of the ``SLICES`` windows when ``size`` bytes are compared in all; 0: too few
    for windows of ``MIN_SLICE_WINDOW`` (one window of ``size`` bytes is compared).

    >>> slice_size(256), slice_size(128)
    (16, 0)
    """
    each = size // SLICES
    return each if each >= MIN_SLICE_WINDOW else 0


def _asked(windows: int) -> range:
    """The indexes of the windows a ranged GET of ``windows`` of the ``SLICES`` asks for: all, or every other one.

    >>> list(_asked(SLICES // 2))
    [0, 2, 4, 6, 8, 10, 12, 14]
    """
    return range(0, SLICES, SLICES // windows)


def slice_offset(length: int, place: int) -> int:
    """The offset of a window at ``place`` 65536ths of a body of ``length`` bytes.

    >>> slice_offset(8000, 32768), slice_offset(100, 1)
    (4000, 0)
    """
    return length * place >> 16


def text_stretches(length: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches (start, end) of a body of ``length`` bytes between its ``spans`` that are not text
    (``not_text_spans``), within its first ``MAX_CHECKED`` bytes. O(spans log spans).

    >>> text_stretches(100, [(0, 10), (40, 50), (45, 60)])
    [(10, 40), (60, 100)]
    """
    out, at = [], 0
    limit = min(length, MAX_CHECKED)
    for start, end in sorted(spans) + [(limit, limit)]:
        if min(start, limit) > at:
            out.append((at, min(start, limit)))
        at = max(at, end)
    return out


def slice_windows(body: bytes, each: int, spans: list[tuple[int, int]] | None = None) -> list[int]:
    """Where the ``SLICES`` windows of ``each`` bytes of ``body`` sit (``slice_offset``'s places; 0 for
    none): at equal steps through its text (``text_stretches``: its ``<head>``, a ``<script>``, a
    ``<nav>``... are the template's, which every page of it shares, and a page's navigation can be
    most of it), each at the middle of its step's share of the text, within one stretch, not half
    blank (``in_text``), and after the window before it. So a stretch of an eighth of the page's
    text or more, wherever it lies, holds a window. O(the page's first ``MAX_CHECKED`` bytes).

    >>> page = b"<html><head><style>" + b"x" * 900 + b"</style></head><body><nav>" + b"menu " * 400 + b"</nav><p>"
    >>> page += b"word " * 300 + b"</p></body></html>"
    >>> [slice_offset(len(page), p) for p in slice_windows(page, 16)][:4]
    [2990, 3085, 3180, 3275]
    """
    length = len(body)
    if each <= 0 or not length:
        return [0] * SLICES
    spans = not_text_spans(body) if spans is None else spans
    stretches = [(a, b) for a, b in text_stretches(length, spans) if b - a >= each]
    total = sum(b - a for a, b in stretches)
    places, after, seen, k = [], 0, 0, 0
    for index in range(SLICES):
        want = total * (2 * index + 1) // (2 * SLICES)  # (the middle of this window's share of the text)
        while k < len(stretches) and seen + stretches[k][1] - stretches[k][0] <= want:
            seen += stretches[k][1] - stretches[k][0]
            k += 1
        place = 0
        if k < len(stretches):
            a, b = stretches[k]
            start = min(max(a, a + want - seen - each // 2, after), b - each)
            for shift in range(0, _TRIES * each, each):  # (past blank bytes, indentation: a little further on)
                place = -(-(start + shift) * 65536 // length)  # (the first place at or after it)
                at = slice_offset(length, place)
                if place <= _PLACE and after <= at and at + each <= b and in_text(body, at, each, spans):
                    break
                place = 0
        places.append(place)
        if place:
            after = slice_offset(length, place) + each
    return places


def page_head(body: bytes, size: int) -> int:
    """The head a fetched page keeps for the ranged GETs that confirm its copies, an int of
    ``HEAD_BYTES``: its length << 32 | the window's place (``text_window``) << 24 | the ``digest`` of its
    ``size`` bytes there, in its low 64 bits; above them, the place of each of the ``SLICES`` windows
    (``slice_windows``, the first lowest, 16 bits each), the ``digest`` of their bytes end to end, and
    that of every other one's (all 0 when ``slice_size`` is 0). 0 for a page with no window of text
    (it confirms nothing). O(the page's first ``MAX_CHECKED`` bytes).

    >>> page = b"<html><body><p>" + b"word " * 200 + b"</p></body></html>"
    >>> head = page_head(page, 64)
    >>> head >> 32 == len(page), head >> 24 & 0xFF, head & DIGEST == digest(page[window_at(len(page), 128, 64):][:64])
    (True, 128, True)
    >>> page_head(b"<style>" + b"x" * 900 + b"</style>", 64)
    0
    >>> [(a, b - a) for a, b in head_ranges(page_head(page, 256), 256, windows=SLICES)][:3]
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
        at = [slice_offset(length, place) if place else None for place in places]
        every = b"".join(body[a : a + each] for a in at if a is not None)
        other = b"".join(body[a : a + each] for a in (at[i] for i in _asked(SLICES // 2)) if a is not None)
        head |= (sum(place << 16 * i for i, place in enumerate(places))
                 | digest(every) << 16 * SLICES | digest(other) << 16 * SLICES + 24) << 64
    return head


def head_parts(head: int) -> tuple[int, int, int]:
    """A ``page_head``'s (body length, window place in 256ths, digest); a length of 0: no window.

    >>> head_parts(1000 << 32 | 128 << 24 | 0xABCDEF)
    (1000, 128, 11259375)
    """
    return head >> 32 & 0xFFFFFFFF, head >> 24 & 0xFF, head & DIGEST


def head_ranges(head: int, size: int, windows: int) -> list[tuple[int, int]]:
    """The byte ranges (start, end, exclusive) a ranged GET confirming a copy of the page of ``head``
    (made with ``page_head(body, size)``) asks for: its ``SLICES`` windows (``windows``), every other
    one (``SLICES // 2``), or its one window (1); only those the page has. O(``SLICES``).

    >>> head = 1000 << 32 | 128 << 24 | 5
    >>> head_ranges(head, 256, windows=1), head_ranges(head, 256, windows=SLICES)
    ([(372, 628)], [])
    """
    length, fraction, _ = head_parts(head)
    if not length:
        return []
    if windows == 1:
        offset = window_at(length, fraction, size)
        return [(offset, offset + size)]
    each = slice_size(size)
    places = head >> 64
    out = []
    for index in _asked(windows):
        place = places >> 16 * index & _PLACE
        if place and each:
            at = slice_offset(length, place)
            out.append((at, at + each))
    return out


def head_digest(head: int, windows: int) -> int:
    """What the bytes of ``head_ranges(head, size, windows)``, end to end, ``digest`` to.

    >>> head_digest(1000 << 32 | 128 << 24 | 5, windows=1)
    5
    """
    if windows == 1:
        return head & DIGEST
    return head >> 64 + 16 * SLICES + (24 if windows == SLICES // 2 else 0) & DIGEST
