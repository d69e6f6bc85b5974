"""A cheap scan before the parse: is this page one no parser should be given?

HTML parsers are quadratic in the attributes of one element (the HTML
Standard drops a repeated attribute, so each new one is compared with those
before it): lexbor took 0.02 s on a ``<div>`` of 1,000 attributes, 1.0 s on
10,000 and 2.3 s on 20,000 (and lxml, which Scrapy's selectors and
``LinkExtractor`` use, minutes on one of 200,000). And their time and memory
grow with the depth of the tree: 3,000,000 unclosed ``<b>`` (9 MB) took
lexbor 8.5 s and 570 MB, and extracting the text 14 s and 860 MB, and
1,000,000 nested ``<div>`` 27 s, against 1.7 s for 1,000,000 closed ``<b>``.

``hostile_reason(data)`` says why a page is past one of four bounds, or None:

* ``MAX_ATTRIBUTES`` attributes in one start tag (no real page comes near:
  within it lexbor's parse of that tag stays under 0.03 s);
* ``MAX_DEPTH``: the nesting depth, as the start tags and end tags read in
  order say it, not counting the elements that never nest (void ones such
  as ``br img meta``, and ``p li dd dt td th tr option``, which the next of
  their kind closes): an estimate from above of what the parser builds;
* ``MAX_ELEMENTS`` start tags in the page;
* ``MAX_REOPENED``: formatting elements the parser would open again. The HTML
  Standard keeps a list of the formatting elements still open (``b i em
  font``...): when a block closes around them and text follows, it opens each
  again (it "reconstructs the active formatting elements"). 1,000 unclosed
  ``<b id=N>`` then 14,000 ``<p>x</p>``, a page of 125 KB, make 14 million
  elements: lexbor took 4 s and 5 GB to parse it. The estimate, from the
  tags: at each tag other than these, the formatting start tags not yet
  ended (``a`` and ``nobr`` left out: a new one closes the one before, so
  they never pile up), summed per name in numpy; past the bound, again tag
  by tag with the Standard's "Noah's Ark" clause (of elements alike, 3 stay
  in the list: an old page's unclosed ``<font face=a>`` on every line) and
  its markers (what a table cell opens is dropped when it closes). The shared data's 2,762 real pages reach at
  most 34,051 (a 400 KB chapter of a manual), against 200,000 for a page of
  1,000 ``<b>`` and 100 ``<p>x</p>``.

Past a bound the page is skipped, not parsed with the offending part cut
(measured: the bounds are far above any real page, so what is past them is
generated junk whose text is not worth a fingerprint, and one verdict serves
the filter, the ready spider's link extraction and the user's callbacks
alike: ``NEARDUP_WITHHOLD_HOSTILE``). Below ``MAX_DEPTH``, ``deep_nesting``
keeps deeply nested blocks linear to parse.

The scan reads bytes, for UTF-8 or any ASCII-compatible encoding (a UTF-16 or
UTF-32 page, declared or by its BOM, is scanned transcoded to UTF-8). Cost: O(len(data)) in C and numpy, with Python work
only per run of 2 * ``MAX_ATTRIBUTES`` bytes without a ``>`` and for a page
past the numpy estimate of ``MAX_REOPENED``: 0.12 ms on a median article page
against 1.0 ms to extract its text (``bench/hostile.py --scan``). An attribute
value holding ``>`` does not end its tag for the formatting elements, which are
told alike by their whole attributes. For the attribute count, it cuts a tag in
two, so a tag can escape the count that way, unless ``thorough`` (the crawl's
thread, where no time budget stops a parse): past ``MAX_ATTRIBUTES`` such
values in a page (no real page of the shared data has 40), the attributes are
counted tag by tag. Elsewhere, and for many elements each just within the
attribute bound, the worker's time budget (``NEARDUP_WORKER_TIMEOUT``) is the
backstop.

>>> hostile_reason(b"<p class=a>hello</p>") is None
True
>>> hostile_reason(b"<div " + b" ".join(b"a%d" % i for i in range(5000)) + b">x</div>")
'more than 1000 attributes in one <div>'
>>> hostile_reason(b"<b>" * 300_000)
'elements nested 300000 deep (more than 250000)'
>>> hostile_reason(b"<br>" * 300_000) is None
True
>>> hostile_reason(b"".join(b"<b id=%d>" % i for i in range(1000)) + b"<p>x</p>" * 1000)
'more than 200000 formatting elements opened again'
>>> hostile_reason(b"".join(b'<b x="y>%d">' % i for i in range(1000)) + b"<p>x</p>" * 1000)
'more than 200000 formatting elements opened again'
>>> hostile_reason(b"<div " + b" ".join(b'a%d="x>"' % i for i in range(5000)) + b">x</div>", thorough=True)
'more than 1000 attributes in one <div>'
"""

