"""A cheap scan before the parse: is this page one no parser should be given?

HTML parsers are quadratic in the attributes of one element (the HTML
Standard drops a repeated attribute, so each new one is compared with those
before it): lexbor took 0.10 s on a ``<div>`` of 2,000 attributes, 2.4 s on
10,000 and 8 s on 20,000 (and lxml, which Scrapy's selectors and
``LinkExtractor`` use, minutes on one of 200,000). And their time and memory
grow with the elements of a page: 3,000,000 unclosed ``<b>`` (9 MB) took
lexbor 8.5 s and 570 MB, and extracting the text 14 s and 860 MB; 1,000,000
unclosed ``<div>`` (5 MB) nest as deep as they are many.

``hostile_reason(data)`` says why a page is past one of two bounds, or None:

* ``MAX_ATTRIBUTES`` attributes in one start tag (no real page comes near:
  within it lexbor's parse of that tag stays under 0.1 s);
* ``MAX_ELEMENTS`` start tags in the page. It also bounds the nesting depth,
  which cannot exceed the elements; ``deep_nesting`` keeps deep nesting of
  block elements linear below it.

Past a bound the page is skipped, not parsed with the offending part cut
(measured: the bounds are far above any real page, so what is past them is
generated junk whose text is not worth a fingerprint, and one verdict serves
the filter, the ready spider's link extraction and the user's callbacks
alike: ``NEARDUP_WITHHOLD_HOSTILE``).

The scan reads bytes, for UTF-8 or any ASCII-compatible encoding (a UTF-16
page is not seen by it). Cost: O(len(data)) in C and numpy, with Python work
only per run of 2 * ``MAX_ATTRIBUTES`` bytes without a ``>``: 0.03 ms on a
median article page against 10 ms to extract its text (``bench/hostile.py
--scan``). An attribute value holding ``>`` cuts a start tag in two for the
count, so a tag can escape it that way: the worker's time budget
(``NEARDUP_WORKER_TIMEOUT``) is the backstop.

>>> hostile_reason(b"<p class=a>hello</p>") is None
True
>>> hostile_reason(b"<div " + b" ".join(b"a%d" % i for i in range(5000)) + b">x</div>")
'more than 1000 attributes in one <div>'
>>> hostile_reason(b"<b>" * 600_000)
'600000 elements (more than 500000)'
"""

from __future__ import annotations

import re
from itertools import islice

import numpy as np

#: Attributes in one start tag past which a page is hostile
MAX_ATTRIBUTES = 1000
#: Start tags in a page past which it is hostile (also a bound on its nesting depth)
MAX_ELEMENTS = 500_000

_GT = 62  # ">"
_LT = 60  # "<"
_LAST_TAG_START = re.compile(rb".*<([A-Za-z][^\t\n\f\r />]*)", re.DOTALL)
#: one attribute: a name, then maybe "=" and a value (quoted values may hold white space)
_ATTRIBUTE = re.compile(rb"[^\t\n\f\r />=][^\t\n\f\r />=]*"
                        rb"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"[^\"]*\"|'[^']*'|[^\t\n\f\r >]*))?")


def hostile_reason(data: bytes, max_attributes: int = MAX_ATTRIBUTES, max_elements: int = MAX_ELEMENTS) -> str | None:
    """Why ``data`` should not be parsed (see the module docstring), or None. O(len(data))."""
    if len(data) <= 2 * max_attributes and len(data) <= max_elements:
        return None  # too short to hold either
    arr = np.frombuffer(data, dtype=np.uint8)
    if np.count_nonzero(arr == _LT) > max_elements:  # (the common page is done with this count)
        lt = np.flatnonzero(arr[:-1] == _LT)
        after = arr[lt + 1] | 0x20  # (ASCII letters, lower-cased)
        elements = int(np.count_nonzero((after >= 97) & (after <= 122)))
        if elements > max_elements:
            return f"{elements} elements (more than {max_elements})"
    return _many_attributes(data, arr, max_attributes)


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
