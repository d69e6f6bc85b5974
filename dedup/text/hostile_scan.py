"""A cheap scan before the parse: is this page one no parser should be given?

HTML parsers are quadratic in the attributes of one element (the HTML
Standard drops a repeated attribute, so each new one is compared with those
before it): lexbor took 0.02 s on a ``<div>`` of 1,000 attributes, 1.0 s on
10,000 and 2.3 s on 20,000 (and lxml, which Scrapy's selectors and
``LinkExtractor`` use, minutes on one of 200,000). And their time and memory
grow with the depth of the tree: 3,000,000 unclosed ``<b>`` (9 MB) took
lexbor 8.5 s and 570 MB, and extracting the text 14 s and 860 MB, and
1,000,000 nested ``<div>`` 27 s, against 1.7 s for 1,000,000 closed ``<b>``.

``hostile_reason(data)`` says why a page is past one of three bounds, or None:

* ``MAX_ATTRIBUTES`` attributes in one start tag (no real page comes near:
  within it lexbor's parse of that tag stays under 0.03 s);
* ``MAX_DEPTH``: the nesting depth, as the start tags and end tags read in
  order say it, not counting the elements that never nest (void ones such
  as ``br img meta``, and ``p li dd dt td th tr option``, which the next of
  their kind closes): an estimate from above of what the parser builds;
* ``MAX_ELEMENTS`` start tags in the page.

Past a bound the page is skipped, not parsed with the offending part cut
(measured: the bounds are far above any real page, so what is past them is
generated junk whose text is not worth a fingerprint, and one verdict serves
the filter, the ready spider's link extraction and the user's callbacks
alike: ``NEARDUP_WITHHOLD_HOSTILE``). Below ``MAX_DEPTH``, ``deep_nesting``
keeps deeply nested blocks linear to parse.

The scan reads bytes, for UTF-8 or any ASCII-compatible encoding (a UTF-16
page is not seen by it). Cost: O(len(data)) in C and numpy, with Python work
only per run of 2 * ``MAX_ATTRIBUTES`` bytes without a ``>``: 0.025 ms on a
median article page against 1.8 ms to extract its text (``bench/hostile.py
--scan``). An attribute value holding ``>`` cuts a start tag in two for the
count, so a tag can escape it that way, and many elements each just within
the attribute bound add up: the worker's time budget
(``NEARDUP_WORKER_TIMEOUT``) is the backstop.

>>> hostile_reason(b"<p class=a>hello</p>") is None
True
>>> hostile_reason(b"<div " + b" ".join(b"a%d" % i for i in range(5000)) + b">x</div>")
'more than 1000 attributes in one <div>'
>>> hostile_reason(b"<b>" * 300_000)
'elements nested 300000 deep (more than 250000)'
>>> hostile_reason(b"<br>" * 300_000) is None
True
"""

from __future__ import annotations

import re
from itertools import islice

import numpy as np

#: Attributes in one start tag past which a page is hostile
MAX_ATTRIBUTES = 1000
#: Nesting depth (estimated from the tags: see the module docstring) past which a page is hostile
MAX_DEPTH = 250_000
#: Start tags in a page past which it is hostile
MAX_ELEMENTS = 2_000_000
#: Elements that never nest: void ones, and those the next of their kind closes (their tags do not count for depth)
FLAT_TAGS = ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
             "wbr", "p", "li", "dd", "dt", "td", "th", "tr", "option")