from __future__ import annotations

import re
from collections import deque
from itertools import islice

import numpy as np
from w3lib.encoding import read_bom

from .decode import is_wide

#: Attributes in one start tag past which a page is hostile
MAX_ATTRIBUTES = 1000
#: Nesting depth (estimated from the tags: see the module docstring) past which a page is hostile
MAX_DEPTH = 250_000
#: Start tags in a page past which it is hostile
MAX_ELEMENTS = 2_000_000
#: Formatting elements the parser would open again (estimated: see the module docstring) past which a page is hostile
MAX_REOPENED = 200_000
#: Formatting elements that pile up when left open (``a`` and ``nobr`` do not: a new one closes the one before)
PILING_TAGS = ("b", "big", "code", "em", "font", "i", "s", "small", "strike", "strong", "tt", "u")
#: Elements that never nest: void ones, and those the next of their kind closes (their tags do not count for depth)
FLAT_TAGS = ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
             "wbr", "p", "li", "dd", "dt", "td", "th", "tr", "option")

_GT = 62  # ">"
_LT = 60  # "<"
_SLASH = 47  # "/"
_NAME = 8  # bytes of a tag name compared (FLAT_TAGS are shorter)


def _keys(*names: str) -> np.ndarray:
    """Tag names as ``_names`` gives them: their bytes, zero-padded to ``_NAME``, as one uint64 each."""
    return np.array([np.frombuffer(n.encode().ljust(_NAME, b"\0"), dtype=np.uint64)[0] for n in names])


_FLAT_KEYS = _keys(*FLAT_TAGS)
_PILING_KEYS = _keys(*PILING_TAGS)
_PILING_FIRST = np.zeros(256, dtype=bool)  # (a tag whose first byte is none of these is no piling one)
_PILING_FIRST[[ord(c) for n in PILING_TAGS for c in (n[0], n[0].upper())]] = True
_OFFSETS = np.arange(_NAME)
_TABLE_KEY = _keys("table")[0]
_LAST_TAG_START = re.compile(rb".*<([A-Za-z][^\t\n\f\r />]*)", re.DOTALL)
#: one attribute: a name, then maybe "=" and a value (quoted values may hold white space)
_ATTRIBUTE = re.compile(rb"[^\t\n\f\r />=][^\t\n\f\r />=]*"
                        rb"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"[^\"]*\"|'[^']*'|[^\t\n\f\r >]*))?")


def hostile_reason(data: bytes, max_attributes: int = MAX_ATTRIBUTES, max_depth: int = MAX_DEPTH,
                   max_elements: int = MAX_ELEMENTS, max_reopened: int = MAX_REOPENED, *,
                   thorough: bool = False, encoding: str | None = None) -> str | None:
    """Why ``data`` should not be parsed (see the module docstring), or None. O(len(data)). ``thorough``:
    for a parse with no time budget (the crawl's thread): attributes hidden behind ``>`` in quoted values
    are looked for too (about 0.25 ms more on a 115 KB article page, twice the rest of the scan).
    ``encoding``: declared outside the bytes; a page in UTF-16 or UTF-32 (so declared, or by its BOM) is
    scanned as UTF-8, which its markup is the same in (its own bytes hide every tag from the scan)."""
    wide = _wide_encoding(data, encoding)
    if wide is not None:
        data = data.decode(wide, "replace").encode("utf-8")
    if len(data) <= 2 * max_attributes and len(data) <= min(max_depth, max_elements) \
            and len(data) ** 2 <= 16 * max_reopened:
        return None  # too short to hold any
    arr = np.frombuffer(data, dtype=np.uint8)
    lt = arr == _LT
    tags = int(np.count_nonzero(lt))
    if tags > min(max_depth, max_elements):  # (the common page is done with this count)
        why = _too_many_or_too_deep(arr, max_depth, max_elements)
        if why is not None:
            return why
    if tags ** 2 > 4 * max_reopened:  # (fewer tags cannot reopen that many: open ones times the rest)
        why = _reopened(arr, np.flatnonzero(lt), max_reopened)
        if why is not None:
            return why
    return _many_attributes(data, arr, max_attributes, thorough)


def _wide_encoding(data: bytes, encoding: str | None) -> str | None:
    """The UTF-16 or UTF-32 codec ``data`` is in, by its BOM or as ``encoding`` declares, else None. O(1)."""
    bom_encoding, _ = read_bom(data)
    if is_wide(bom_encoding):
        return bom_encoding
    return encoding if is_wide(encoding) else None


def _reopened(arr: np.ndarray, lt: np.ndarray, max_reopened: int) -> str | None:
    """Past ``max_reopened`` formatting elements the parser would open again (see the module
    docstring), said; else None. ``lt``: the offsets of the page's "<". O(len(arr)); 0.12 ms
    on an article page of the shared data, against 1 ms to extract its text."""
    lt = lt[lt < arr.size - _NAME - 2]  # (a tag in the last bytes has nothing after it to open again)
    end = arr[lt + 1] == _SLASH
    first = lt + 1 + end  # a tag name's first byte
    letter = ((arr[first] | 0x20) >= 97) & ((arr[first] | 0x20) <= 122)  # ("<0", "< b": text, not tags)
    lt, end, first = lt[letter], end[letter], first[letter]
    maybe = np.flatnonzero(_PILING_FIRST[arr[first]])
    if maybe.size == 0:
        return None
    names = _names(arr, first[maybe])
    which = names[:, None] == _PILING_KEYS  # (np.isin sorts: slower on a few hundred)
    hit = which.any(axis=1)
    piling, kind = maybe[hit], which[hit].argmax(axis=1)
    if piling.size * lt.size <= max_reopened:  # (each piling start tag open at every tag: not that many)
        return None
    # inside a table an end tag may close nothing (one in a cell is the cell's, and what was opened
    # before the cell stays open): counted as closing nothing there, so that this stays an estimate from above
    tables = maybe[names == _TABLE_KEY]
    in_table = np.zeros(lt.size, dtype=bool)
    if tables.size:
        step = np.zeros(lt.size, dtype=np.int64)
        step[tables] = np.where(end[tables], -1, 1)
        in_table = _open(step) > 0
        in_table[tables] |= end[tables]  # (a </table> closes the table after its cells)
    closing = end & ~in_table
    still_open = np.zeros(lt.size, dtype=np.int64)
    for k in np.unique(kind):  # (per name: an end tag closes one of its own name only)
        mine = piling[kind == k]
        step = np.zeros(lt.size, dtype=np.int64)
        step[mine] = np.where(end[mine], np.where(closing[mine], -1, 0), 1)
        still_open += _open(step)
    still_open[piling] = 0
    if int(still_open.sum()) <= max_reopened:
        return None
    # (rare: no real page of the shared data; tables, alike elements and the order of the tags,
    # which the estimate leaves out, are read tag by tag)
    if _reopened_tag_by_tag(arr.tobytes(), max_reopened) > max_reopened:
        return f"more than {max_reopened} formatting elements opened again"
    return None


#: a tag: its name, then its attributes up to the ">" that ends it (one inside a quoted value does not: a page
#: of 1,000 ``<b x="y>N">`` is 1,000 elements unlike each other, not 3 alike); possessive, and a tag the data
#: ends in matches to its end (a match that could fail would be tried again from every later "<": quadratic)
_TAG = re.compile(rb"<(/?)([A-Za-z][^\t\n\f\r />]*+)"
                  rb"((?:[^>\"'=]++|=[\t\n\f\r ]*+(?:\"[^\"]*+\"|'[^']*+'|[^\t\n\f\r >]*+)|[\"'])*+)(?:>|\Z)")
#: an attribute value in quotes that holds a ">" (which cuts a start tag in two for ``_many_attributes``' runs)
_QUOTED_GT = re.compile(rb"=[\t\n\f\r ]*+(?:\"[^\">]*+>|'[^'>]*+>)")
_PILING = frozenset(n.encode() for n in PILING_TAGS)
#: Elements that put a marker in the list of formatting elements: what is open outside is not opened again inside
_CELLS = frozenset((b"td", b"th", b"caption", b"applet", b"object", b"marquee", b"template"))
#: End tags that close an open cell, and start tags that close the cell before them
_CELL_CLOSERS_END = frozenset((b"tr", b"tbody", b"thead", b"tfoot", b"table"))
_CELL_CLOSERS_START = frozenset((b"td", b"th", b"tr"))
#: Tags the tag-by-tag count reads at most; past them a page is taken as past the bound (~1 s)
MAX_TAGS_READ = 500_000


class _Scope:
    """The formatting elements open within one cell (or the page): what a marker separates."""

    __slots__ = ("alike", "alive", "by_name", "key_of")

    def __init__(self) -> None:
        self.by_name: dict[bytes, list[int]] = {}  # name -> its elements, last opened last
        self.alike: dict[tuple[bytes, bytes], deque[int]] = {}  # (name, attributes) -> its elements
        self.key_of: dict[int, tuple[bytes, bytes]] = {}
        self.alive: set[int] = set()


def _reopened_tag_by_tag(data: bytes, max_reopened: int) -> int:
    """The same estimate, tag by tag: at each tag other than a piling one, the formatting elements
    open in its cell counted, with the HTML Standard's "Noah's Ark" clause (of elements alike, the
    same tag and attributes, only the last 3 stay in the list: an old page's unclosed
    ``<font face=a>`` on every line opens 3 again, not a thousand) and its markers (a table cell,
    a caption...: what is open outside is not opened again inside, and what is opened inside is
    dropped when it closes). Stops past ``max_reopened``, or past ``MAX_TAGS_READ`` tags (then it
    says more than the bound). O(tags), each in O(1)."""
    scopes = [_Scope()]
    total = tags = ids = 0
    for m in _TAG.finditer(data):
        tags += 1
        if tags > MAX_TAGS_READ:
            return max_reopened + 1
        is_end, name = m.group(1), m.group(2).lower()
        scope = scopes[-1]
        if name in _PILING:
            if is_end:  # the last open one of that name
                stack = scope.by_name.get(name)
                while stack:
                    i = stack.pop()
                    if i in scope.alive:
                        scope.alive.discard(i)
                        scope.alike[scope.key_of.pop(i)].remove(i)
                        break
            else:
                key = (name, b" ".join(sorted(m.group(3).split())))
                queue = scope.alike.setdefault(key, deque())
                if len(queue) >= 3:
                    scope.alive.discard(queue.popleft())
                ids += 1
                queue.append(ids)
                scope.alive.add(ids)
                scope.key_of[ids] = key
                scope.by_name.setdefault(name, []).append(ids)
            continue
        if is_end:
            if (name in _CELLS or name in _CELL_CLOSERS_END) and len(scopes) > 1:
                scopes.pop()
                continue
        else:
            if name in _CELL_CLOSERS_START and len(scopes) > 1:
                scopes.pop()
            if name in _CELLS:
                scopes.append(_Scope())
                continue
        total += len(scopes[-1].alive)
        if total > max_reopened:
            break
    return total


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
    depth = _depth(step[~np.isin(_names(pad, first), _FLAT_KEYS)])
    if depth > max_depth:
        return f"elements nested {depth} deep (more than {max_depth})"
    return None


def _names(arr: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each tag's name from its first byte (``first``: offsets at least ``_NAME`` bytes before
    ``arr``'s end), lower-cased, its first ``_NAME`` bytes up to where it ends, as one uint64
    (``_keys``)."""
    window = arr[first[:, None] + _OFFSETS]
    low = window | 0x20
    alnum = ((low >= 97) & (low <= 122)) | ((window >= 48) & (window <= 57))
    return np.ascontiguousarray(np.where(np.logical_and.accumulate(alnum, axis=1), low, 0)).view(np.uint64)[:, 0]


def _open(step: np.ndarray) -> np.ndarray:
    """A walk of +1 (start tag), -1 (end tag) and 0 steps that never goes below 0 (a stray
    end tag closes nothing): how many are open after each step, its running sum less the
    running minimum of that sum."""
    total = np.cumsum(step)
    return total - np.minimum(np.minimum.accumulate(total), 0)


def _depth(step: np.ndarray) -> int:
    """The deepest a walk of +1 (start tag) and -1 (end tag) steps goes (``_open``)."""
    return int(_open(step).max()) if step.size else 0


def _many_attributes(data: bytes, arr: np.ndarray, max_attributes: int, thorough: bool = False) -> str | None:
    """The first start tag with more than ``max_attributes`` attributes, said, or None.

    A tag of that many attributes spans more than 2 * ``max_attributes``
    bytes without a ``>``, so such a run holds a whole block of
    ``max_attributes`` bytes (counted from 0) without one: numpy finds those
    blocks, and only their runs are looked at."""
    if thorough and next(islice(_QUOTED_GT.finditer(data), max_attributes, None), None) is not None:
        # past max_attributes quoted values holding a ">" (no real page of the shared data has 100): they may
        # hide one tag of as many attributes from the runs below, so the tags are read whole, one by one
        return _many_attributes_tag_by_tag(data, max_attributes)
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


def _many_attributes_tag_by_tag(data: bytes, max_attributes: int) -> str | None:
    """``_many_attributes`` reading each start tag whole (``_TAG``: a ">" in a quoted value does not end
    it). Past ``MAX_TAGS_READ`` tags the page is taken as past the bound. O(len(data)), in Python per tag."""
    for tags, m in enumerate(_TAG.finditer(data)):
        if tags >= MAX_TAGS_READ:
            return f"more than {MAX_TAGS_READ} tags with attribute values holding '>'"
        if m.group(1) or m.end(3) - m.start(3) <= 2 * max_attributes:
            continue
        if next(islice(_ATTRIBUTE.finditer(data, m.start(3), m.end(3)), max_attributes, None), None) is not None:
            return f"more than {max_attributes} attributes in one <{m.group(2).decode('latin-1').lower()[:40]}>"
    return None