_GT = 62  # ">"
_LT = 60  # "<"
_SLASH = 47  # "/"
_NAME = 8  # bytes of a tag name compared (FLAT_TAGS are shorter)
_FLAT_KEYS = np.array([np.frombuffer(n.encode().ljust(_NAME, b"\0"), dtype=np.uint64)[0] for n in FLAT_TAGS])
_LAST_TAG_START = re.compile(rb".*<([A-Za-z][^\t\n\f\r />]*)", re.DOTALL)
#: one attribute: a name, then maybe "=" and a value (quoted values may hold white space)
_ATTRIBUTE = re.compile(rb"[^\t\n\f\r />=][^\t\n\f\r />=]*"
                        rb"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"[^\"]*\"|'[^']*'|[^\t\n\f\r >]*))?")


def hostile_reason(data: bytes, max_attributes: int = MAX_ATTRIBUTES, max_depth: int = MAX_DEPTH,
                   max_elements: int = MAX_ELEMENTS) -> str | None:
    """Why ``data`` should not be parsed (see the module docstring), or None. O(len(data))."""
    if len(data) <= 2 * max_attributes and len(data) <= min(max_depth, max_elements):
        return None  # too short to hold any
    arr = np.frombuffer(data, dtype=np.uint8)
    if np.count_nonzero(arr == _LT) > min(max_depth, max_elements):  # (the common page is done with this count)
        why = _too_many_or_too_deep(arr, max_depth, max_elements)
        if why is not None:
            return why
    return _many_attributes(data, arr, max_attributes)


def _too_many_or_too_deep(arr: np.ndarray, max_depth: int, max_elements: int) -> str | None:
    """Past ``max_elements`` start tags, or nested past ``max_depth``, said; else None. O(len(arr))."""
    pad = np.concatenate((arr, np.zeros(_NAME + 2, dtype=np.uint8)))
    lt = np.flatnonzero(arr == _LT)
    end = pad[lt + 1] == _SLASH
    first = np.where(end, lt + 2, lt + 1)  # a tag name's first byte
    letter = ((pad[first] | 0x20) >= 97) & ((pad[first] | 0x20) <= 122)
    start = letter & ~end
    elements = int(np.count_nonzero(start))
    if elements > max_elements:
        return f"{elements} elements (more than {max_elements})"
    first, start = first[letter], start[letter]
    step = np.where(start, 1, -1)
    if _depth(step) <= max_depth:  # (counting every tag: an estimate from above, 0.1 s per million tags)
        return None
    # each tag's name, lower-cased, its first _NAME bytes up to where it ends, as one uint64
    # (only for a page already past the bound counting every tag: 0.5 s per million tags)
    window = pad[first[:, None] + np.arange(_NAME)]
    low = window | 0x20
    alnum = ((low >= 97) & (low <= 122)) | ((window >= 48) & (window <= 57))
    names = np.ascontiguousarray(np.where(np.logical_and.accumulate(alnum, axis=1), low, 0)).view(np.uint64)[:, 0]
    depth = _depth(step[~np.isin(names, _FLAT_KEYS)])
    if depth > max_depth:
        return f"elements nested {depth} deep (more than {max_depth})"
    return None


def _depth(step: np.ndarray) -> int:
    """The deepest a walk of +1 (start tag) and -1 (end tag) steps goes, never
    below 0 (a stray end tag closes nothing): its running sum less the running
    minimum of that sum."""
    if step.size == 0:
        return 0
    total = np.cumsum(step)
    return int((total - np.minimum(np.minimum.accumulate(total), 0)).max())


def _many_attributes(data: bytes, arr: np.ndarray, max_attributes: int) -> str | None:
    """The first start tag with more than ``max_attributes`` attributes, said, or None.

    A tag of that many attributes spans more than 2 * ``max_attributes``
    bytes without a ``>``, so such a run holds a whole block of
    ``max_attributes`` bytes (counted from 0) without one: numpy finds those
    blocks, and only their runs are looked at."""
    block = max_attributes
    whole = len(arr) // block * block
    if whole == 0:
        return None
    clear = np.flatnonzero((arr[:whole].reshape(-1, block) == _GT).max(axis=1) == 0)
    end = -1
    for b in clear.tolist():
        if b * block < end:
            continue  # (in the run just looked at)
        start = data.rfind(b">", 0, b * block) + 1
        end = data.find(b">", b * block)
        if end < 0:
            end = len(data)
        if end - start <= 2 * max_attributes:
            continue
        last = data.rfind(b"<", start, end)
        if last < 0 or end - last <= 2 * max_attributes:
            continue  # (most long runs: text, or a script, with no "<" far enough from their end)
        # the run's start tag: its last "<" followed by a letter (a greedy prefix
        # backtracks from the run's end, in C)
        m = _LAST_TAG_START.match(data, start, end)
        if m is None or end - m.start(1) <= 2 * max_attributes:
            continue
        # (counted up to the bound only: the rest of a 200,000-attribute tag is not looked at)
        if next(islice(_ATTRIBUTE.finditer(data, m.end(), end), max_attributes, None), None) is not None:
            name = m.group(1).decode("latin-1").lower()[:40]
            return f"more than {max_attributes} attributes in one <{name}>"
    return None
