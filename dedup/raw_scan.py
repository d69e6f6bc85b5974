"""Visible text straight from the HTML bytes, when that gives lexbor's answer.

``text.extract`` normally parses a page with lexbor (the HTML Standard's tree
construction), serialises the tree and scans the serialisation
(``html_scan``). For most pages that tree is the one a stack of open elements
gives with a handful of the Standard's rules, so this module tokenises the
page itself (the Standard's tokenizer: tags, attributes, comments, raw text,
RCDATA, character references) and applies those rules: implied end tags
(``p``, ``li``, ``dd``/``dt``, ``option``, table cells and rows), end tags that
pop to their element when it is in scope, the head/body split, the adoption
agency's simple cases and the reconstruction of formatting elements. The scan
itself (hidden elements, blocks, furniture, link text) is ``html_scan``'s,
fed the same events, so the output is the same Page.

Where the Standard does something this module does not model (text foster
parented out of a table, the adoption agency moving a block, ``<frameset>``,
``<plaintext>``, ``<caption>``, invalid UTF-8, foreign-content breakouts...)
``scan`` returns a non-zero *bail* code instead of guessing, and the caller
uses lexbor. Tests check that every real page the fast path accepts gives
exactly the Page the lexbor path gives, and generated markup too.

Cost: O(length of the page), one pass, no tree and no serialisation
(lexbor's parse + serialisation + scan cost ~3-5x more on real pages).
"""

from __future__ import annotations

import html.entities

import numpy as np
from numba import njit

from .nfkc import QUICK_CHECK

from .html_scan import (_name_table, ANCHOR, BLOCK, DROPPED, FURNITURE, RAW_DROPPED, VOID, _BLOCKS, _CP, _HAN,
                        _HAS, _LINK, _NSTATE, _OUT, _PENDING, _RAW, _SPACES, _START, _has_word_then, _is_han,
                        _lookup, _lower, _open_char, _space, ROW_END, ROW_FURNITURE, ROW_HAN, ROW_LINK,
                        ROW_START, ROW_WORDS)

# ---------------------------------------------------------------- tag ids
# Tree-construction properties of a tag (bit flags, indexed by tag id).
SPECIAL, FORMATTING, SCOPE, IMPLIED, CLOSES_P, MARKER, VOIDT, HEADING, NO_RECON, HEAD_OK, BREAKOUT, SVG_IP, \
    MATH_IP = (1 << i for i in range(13))

_SPECIAL = {
    "address", "applet", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote", "body", "br",
    "button", "caption", "center", "col", "colgroup", "dd", "details", "dir", "div", "dl", "dt", "embed",
    "fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5",
    "h6", "head", "header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen", "li", "link", "listing",
    "main", "marquee", "menu", "meta", "nav", "noembed", "noframes", "noscript", "object", "ol", "p", "param",
    "plaintext", "pre", "script", "search", "section", "select", "source", "style", "summary", "table", "tbody",
    "td", "template", "textarea", "tfoot", "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp"}
_FORMATTING = {"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u"}
_SCOPE = {"applet", "caption", "html", "table", "td", "th", "marquee", "object", "template"}
_IMPLIED = {"dd", "dt", "li", "optgroup", "option", "p", "rb", "rp", "rt", "rtc"}
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_CLOSES_P = {"address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl",
             "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol", "p",
             "search", "section", "summary", "ul", "pre", "listing", "form", "hr", "xmp"} | _HEADINGS
_MARKERS = {"td", "th", "caption", "applet", "object", "marquee", "template"}
_VOID = {"area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "image", "input",
         "keygen", "link", "meta", "param", "source", "track", "wbr"}
# start tags before which the Standard does not reconstruct the formatting elements
_NO_RECON = (_CLOSES_P - {"xmp"}) | {"li", "dd", "dt", "plaintext", "table", "textarea", "iframe", "noembed",
                                      "noscript", "param", "source", "track", "rb", "rp", "rt", "rtc", "caption",
                                      "col", "colgroup", "frame", "head", "tbody", "td", "tfoot", "th", "thead",
                                      "tr", "body", "html", "frameset", "base", "basefont", "bgsound", "link",
                                      "meta", "noframes", "script", "style", "template", "title"}
# what the "in head" insertion mode takes in (the rest starts the body)
_HEAD_OK = {"base", "basefont", "bgsound", "link", "meta", "title", "noscript", "noframes", "style", "script",
            "template", "head", "html"}
# HTML start tags that end foreign content (<svg>, <math>): not modelled
_BREAKOUT = {"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em", "embed",
             "head", "hr", "i", "img", "li", "listing", "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s",
             "small", "span", "strong", "strike", "sub", "sup", "table", "tt", "u", "ul", "var"} | _HEADINGS
# HTML integration points: their content is parsed as HTML
_SVG_IP = {"foreignobject", "desc", "title"}
_MATH_IP = {"annotation-xml", "mi", "mo", "mn", "ms", "mtext"}
# named tags the rules below test by id
_NAMED = ("address", "div", "sub", "sup", "var", "a", "body", "br", "button", "col", "dd", "dt", "font", "form", "frameset", "head", "html", "image",
          "input", "li", "listing", "math", "nobr", "ol", "option", "optgroup", "p", "plaintext", "pre", "rb",
          "rp", "rt", "rtc", "ruby", "select", "svg", "table", "tbody", "td", "template", "textarea", "tfoot",
          "th", "thead", "title", "tr", "ul", "caption", "colgroup", "frame", "xmp", "script", "style",
          "iframe", "noembed", "noframes", "noscript", "applet", "marquee", "object", "desc", "foreignobject",
          "annotation-xml", "mi", "mo", "mn", "ms", "mtext", "isindex", "keygen")
_ALL_TAGS = sorted(_SPECIAL | _FORMATTING | _SCOPE | _IMPLIED | _CLOSES_P | _MARKERS | _VOID | set(_NAMED) | _BREAKOUT
                   | {"span", "label", "legend", "dialog", "datalist", "canvas", "embed", "aside", "article"})
TAG_ID = {name: i + 1 for i, name in enumerate(_ALL_TAGS)}  # 0: any other name



def _tag_props() -> np.ndarray:
    """Tree-construction properties (bit flags) of each tag id."""
    props = np.zeros(len(TAG_ID) + 1, dtype=np.int64)
    for group, bit in ((_SPECIAL, SPECIAL), (_FORMATTING, FORMATTING), (_SCOPE, SCOPE), (_IMPLIED, IMPLIED),
                       (_CLOSES_P, CLOSES_P), (_MARKERS, MARKER), (_VOID, VOIDT), (_HEADINGS, HEADING),
                       (_NO_RECON, NO_RECON), (_HEAD_OK, HEAD_OK), (_BREAKOUT, BREAKOUT), (_SVG_IP, SVG_IP),
                       (_MATH_IP, MATH_IP)):
        for name in group:
            props[TAG_ID[name]] |= bit
    return props


def _ids() -> np.ndarray:
    """The ids of ``_NAMED`` in order (what the kernel calls T_A, T_BODY...)."""
    return np.array([TAG_ID[n] for n in _NAMED], dtype=np.int64)


PROPS = _tag_props()

(T_ADDRESS, T_DIV, T_SUB, T_SUP, T_VAR, T_A, T_BODY, T_BR, T_BUTTON, T_COL, T_DD, T_DT, T_FONT, T_FORM, T_FRAMESET, T_HEAD, T_HTML, T_IMAGE, T_INPUT,
 T_LI, T_LISTING, T_MATH, T_NOBR, T_OL, T_OPTION, T_OPTGROUP, T_P, T_PLAINTEXT, T_PRE, T_RB, T_RP, T_RT, T_RTC,
 T_RUBY, T_SELECT, T_SVG, T_TABLE, T_TBODY, T_TD, T_TEMPLATE, T_TEXTAREA, T_TFOOT, T_TH, T_THEAD, T_TITLE, T_TR,
 T_UL, T_CAPTION, T_COLGROUP, T_FRAME, T_XMP, T_SCRIPT, T_STYLE, T_IFRAME, T_NOEMBED, T_NOFRAMES, T_NOSCRIPT,
 T_APPLET, T_MARQUEE, T_OBJECT, T_DESC, T_FOREIGNOBJECT, T_ANNOTATION_XML, T_MI, T_MO, T_MN, T_MS, T_MTEXT,
 T_ISINDEX, T_KEYGEN) = (TAG_ID[n] for n in _NAMED)

# Bail codes (why the fast path gave up; the caller counts them in tests and benchmarks).
(BAIL_UTF8, BAIL_FOSTER, BAIL_ADOPTION, BAIL_UNSUPPORTED, BAIL_FOREIGN, BAIL_DEPTH, BAIL_STATEFUL_FORMATTING,
 BAIL_QUIRKS_TABLE, BAIL_SELECT, BAIL_ATTR_REF, BAIL_SCRIPT_ESCAPE, BAIL_BODY_ATTRS, BAIL_FORM,
 BAIL_NOAH) = range(1, 15)
BAIL_NAMES = {1: "invalid utf-8", 2: "foster parenting", 3: "adoption agency", 4: "unsupported element",
              5: "foreign content", 6: "depth", 7: "formatting element with state", 8: "quirks table in p",
              9: "select", 10: "character reference in attribute", 11: "escaped script", 12: "body attributes",
              13: "form", 14: "noah's ark"}

_NFKC = _NSTATE  # the slot of the scan state after html_scan's: the largest QUICK_CHECK value written
MAX_STACK = 1024  # deeper pages take lexbor's path (which bounds nesting, see deep_nesting)
# An element's own state (stack column 8, list column 3): bits of what its attributes make it
STATE_HIDDEN, STATE_FURNITURE, STATE_LINK = 1, 2, 4


# ------------------------------------------------------ character references
def _entity_table() -> tuple[np.ndarray, ...]:
    """Open-addressing hash table of the named character references (names
    without '&', with their ';' where they have one) -> up to two code points."""
    names = sorted(html.entities.html5)
    size = 8192
    buf = b"".join(n.encode() for n in names)
    offs = np.zeros(len(names) + 1, dtype=np.int64)
    offs[1:] = np.cumsum([len(n) for n in names])
    slot_name = np.full(size, -1, dtype=np.int64)
    cps = np.zeros((len(names), 2), dtype=np.int64)
    for i, n in enumerate(names):
        v = html.entities.html5[n]
        cps[i, 0] = ord(v[0])
        cps[i, 1] = ord(v[1]) if len(v) > 1 else 0
        h = _fnv(n.encode()) & (size - 1)
        while slot_name[h] >= 0:
            h = (h + 1) & (size - 1)
        slot_name[h] = i
    return np.frombuffer(buf, dtype=np.uint8).copy(), offs, slot_name, cps


def _fnv(b: bytes) -> int:
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _cp1252_table() -> np.ndarray:
    """The Standard's replacements for numeric references 0x80-0x9F (windows-1252)."""
    t = np.arange(0x20, dtype=np.int64) + 0x80
    for i in range(0x20):
        try:
            t[i] = ord(bytes([0x80 + i]).decode("cp1252"))
        except UnicodeDecodeError:
            pass
    return t


@njit(cache=True, inline="always", _nrt=False)
def _fnv_span(src, s, e):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(s, e):
        h = (h ^ np.uint64(src[i])) * np.uint64(0x100000001B3)
    return h


@njit(cache=True, _nrt=False)
def _entity_lookup(src, s, e, ebuf, eoffs, eslots, ecps):
    """Index of the named reference src[s:e] in the table, else -1."""
    mask = eslots.shape[0] - 1
    h = np.int64(_fnv_span(src, s, e) & np.uint64(mask))
    n = e - s
    while True:
        i = eslots[h]
        if i < 0:
            return -1
        a, b = eoffs[i], eoffs[i + 1]
        if b - a == n:
            same = True
            for j in range(n):
                if ebuf[a + j] != src[s + j]:
                    same = False
                    break
            if same:
                return i
        h = (h + 1) & mask


@njit(cache=True, inline="always", _nrt=False)
def _is_alnum(b):
    return (48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122)


@njit(cache=True, _nrt=False)
def _char_ref(src, k, n, ebuf, eoffs, eslots, ecps, cp1252):
    """The character reference at src[k] == '&' in text: (cp1, cp2, length);
    cp1 < 0 when there is none (the '&' is a literal)."""
    j = k + 1
    if j < n and src[j] == 35:  # '#'
        j += 1
        hexa = j < n and (src[j] == 120 or src[j] == 88)
        if hexa:
            j += 1
        d0 = j
        value = 0
        while j < n:
            c = src[j]
            if 48 <= c <= 57:
                d = c - 48
            elif hexa and 97 <= c <= 102:
                d = c - 87
            elif hexa and 65 <= c <= 70:
                d = c - 55
            else:
                break
            value = value * (16 if hexa else 10) + d
            if value > 0x10FFFF:
                value = 0x110000  # saturate: still out of range
            j += 1
        if j == d0:
            return -1, 0, 0
        if j < n and src[j] == 59:
            j += 1
        if value == 0 or value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            value = 0xFFFD
        elif 0x80 <= value <= 0x9F:
            value = cp1252[value - 0x80]
        return value, 0, j - k
    r = j
    while r < n and r - j < 32 and _is_alnum(src[r]):
        r += 1
    if r == j:
        return -1, 0, 0
    if r < n and src[r] == 59:  # the commonest references, without the table
        m = r - j
        if m == 4 and src[j] == 110 and src[j + 1] == 98 and src[j + 2] == 115 and src[j + 3] == 112:
            return 0xA0, 0, 6  # &nbsp;
        if m == 3 and src[j] == 97 and src[j + 1] == 109 and src[j + 2] == 112:
            return 38, 0, 5  # &amp;
        if m == 2 and src[j + 1] == 116 and (src[j] == 108 or src[j] == 103):
            return 60 if src[j] == 108 else 62, 0, 4  # &lt; &gt;
        if m == 4 and src[j] == 113 and src[j + 1] == 117 and src[j + 2] == 111 and src[j + 3] == 116:
            return 34, 0, 6  # &quot;
    if r < n and src[r] == 59:
        i = _entity_lookup(src, j, r + 1, ebuf, eoffs, eslots, ecps)
        if i >= 0:
            return ecps[i, 0], ecps[i, 1], r + 1 - k
    for m in range(r, j, -1):  # the longest name without ';' (the legacy ones)
        i = _entity_lookup(src, j, m, ebuf, eoffs, eslots, ecps)
        if i >= 0:
            return ecps[i, 0], ecps[i, 1], m - k
    return -1, 0, 0


# ------------------------------------------------------------ text output
@njit(cache=True, inline="always", _nrt=False)
def _is_space_cp(c):
    """str.isspace of one code point."""
    return (9 <= c <= 13) or (28 <= c <= 32) or c == 0x85 or c == 0xA0 or c == 0x1680 or \
        (0x2000 <= c <= 0x200A) or c == 0x2028 or c == 0x2029 or c == 0x202F or c == 0x205F or c == 0x3000


@njit(cache=True, inline="always", _nrt=False)
def _emit_cp(out, st, link, c):
    """One visible character (or white space) given by its code point."""
    if _is_space_cp(c):
        _space(st, link)
        return
    _open_char(out, st)
    o = st[_OUT]
    if c >= 0x80:
        q = QUICK_CHECK[c] if c < 0x10000 else 2
        if q > st[_NFKC]:
            st[_NFKC] = q
    if c < 0x80:
        out[o] = c
        o += 1
    elif c < 0x800:
        out[o] = 0xC0 | (c >> 6)
        out[o + 1] = 0x80 | (c & 0x3F)
        o += 2
    elif c < 0x10000:
        out[o] = 0xE0 | (c >> 12)
        out[o + 1] = 0x80 | ((c >> 6) & 0x3F)
        out[o + 2] = 0x80 | (c & 0x3F)
        o += 3
    else:
        out[o] = 0xF0 | (c >> 18)
        out[o + 1] = 0x80 | ((c >> 12) & 0x3F)
        out[o + 2] = 0x80 | ((c >> 6) & 0x3F)
        out[o + 3] = 0x80 | (c & 0x3F)
        o += 4
    st[_OUT] = o
    st[_CP] += 1
    st[_RAW] += 1
    if link:
        st[_LINK] += 1
    if _is_han(c):
        st[_HAN] += 1


@njit(cache=True, inline="always", _nrt=False)
def _utf8_char(src, k, e):
    """(code point, length) of the UTF-8 character at src[k] (>= 0x80); length 0 if invalid."""
    b = np.int64(src[k])
    if 0xC2 <= b <= 0xDF:
        if k + 1 < e and (src[k + 1] & 0xC0) == 0x80:
            return ((b & 0x1F) << 6) | (np.int64(src[k + 1]) & 0x3F), 2
        return 0, 0
    if 0xE0 <= b <= 0xEF:
        if k + 2 < e and (src[k + 1] & 0xC0) == 0x80 and (src[k + 2] & 0xC0) == 0x80:
            c = ((b & 0x0F) << 12) | ((np.int64(src[k + 1]) & 0x3F) << 6) | (np.int64(src[k + 2]) & 0x3F)
            if c >= 0x800 and not (0xD800 <= c <= 0xDFFF):
                return c, 3
        return 0, 0
    if 0xF0 <= b <= 0xF4:
        if k + 3 < e and (src[k + 1] & 0xC0) == 0x80 and (src[k + 2] & 0xC0) == 0x80 \
                and (src[k + 3] & 0xC0) == 0x80:
            c = ((b & 0x07) << 18) | ((np.int64(src[k + 1]) & 0x3F) << 12) \
                | ((np.int64(src[k + 2]) & 0x3F) << 6) | (np.int64(src[k + 3]) & 0x3F)
            if 0x10000 <= c <= 0x10FFFF:
                return c, 4
        return 0, 0
    return 0, 0


@njit(cache=True, _nrt=False)
def _text_run(out, st, link, src, k, e, decode, stop_lt, ebuf, eoffs, eslots, ecps, cp1252):
    """Visible text from src[k] to e, or to the next '<' when ``stop_lt``;
    character references decoded when ``decode`` (data, RCDATA; raw text is
    copied as is). Returns where it stopped, or -1 on invalid UTF-8."""
    while k < e:
        ch = src[k]
        if ch == 60 and stop_lt:
            break
        if 33 <= ch <= 126 and not (decode and ch == 38) and not (stop_lt and ch == 60):  # printable ASCII
            _open_char(out, st)
            o = st[_OUT]
            k0 = k
            while k < e:
                ch = src[k]
                if ch < 33 or ch > 126 or (decode and ch == 38) or (stop_lt and ch == 60):
                    break
                out[o] = ch
                o += 1
                k += 1
            st[_OUT] = o
            st[_CP] += k - k0
            st[_RAW] += k - k0
            if link:
                st[_LINK] += k - k0
            continue
        if ch == 32 or ch == 9 or ch == 10 or ch == 12:
            _space(st, link)
            k += 1
            continue
        if ch >= 0x80:
            # a run of non-ASCII characters (Chinese text), counted in locals as html_scan does
            c, ln = _utf8_char(src, k, e)
            if ln == 0:
                return -1
            if _is_space_cp(c):
                _space(st, link)
                k += ln
                continue
            _open_char(out, st)
            o = st[_OUT]
            n_cp = 0
            han = 0
            while True:
                for j in range(ln):
                    out[o + j] = src[k + j]
                o += ln
                k += ln
                n_cp += 1
                if _is_han(c):
                    han += 1
                q = QUICK_CHECK[c] if c < 0x10000 else 2  # (CJK compatibility ideographs are not NFKC)
                if q > st[_NFKC]:
                    st[_NFKC] = q
                if k >= e or src[k] < 0x80:
                    break
                c, ln = _utf8_char(src, k, e)
                if ln == 0 or _is_space_cp(c):
                    break
            st[_OUT] = o
            st[_CP] += n_cp
            st[_RAW] += n_cp
            if link:
                st[_LINK] += n_cp
            st[_HAN] += han
            if ln == 0:
                return -1
            continue
        if ch == 38 and decode:  # a character reference, or a literal '&'
            c1, c2, ln = _char_ref(src, k, e, ebuf, eoffs, eslots, ecps, cp1252)
            if c1 < 0:
                _emit_cp(out, st, link, 38)
                k += 1
            else:
                _emit_cp(out, st, link, c1)
                if c2:
                    _emit_cp(out, st, link, c2)
                k += ln
            continue
        if ch == 13:  # CR LF and lone CR are one line feed
            _space(st, link)
            k += 2 if k + 1 < e and src[k + 1] == 10 else 1
            continue
        _emit_cp(out, st, link, np.int64(ch))
        k += 1
    return k


@njit(cache=True, _nrt=False)
def _title_run(tout, nt, src, k, e, ebuf, eoffs, eslots, ecps, cp1252):
    """RCDATA src[k:e] decoded into tout[nt:]; returns the new nt, -1 on invalid UTF-8."""
    while k < e:
        ch = src[k]
        if ch == 38:
            c1, c2, ln = _char_ref(src, k, e, ebuf, eoffs, eslots, ecps, cp1252)
            if c1 >= 0:
                for c in (c1, c2):
                    if c:
                        nt = _put_utf8(tout, nt, c)
                k += ln
                continue
        if ch == 13:
            tout[nt] = 10
            nt += 1
            k += 2 if k + 1 < e and src[k + 1] == 10 else 1
            continue
        if ch >= 0x80:
            c, ln = _utf8_char(src, k, e)
            if ln == 0:
                return -1
            for j in range(ln):
                tout[nt + j] = src[k + j]
            nt += ln
            k += ln
            continue
        tout[nt] = ch
        nt += 1
        k += 1
    return nt


@njit(cache=True, inline="always", _nrt=False)
def _put_utf8(buf, o, c):
    if c < 0x80:
        buf[o] = c
        return o + 1
    if c < 0x800:
        buf[o] = 0xC0 | (c >> 6)
        buf[o + 1] = 0x80 | (c & 0x3F)
        return o + 2
    if c < 0x10000:
        buf[o] = 0xE0 | (c >> 12)
        buf[o + 1] = 0x80 | ((c >> 6) & 0x3F)
        buf[o + 2] = 0x80 | (c & 0x3F)
        return o + 3
    buf[o] = 0xF0 | (c >> 18)
    buf[o + 1] = 0x80 | ((c >> 12) & 0x3F)
    buf[o + 2] = 0x80 | ((c >> 6) & 0x3F)
    buf[o + 3] = 0x80 | (c & 0x3F)
    return o + 4


# ------------------------------------------------------------ tokenizer bits
@njit(cache=True, inline="always", _nrt=False)
def _ws(b):
    """The tokenizer's white space (CR is normalised to LF before it)."""
    return b == 9 or b == 10 or b == 12 or b == 13 or b == 32


@njit(cache=True, inline="always", _nrt=False)
def _alpha(b):
    return (65 <= b <= 90) or (97 <= b <= 122)


@njit(cache=True, _nrt=False)
def _find_seq(src, i, n, a, b, c):
    """Index of the first ``abc`` at or after i, else n (c < 0: two bytes)."""
    while i < n:
        if src[i] == a and i + 1 < n and src[i + 1] == b and (c < 0 or (i + 2 < n and src[i + 2] == c)):
            return i
        i += 1
    return n


@njit(cache=True, _nrt=False)
def _raw_end(src, i, n, ns, ne):
    """Start of the appropriate end tag ``</name`` + (white space, '/' or '>'), else n."""
    m = ne - ns
    while i < n:
        if src[i] == 60 and i + 1 < n and src[i + 1] == 47 and i + 2 + m < n:
            ok = True
            for j in range(m):
                if _lower(src[i + 2 + j]) != _lower(src[ns + j]):
                    ok = False
                    break
            if ok:
                c = src[i + 2 + m]
                if _ws(c) or c == 47 or c == 62:
                    return i
        i += 1
    return n


@njit(cache=True, _nrt=False)
def _same_name(src, a, b, c, d):
    if b - a != d - c:
        return False
    for j in range(b - a):
        if _lower(src[a + j]) != _lower(src[c + j]):
            return False
    return True


@njit(cache=True, inline="always", _nrt=False)
def _eq_word(src, s, e, word):
    if e - s != word.shape[0]:
        return False
    for j in range(e - s):
        if _lower(src[s + j]) != word[j]:
            return False
    return True


@njit(cache=True, _nrt=False)
def _matches_any(src, s, e, data, offs, exact):
    """src[s:e] is (``exact``) or starts with one of the words (``_words``), ASCII case-insensitively."""
    for w in range(offs.shape[0] - 1):
        a = offs[w]
        ln = offs[w + 1] - a
        if e - s < ln or (exact and e - s != ln):
            continue
        same = True
        for j in range(ln):
            if _lower(src[s + j]) != data[a + j]:
                same = False
                break
        if same:
            return True
    return False


@njit(cache=True, _nrt=False)
def _quoted(src, k, end):
    """(start, end, index after) of the quoted identifier at src[k]; start -1
    when there is none, closed before ``end``."""
    q = src[k] if k < end else 0
    if q != 34 and q != 39:
        return -1, -1, -1
    j = k + 1
    while j < end and src[j] != q:
        j += 1
    if j >= end:
        return -1, -1, -1
    return k + 1, j, j + 1


@njit(cache=True, _nrt=False)
def _doctype_quirks(src, k, end):
    """The mode a ``<!DOCTYPE html`` sets by its identifiers, src[k:end] (``end``:
    its ``>``): 1 quirks, 0 no quirks or limited quirks (the same trees for the
    scan), 2 a form not read here (missing spaces, unclosed quotes...)."""
    if k + 6 > end:
        return 2
    public = _eq_word(src, k, k + 6, _W_PUBLIC)
    if not public and not _eq_word(src, k, k + 6, _W_SYSTEM):
        return 2
    j = k + 6
    if j >= end or not _ws(src[j]):
        return 2
    while j < end and _ws(src[j]):
        j += 1
    ps = pe = ss = se = -1
    if public:
        ps, pe, j = _quoted(src, j, end)
        if ps < 0:
            return 2
        if j < end and _ws(src[j]):
            while j < end and _ws(src[j]):
                j += 1
            if j < end:
                ss, se, j = _quoted(src, j, end)
                if ss < 0:
                    return 2
    else:
        ss, se, j = _quoted(src, j, end)
        if ss < 0:
            return 2
    while j < end and _ws(src[j]):
        j += 1
    if j != end:
        return 2
    if ps >= 0 and (_matches_any(src, ps, pe, _QPE_DATA, _QPE_OFFS, True)
                    or _matches_any(src, ps, pe, _QPP_DATA, _QPP_OFFS, False)
                    or (ss < 0 and _matches_any(src, ps, pe, _QPN_DATA, _QPN_OFFS, False))):
        return 1
    if ss >= 0 and _matches_any(src, ss, se, _QSE_DATA, _QSE_OFFS, True):
        return 1
    return 0


@njit(cache=True, _nrt=False)
def _has_amp(src, s, e):
    for j in range(s, e):
        if src[j] == 38:
            return True
    return False


@njit(cache=True, _nrt=False)
def _tag(src, i, n, attrs):
    """Tokenise the tag whose name starts at src[i] (after '<' or '</').

    Returns (name end, tag end (after '>'; -1 at EOF: no tag), self-closing,
    attribute value spans (s, e) of hidden, aria-hidden, style, role, href, type,
    color/face/size (any), each -1 when absent; first occurrence wins)."""
    attrs[:] = -1
    k = i
    while k < n and not _ws(src[k]) and src[k] != 47 and src[k] != 62:
        k += 1
    ne = k
    selfclose = False
    while k < n:
        c = src[k]
        if _ws(c):
            k += 1
            continue
        if c == 62:
            return ne, k + 1, selfclose
        if c == 47:
            k += 1
            if k < n and src[k] == 62:
                return ne, k + 1, True
            continue
        an = k
        k += 1  # the first character may be '='
        while k < n and not _ws(src[k]) and src[k] != 47 and src[k] != 62 and src[k] != 61:
            k += 1
        ae = k
        while k < n and _ws(src[k]):
            k += 1
        vs = ve = -2
        if k < n and src[k] == 61:
            k += 1
            while k < n and _ws(src[k]):
                k += 1
            if k < n and (src[k] == 34 or src[k] == 39):
                q = src[k]
                vs = k + 1
                k = vs
                while k < n and src[k] != q:
                    k += 1
                if k >= n:
                    return ne, -1, False
                ve = k
                k += 1
            elif k < n and src[k] == 62:
                vs = ve = k
            else:
                vs = k
                while k < n and not _ws(src[k]) and src[k] != 62:
                    k += 1
                ve = k
        if vs == -2:
            vs = ve = ae
        slot = -1
        ln = ae - an
        if ln == 6 and _eq_word(src, an, ae, _W_HIDDEN):
            slot = 0
        elif ln == 11 and _eq_word(src, an, ae, _W_ARIA):
            slot = 1
        elif ln == 5 and _eq_word(src, an, ae, _W_STYLE):
            slot = 2
        elif ln == 4 and _eq_word(src, an, ae, _W_ROLE):
            slot = 3
        elif ln == 4 and _eq_word(src, an, ae, _W_HREF):
            slot = 4
        elif ln == 4 and _eq_word(src, an, ae, _W_TYPE):
            slot = 5
        elif (ln == 5 and _eq_word(src, an, ae, _W_COLOR)) or (ln == 4 and (_eq_word(src, an, ae, _W_FACE)
                                                                             or _eq_word(src, an, ae, _W_SIZE))):
            slot = 6
        if slot >= 0 and attrs[2 * slot] == -1:
            attrs[2 * slot] = vs
            attrs[2 * slot + 1] = ve
    return ne, -1, False


_W_HIDDEN = np.frombuffer(b"hidden", dtype=np.uint8).copy()
_W_ARIA = np.frombuffer(b"aria-hidden", dtype=np.uint8).copy()
_W_STYLE = np.frombuffer(b"style", dtype=np.uint8).copy()
_W_ROLE = np.frombuffer(b"role", dtype=np.uint8).copy()
_W_HREF = np.frombuffer(b"href", dtype=np.uint8).copy()
_W_TYPE = np.frombuffer(b"type", dtype=np.uint8).copy()
_W_COLOR = np.frombuffer(b"color", dtype=np.uint8).copy()
_W_FACE = np.frombuffer(b"face", dtype=np.uint8).copy()
_W_SIZE = np.frombuffer(b"size", dtype=np.uint8).copy()
_W_TRUE = np.frombuffer(b"true", dtype=np.uint8).copy()
_W_DISPLAY = np.frombuffer(b"display", dtype=np.uint8).copy()
_W_NONE = np.frombuffer(b"none", dtype=np.uint8).copy()
_W_VISIBILITY = np.frombuffer(b"visibility", dtype=np.uint8).copy()
_W_SCRIPT = np.frombuffer(b"script", dtype=np.uint8).copy()
_W_DOCTYPE = np.frombuffer(b"doctype", dtype=np.uint8).copy()
_W_HTML = np.frombuffer(b"html", dtype=np.uint8).copy()
_W_CDATA_LOWER = np.frombuffer(b"[cdata[", dtype=np.uint8).copy()
_W_PUBLIC = np.frombuffer(b"public", dtype=np.uint8).copy()
_W_SYSTEM = np.frombuffer(b"system", dtype=np.uint8).copy()


# The HTML Standard's quirks-mode DOCTYPEs (the tree's only difference the scan sees: in
# quirks mode a <table> does not close an open <p>). Limited quirks (XHTML 1.0 Transitional,
# HTML 4.01 Transitional with a system identifier) builds these trees as no quirks does.
_QUIRKS_PUBLIC_EXACT = ("-//W3O//DTD W3 HTML Strict 3.0//EN//", "-/W3C/DTD HTML 4.0 Transitional/EN", "HTML")
_QUIRKS_SYSTEM_EXACT = ("http://www.ibm.com/data/dtd/v11/ibmxhtml1-transitional.dtd",)
_QUIRKS_PUBLIC_PREFIXES = (
    "+//Silmaril//dtd html Pro v0r11 19970101//", "-//AS//DTD HTML 3.0 asWedit + extensions//",
    "-//AdvaSoft Ltd//DTD HTML 3.0 asWedit + extensions//", "-//IETF//DTD HTML 2.0 Level 1//",
    "-//IETF//DTD HTML 2.0 Level 2//", "-//IETF//DTD HTML 2.0 Strict Level 1//",
    "-//IETF//DTD HTML 2.0 Strict Level 2//", "-//IETF//DTD HTML 2.0 Strict//", "-//IETF//DTD HTML 2.0//",
    "-//IETF//DTD HTML 2.1E//", "-//IETF//DTD HTML 3.0//", "-//IETF//DTD HTML 3.2 Final//", "-//IETF//DTD HTML 3.2//",
    "-//IETF//DTD HTML 3//", "-//IETF//DTD HTML Level 0//", "-//IETF//DTD HTML Level 1//",
    "-//IETF//DTD HTML Level 2//", "-//IETF//DTD HTML Level 3//", "-//IETF//DTD HTML Strict Level 0//",
    "-//IETF//DTD HTML Strict Level 1//", "-//IETF//DTD HTML Strict Level 2//", "-//IETF//DTD HTML Strict Level 3//",
    "-//IETF//DTD HTML Strict//", "-//IETF//DTD HTML//", "-//Metrius//DTD Metrius Presentational//",
    "-//Microsoft//DTD Internet Explorer 2.0 HTML Strict//", "-//Microsoft//DTD Internet Explorer 2.0 HTML//",
    "-//Microsoft//DTD Internet Explorer 2.0 Tables//", "-//Microsoft//DTD Internet Explorer 3.0 HTML Strict//",
    "-//Microsoft//DTD Internet Explorer 3.0 HTML//", "-//Microsoft//DTD Internet Explorer 3.0 Tables//",
    "-//Netscape Comm. Corp.//DTD HTML//", "-//Netscape Comm. Corp.//DTD Strict HTML//",
    "-//O'Reilly and Associates//DTD HTML 2.0//", "-//O'Reilly and Associates//DTD HTML Extended 1.0//",
    "-//O'Reilly and Associates//DTD HTML Extended Relaxed 1.0//",
    "-//SQ//DTD HTML 2.0 HoTMetaL + extensions//",
    "-//SoftQuad Software//DTD HoTMetaL PRO 6.0::19990601::extensions to HTML 4.0//",
    "-//SoftQuad//DTD HoTMetaL PRO 4.0::19971010::extensions to HTML 4.0//", "-//Spyglass//DTD HTML 2.0 Extended//",
    "-//Sun Microsystems Corp.//DTD HotJava HTML//", "-//Sun Microsystems Corp.//DTD HotJava Strict HTML//",
    "-//W3C//DTD HTML 3 1995-03-24//", "-//W3C//DTD HTML 3.2 Draft//", "-//W3C//DTD HTML 3.2 Final//",
    "-//W3C//DTD HTML 3.2//", "-//W3C//DTD HTML 3.2S Draft//", "-//W3C//DTD HTML 4.0 Frameset//",
    "-//W3C//DTD HTML 4.0 Transitional//", "-//W3C//DTD HTML Experimental 19960712//",
    "-//W3C//DTD HTML Experimental 970421//", "-//W3C//DTD W3 HTML//", "-//W3O//DTD W3 HTML 3.0//",
    "-//WebTechs//DTD Mozilla HTML 2.0//", "-//WebTechs//DTD Mozilla HTML//",
)
_QUIRKS_PREFIXES_WITHOUT_SYSTEM = ("-//W3C//DTD HTML 4.01 Frameset//", "-//W3C//DTD HTML 4.01 Transitional//")


def _words(words: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(lowercased bytes of the words, one after another; offsets, n + 1)."""
    data = [w.lower().encode("ascii") for w in words]
    return (np.frombuffer(b"".join(data), dtype=np.uint8).copy(),
            np.cumsum([0] + [len(d) for d in data]).astype(np.int64))


_QPE_DATA, _QPE_OFFS = _words(_QUIRKS_PUBLIC_EXACT)
_QSE_DATA, _QSE_OFFS = _words(_QUIRKS_SYSTEM_EXACT)
_QPP_DATA, _QPP_OFFS = _words(_QUIRKS_PUBLIC_PREFIXES)
_QPN_DATA, _QPN_OFFS = _words(_QUIRKS_PREFIXES_WITHOUT_SYSTEM)


@njit(cache=True, _nrt=False)
def _skip_comment(src, i, n):
    """End (after the comment) of the comment whose '<!--' is at i."""
    k = i + 4
    if k < n and src[k] == 62:  # <!-->
        return k + 1
    if k + 1 < n and src[k] == 45 and src[k + 1] == 62:  # <!--->
        return k + 2
    while k < n:
        if src[k] == 45 and k + 2 < n and src[k + 1] == 45:
            if src[k + 2] == 62:
                return k + 3
            if src[k + 2] == 33 and k + 3 < n and src[k + 3] == 62:  # --!>
                return k + 4
        k += 1
    return n


@njit(cache=True, _nrt=False)
def _skip_to_gt(src, i, n):
    while i < n and src[i] != 62:
        i += 1
    return i + 1


@njit(cache=True, _nrt=False)
def _attr_hidden(src, attrs):
    """(hidden by its attributes, -1 when an attribute of interest holds a character reference)."""
    hidden = attrs[0] != -1
    s, e = attrs[2], attrs[3]
    if s != -1:
        if _has_amp(src, s, e):
            return -1
        while s < e and (src[s] == 32 or 9 <= src[s] <= 13):
            s += 1
        while e > s and (src[e - 1] == 32 or 9 <= src[e - 1] <= 13):
            e -= 1
        if _eq_word(src, s, e, _W_TRUE):
            hidden = True
    s, e = attrs[4], attrs[5]
    if s != -1:
        if _has_amp(src, s, e):
            return -1
        if _has_word_then(src, s, e, _W_DISPLAY, _W_NONE) or _has_word_then(src, s, e, _W_VISIBILITY, _W_HIDDEN):
            hidden = True
    return 1 if hidden else 0


@njit(cache=True, _nrt=False)
def _script_end(src, i, n):
    """Start of the end tag of the script whose text starts at i (n: none);
    -1 where the script's text escapes (``<!--`` then ``<script``), whose
    end the Standard finds with more states than modelled here."""
    e = _script_close(src, i, n)
    k = _find_seq(src, i, e, 60, 33, 45)
    while k < e:
        if k + 3 < e and src[k + 3] == 45:
            j = k + 4
            while j + 7 < e:
                if src[j] == 60 and _eq_word(src, j + 1, j + 7, _W_SCRIPT) and (_ws(src[j + 7]) or src[j + 7] == 47
                                                                               or src[j + 7] == 62):
                    return -1
                j += 1
            return e
        k = _find_seq(src, k + 1, e, 60, 33, 45)
    return e


@njit(cache=True, _nrt=False)
def _script_close(src, i, n):
    """Start of ``</script`` + (white space, '/' or '>') at or after i, else n."""
    while i + 8 < n:
        if src[i] == 60 and src[i + 1] == 47 and _eq_word(src, i + 2, i + 8, _W_SCRIPT):
            c = src[i + 8]
            if _ws(c) or c == 47 or c == 62:
                return i
        i += 1
    return n


@njit(cache=True, _nrt=False)
def _skip_foreign(src, i, n, rs, re_, has_title, id_names, id_offs, id_vals, id_first, attrs, F):
    """End (after its end tag) of the <svg> or <math> whose content starts at
    i, its name at src[rs:re_]; -1 where HTML would break out of it or start
    inside it (not modelled)."""
    cap = F.shape[0]  # F: scratch, one row per open foreign element: name start, name end, integration point
    svg = _lookup(src, rs, re_, id_names, id_offs, id_vals, id_first) == T_SVG
    F[0, 0] = rs
    F[0, 1] = re_
    F[0, 2] = 0
    depth = 1
    k = i
    while k < n:
        if src[k] != 60 or k + 1 >= n:
            k += 1
            continue
        c1 = src[k + 1]
        if c1 == 33:
            if k + 3 < n and src[k + 2] == 45 and src[k + 3] == 45:
                k = _skip_comment(src, k, n)
            elif k + 9 <= n and src[k + 2] == 91 and _eq_word(src, k + 2, k + 9, _W_CDATA_LOWER):
                k = _find_seq(src, k + 9, n, 93, 93, 62) + 3
            else:
                k = _skip_to_gt(src, k + 2, n)
            continue
        if c1 == 63:
            k = _skip_to_gt(src, k + 2, n)
            continue
        if c1 == 47:
            if k + 2 < n and _alpha(src[k + 2]):
                ne, te, sc = _tag(src, k + 2, n, attrs)
                if te < 0:
                    return n
                tid = _lookup(src, k + 2, ne, id_names, id_offs, id_vals, id_first)
                if tid == T_BR or tid == T_P:
                    return -1
                d = depth - 1
                while d >= 0 and not _same_name(src, F[d, 0], F[d, 1], k + 2, ne):
                    d -= 1
                if d < 0:
                    return -1
                depth = d
                if depth == 0:
                    return te
                k = te
            elif k + 2 < n and src[k + 2] == 62:
                k += 3
            else:
                k = _skip_to_gt(src, k + 2, n)
            continue
        if not _alpha(c1):
            k += 1
            continue
        ne, te, sc = _tag(src, k + 1, n, attrs)
        if te < 0:
            return n
        if F[depth - 1, 2]:
            return -1  # HTML inside an integration point
        tid = _lookup(src, k + 1, ne, id_names, id_offs, id_vals, id_first)
        if (PROPS[tid] & BREAKOUT) != 0 or (tid == T_FONT and attrs[12] >= 0):
            return -1
        if tid == T_TITLE and not has_title:
            return -1  # the document's first <title> would be this one
        if not sc:
            if depth == cap:
                return -1
            F[depth, 0] = k + 1
            F[depth, 1] = ne
            F[depth, 2] = (PROPS[tid] & (SVG_IP if svg else MATH_IP)) != 0
            depth += 1
        k = te
    return n


# ------------------------------------------------------------------ kernel
# insertion modes, as the stack implies them
M_BODY, M_CELL, M_ROW, M_TBODY, M_TABLE, M_SELECT, M_TEMPLATE = range(7)


@njit(cache=True, inline="always", _nrt=False)
def _end_block(src, S, AF, g, st, rows, furniture):
    # html_scan._end_block, on rows preallocated for every block the page can have
    if st[_HAS]:
        nb = st[_BLOCKS]
        start, end = st[_START], st[_CP]
        length = end - start
        rows[nb, ROW_START] = start
        rows[nb, ROW_END] = end
        rows[nb, ROW_FURNITURE] = furniture
        rows[nb, ROW_LINK] = min(length, (st[_LINK] * length) // st[_RAW]) if st[_RAW] else 0
        rows[nb, ROW_WORDS] = st[_SPACES] + 1
        rows[nb, ROW_HAN] = st[_HAN]
        st[_BLOCKS] = nb + 1
    st[_HAS] = 0
    st[_PENDING] = 0
    st[_RAW] = 0
    st[_LINK] = 0
    st[_SPACES] = 0
    st[_HAN] = 0

@njit(cache=True, inline="always", _nrt=False)
def _ctx_furn(src, S, AF, g, st, rows):
    return S[g[0] - 1, 5] != 0 if g[0] > 0 else False

@njit(cache=True, inline="always", _nrt=False)
def _ctx_link(src, S, AF, g, st, rows):
    return S[g[0] - 1, 6] != 0 if g[0] > 0 else False

@njit(cache=True, inline="always", _nrt=False)
def _ctx_hide(src, S, AF, g, st, rows):
    return S[g[0] - 1, 7] != 0 if g[0] > 0 else False

@njit(cache=True, inline="always", _nrt=False)
def _bail(src, S, AF, g, st, rows, code):
    if g[2] == 0:
        g[2] = code

@njit(cache=True, _nrt=False)
def _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, has_href, push):
    """html_scan's start tag: the block it starts, then (unless void) the element pushed."""
    furn, link, hide = _ctx_furn(src, S, AF, g, st, rows), _ctx_link(src, S, AF, g, st, rows), _ctx_hide(src, S, AF, g, st, rows)
    new_hide = hide or hidden or (flags & (DROPPED | RAW_DROPPED)) != 0
    is_block = False
    new_furn = furn
    if not new_hide:
        is_block = (flags & BLOCK) != 0
        if not furn and ((flags & FURNITURE) != 0 or role_furn):
            new_furn = True
            is_block = True
        if is_block:
            _end_block(src, S, AF, g, st, rows, furn)
    new_link = link or ((flags & ANCHOR) != 0 and has_href)
    if not push:
        return
    d = g[0]
    if d >= MAX_STACK:
        _bail(src, S, AF, g, st, rows, BAIL_DEPTH)
        return
    S[d, 0] = tid
    S[d, 1] = ns
    S[d, 2] = ne
    S[d, 3] = -1
    S[d, 4] = is_block
    S[d, 5] = new_furn
    S[d, 6] = new_link
    S[d, 7] = new_hide
    # the element's own state, from its attributes (a clone made by reconstruction has the same)
    S[d, 8] = (STATE_HIDDEN if hidden else 0) | (STATE_FURNITURE if role_furn else 0) \
        | (STATE_LINK if (flags & ANCHOR) != 0 and has_href else 0)
    g[0] = d + 1

@njit(cache=True, _nrt=False)
def _clear_to_marker(src, S, AF, g, st, rows):
    k = g[1]
    while k > 0:
        k -= 1
        if AF[k, 2]:
            break
    g[1] = k

@njit(cache=True, _nrt=False)
def _pop(src, S, AF, g, st, rows, explicit):
    d = g[0] - 1
    if d < 0:
        return
    if S[d, 4]:
        _end_block(src, S, AF, g, st, rows, S[d, 5])
    a = S[d, 3]
    if a >= 0 and a < g[1]:
        AF[a, 1] = -1  # (its state stays in the entry, for a clone)
    tid = S[d, 0]
    if tid == T_TD or tid == T_TH:
        _clear_to_marker(src, S, AF, g, st, rows)
    elif tid == T_APPLET or tid == T_MARQUEE or tid == T_OBJECT or tid == T_CAPTION:
        if not explicit:
            _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
        _clear_to_marker(src, S, AF, g, st, rows)
    g[0] = d

@njit(cache=True, _nrt=False)
def _is_boundary(src, S, AF, g, st, rows, tid, kind):
    # kind 0: default scope, 1: button scope, 2: list item scope, 3: table scope
    if kind == 3:
        return tid == T_HTML or tid == T_TABLE or tid == T_TEMPLATE
    if (PROPS[tid] & SCOPE) != 0:
        return True
    if kind == 1:
        return tid == T_BUTTON
    if kind == 2:
        return tid == T_OL or tid == T_UL
    return False

@njit(cache=True, _nrt=False)
def _in_scope(src, S, AF, g, st, rows, tid, kind):
    d = g[0] - 1
    while d >= 0:
        x = S[d, 0]
        if x == tid or (tid < 0 and (PROPS[x] & HEADING) != 0):
            return True
        if _is_boundary(src, S, AF, g, st, rows, x, kind):
            return False
        d -= 1
    return False

@njit(cache=True, _nrt=False)
def _generate_implied(src, S, AF, g, st, rows, except_tid):
    while g[0] > 0 and g[2] == 0:
        x = S[g[0] - 1, 0]
        if (PROPS[x] & IMPLIED) == 0 or x == except_tid:
            break
        _pop(src, S, AF, g, st, rows, False)

@njit(cache=True, _nrt=False)
def _pop_until(src, S, AF, g, st, rows, tid):
    # pop until an element tid (tid < 0: any heading) has been popped
    while g[0] > 0 and g[2] == 0:
        x = S[g[0] - 1, 0]
        hit = x == tid or (tid < 0 and (PROPS[x] & HEADING) != 0)
        _pop(src, S, AF, g, st, rows, hit)
        if hit:
            break

@njit(cache=True, _nrt=False)
def _close_p(src, S, AF, g, st, rows):
    _generate_implied(src, S, AF, g, st, rows, T_P)
    _pop_until(src, S, AF, g, st, rows, T_P)

@njit(cache=True, _nrt=False)
def _mode(src, S, AF, g, st, rows):
    d = g[0] - 1
    while d >= 0:
        x = S[d, 0]
        if x == T_TD or x == T_TH:
            return M_CELL
        if x == T_TR:
            return M_ROW
        if x == T_TBODY or x == T_THEAD or x == T_TFOOT:
            return M_TBODY
        if x == T_TABLE:
            return M_TABLE
        if x == T_SELECT:
            return M_SELECT
        if x == T_TEMPLATE:
            return M_TEMPLATE
        d -= 1
    return M_BODY

@njit(cache=True, _nrt=False)
def _clear_to(src, S, AF, g, st, rows, kind):
    # clear the stack back to a table (0), table body (1) or row (2) context
    while g[0] > 0 and g[2] == 0:
        x = S[g[0] - 1, 0]
        if x == T_TABLE or x == T_TEMPLATE or x == T_HTML:
            break
        if kind >= 1 and (x == T_TBODY or x == T_THEAD or x == T_TFOOT):
            break
        if kind == 2 and x == T_TR:
            break
        _pop(src, S, AF, g, st, rows, False)

@njit(cache=True, _nrt=False)
def _af_push(src, S, AF, g, st, rows, tid, ns, ne):
    # Noah's ark: a fourth identical entry would drop the first; not modelled
    same = 0
    k = g[1] - 1
    while k >= 0 and not AF[k, 2]:
        if AF[k, 0] == tid:
            same += 1
        k -= 1
    if same >= 3:
        _bail(src, S, AF, g, st, rows, BAIL_NOAH)
        return
    k = g[1]
    if k >= AF.shape[0] - 1:  # (markers and entries of nested cells can outnumber the stack)
        _bail(src, S, AF, g, st, rows, BAIL_DEPTH)
        return
    AF[k, 0] = tid
    AF[k, 1] = g[0] - 1
    AF[k, 2] = False
    AF[k, 3] = S[g[0] - 1, 8]
    S[g[0] - 1, 3] = k
    g[1] = k + 1

@njit(cache=True, _nrt=False)
def _af_marker_push(src, S, AF, g, st, rows):
    k = g[1]
    if k >= AF.shape[0] - 1:
        _bail(src, S, AF, g, st, rows, BAIL_DEPTH)
        return
    AF[k, 2] = True
    AF[k, 1] = -1
    AF[k, 0] = 0
    AF[k, 3] = 0
    g[1] = k + 1

@njit(cache=True, _nrt=False)
def _af_remove(src, S, AF, g, st, rows, j):
    for k in range(j, g[1] - 1):
        AF[k, 0] = AF[k + 1, 0]
        AF[k, 1] = AF[k + 1, 1]
        AF[k, 2] = AF[k + 1, 2]
        AF[k, 3] = AF[k + 1, 3]
    g[1] -= 1
    for d in range(g[0]):
        if S[d, 3] == j:
            S[d, 3] = -1
        elif S[d, 3] > j:
            S[d, 3] -= 1

@njit(cache=True, _nrt=False)
def _reconstruct(src, S, AF, g, st, rows):
    k = g[1]
    if k == 0 or AF[k - 1, 2] or AF[k - 1, 1] >= 0:
        return
    i = k - 1
    while i > 0 and not AF[i - 1, 2] and AF[i - 1, 1] < 0:
        i -= 1
    for j in range(i, k):
        tid = AF[j, 0]
        # a clone, with the attributes of the element the entry was made for: its state
        state = AF[j, 3]
        _open_element(src, S, AF, g, st, rows, tid, 0, 0, ANCHOR if tid == T_A else 0, (state & STATE_HIDDEN) != 0,
                      (state & STATE_FURNITURE) != 0, (state & STATE_LINK) != 0, True)
        if g[2]:
            return
        AF[j, 1] = g[0] - 1
        S[g[0] - 1, 3] = j

@njit(cache=True, _nrt=False)
def _state_to_reconstruct(src, S, AF, g, st, rows):
    """True when an entry ``_reconstruct`` would clone has state."""
    k = g[1] - 1
    while k >= 0 and not AF[k, 2] and AF[k, 1] < 0:
        if AF[k, 3] != 0:
            return True
        k -= 1
    return False

@njit(cache=True, _nrt=False)
def _last_af(src, S, AF, g, st, rows, tid):
    k = g[1] - 1
    while k >= 0 and not AF[k, 2]:
        if AF[k, 0] == tid:
            return k
        k -= 1
    return -1

@njit(cache=True, _nrt=False)
def _adoption(src, S, AF, g, st, rows, tid):
    """The adoption agency algorithm for the end tag of formatting element
    ``tid``; returns False when the token is handled as any other end tag.
    Where a furthest block exists, only the case that moves no element with
    state is modelled (``_adopt_block``)."""
    for outer in range(8):
        j = _last_af(src, S, AF, g, st, rows, tid)
        if j < 0:
            return outer > 0
        p = AF[j, 1]
        if p < 0:
            _af_remove(src, S, AF, g, st, rows, j)
            return True
        d = g[0] - 1
        while d > p:
            if _is_boundary(src, S, AF, g, st, rows, S[d, 0], 0):
                return True  # not in scope: ignored
            d -= 1
        fb = -1
        for q in range(p + 1, g[0]):
            if (PROPS[S[q, 0]] & SPECIAL) != 0:
                fb = q
                break
        if fb < 0:
            while g[0] - 1 > p and g[2] == 0:
                _pop(src, S, AF, g, st, rows, False)
            _pop(src, S, AF, g, st, rows, True)
            _af_remove(src, S, AF, g, st, rows, j)
            return True
        if not _adopt_block(src, S, AF, g, st, rows, p, fb, j):
            _bail(src, S, AF, g, st, rows, BAIL_ADOPTION)
            return True
    return True


@njit(cache=True, _nrt=False)
def _adopt_block(src, S, AF, g, st, rows, p, fb, j):
    """One round of the adoption agency with a furthest block ``fb`` over the
    formatting element at stack place ``p`` (list entry ``j``): the block moves
    out of the formatting element, which is cloned inside it. Changes no text
    order and no block, so for the scan it is a rearrangement of the stack and
    of the list: the elements between lose their non-formatting members, the
    clone goes right above the block. A formatting element that is a link
    (``<a href>``, nothing else in its state) takes the link away from what
    moves out of it (the block and the clones between), and its clone makes
    the block's content a link again. False (not done) when another element
    with state would move, or the inner loop would drop entries (past 3 nodes)."""
    fe_state = S[p, 8]
    if (fe_state != 0 and (fe_state != STATE_LINK or p == 0)) or fb - p - 1 > 2:
        return False
    for q in range(p + 1, fb):
        if S[q, 8] != 0 or S[q, 4] != 0:
            return False
    near = -1  # the formatting element nearest the block: the clone's entry goes after its own
    for q in range(fb - 1, p, -1):
        if S[q, 3] >= 0:
            near = q
            break
    fe_id, fe_ns, fe_ne = S[p, 0], S[p, 1], S[p, 2]
    _af_remove(src, S, AF, g, st, rows, j)
    k = S[near, 3] + 1 if near >= 0 else j
    for x in range(g[1], k, -1):
        AF[x, 0] = AF[x - 1, 0]
        AF[x, 1] = AF[x - 1, 1]
        AF[x, 2] = AF[x - 1, 2]
        AF[x, 3] = AF[x - 1, 3]
    g[1] += 1
    for d in range(g[0]):
        if S[d, 3] >= k:
            S[d, 3] += 1
    AF[k, 0] = fe_id
    AF[k, 2] = 0
    AF[k, 3] = fe_state
    outside_link = S[p - 1, 6] if p > 0 else 0  # the link context of the common ancestor
    w = p
    for q in range(p + 1, fb + 1):
        if q == fb or S[q, 3] >= 0:
            for c in range(9):
                S[w, c] = S[q, c]
            if fe_state != 0:  # out of the link (they have no state of their own)
                S[w, 6] = outside_link
            w += 1
    top = g[0]
    for q in range(fb + 1, top):
        for c in range(9):
            S[q + w - fb, c] = S[q, c]
    S[w, 0] = fe_id
    S[w, 1] = fe_ns
    S[w, 2] = fe_ne
    S[w, 3] = k
    S[w, 4] = 0
    S[w, 5] = S[w - 1, 5]
    S[w, 6] = 1 if fe_state != 0 else S[w - 1, 6]
    S[w, 7] = S[w - 1, 7]
    S[w, 8] = fe_state
    g[0] = top + w - fb
    for x in range(g[1]):
        AF[x, 1] = -1
    for d in range(g[0]):
        if S[d, 3] >= 0:
            AF[S[d, 3], 1] = d
    return True


@njit(cache=True, _nrt=False)
def _any_other_end(src, S, AF, g, st, rows, ns, ne, tid):
    d = g[0] - 1
    while d >= 0:
        x = S[d, 0]
        if (tid != 0 and x == tid) or (tid == 0 and x == 0 and _same_name(src, S[d, 1], S[d, 2], ns, ne)):
            _generate_implied(src, S, AF, g, st, rows, x)
            while g[0] - 1 > d and g[2] == 0:
                _pop(src, S, AF, g, st, rows, False)
            _pop(src, S, AF, g, st, rows, True)
            return
        if (PROPS[x] & SPECIAL) != 0:
            return
        d -= 1


@njit(cache=True, _nrt=False)
def scan(src, flags_by_id, role_names, role_offs, role_vals, role_first, id_names, id_offs, id_vals,
         id_first, ebuf, eoffs, eslots, ecps, cp1252, out, title, rows, st, g, S, AF, attrs, F):
    """Tokenise UTF-8 HTML ``src`` (uint8) and scan it as ``html_scan.scan``
    scans lexbor's serialisation of it. ``flags_by_id``: ``html_scan``'s tag
    flags of each tag id (``_flags_by_id``); ``role_*``: ``text``'s role table; ``props``/``ids``: ``_tag_props()``,
    ``_ids()``; ``ebuf..ecps``: ``_entity_table()``; ``cp1252``: ``_cp1252_table()``.

    Returns (bail, n_out, n_rows, n_title, nfkc): ``bail`` 0 when the
    result is lexbor's (then out[:n_out] and rows[:n_rows] are ``html_scan.scan``'s,
    title[:n_title] the first <title>'s text, n_title -1 when there is
    none, and nfkc the largest ``nfkc.QUICK_CHECK`` value of the text's
    characters, 0 for ASCII), else the bail code of the first construct not modelled.
    """
    n = src.shape[0]
    # g: scalars the helpers update. 0 depth, 1 active formatting entries,
    # 2 bail, 3 title length (-1: none yet), 4 form pointer set
    g[:] = 0
    g[3] = -1
    st[:] = 0

    quirks = 1  # no DOCTYPE: quirks mode
    seen = False  # a token other than a comment or DOCTYPE went by
    in_body = False
    skip_lf = False
    i = 0
    while i < n and g[2] == 0:
        c = src[i]
        if skip_lf:
            skip_lf = False
            if c == 10:
                i += 1
                continue
            if c == 13:
                i += 2 if i + 1 < n and src[i + 1] == 10 else 1
                continue
        # ---------------------------------------------------------- text
        literal_lt = False
        if c == 60 and i + 1 < n:
            c1 = src[i + 1]
            literal_lt = not (_alpha(c1) or c1 == 33 or c1 == 47 or c1 == 63)
            if c1 == 47 and not (i + 2 < n and (_alpha(src[i + 2]) or src[i + 2] == 62)):
                # "</" then neither a letter nor '>': a bogus comment, or text at EOF
                literal_lt = i + 2 >= n
                if not literal_lt:
                    i = _skip_to_gt(src, i + 2, n)
                    continue
        elif c == 60:
            literal_lt = True
        if c != 60 or literal_lt:
            if not in_body:
                if _ws(c):
                    i += 1
                    continue
                seen = True
                in_body = True
                _open_element(src, S, AF, g, st, rows, T_BODY, 0, 0, BLOCK, False, False, False, True)
                continue
            m = _mode(src, S, AF, g, st, rows)
            if m == M_SELECT or m == M_TEMPLATE:
                i += 1 if literal_lt else 0
                while i < n and src[i] != 60:
                    i += 1
                continue
            if m == M_TABLE or m == M_TBODY or m == M_ROW:
                # white space stays in the table; other text is foster parented
                k = i + 1 if literal_lt else i
                while k < n and src[k] != 60 and _ws(src[k]):
                    k += 1
                if literal_lt or (k < n and src[k] != 60):
                    _bail(src, S, AF, g, st, rows, BAIL_FOSTER)
                    break
                if not _ctx_hide(src, S, AF, g, st, rows):
                    _text_run(out, st, _ctx_link(src, S, AF, g, st, rows), src, i, k, True, True, ebuf, eoffs, eslots, ecps, cp1252)
                i = k
                continue
            _reconstruct(src, S, AF, g, st, rows)
            if _ctx_hide(src, S, AF, g, st, rows):
                i += 1 if literal_lt else 0
                while i < n and src[i] != 60:
                    i += 1
                continue
            if literal_lt:
                _emit_cp(out, st, _ctx_link(src, S, AF, g, st, rows), 60)
                i += 1
                continue
            k = _text_run(out, st, _ctx_link(src, S, AF, g, st, rows), src, i, n, True, True, ebuf, eoffs, eslots, ecps, cp1252)
            if k < 0:
                _bail(src, S, AF, g, st, rows, BAIL_UTF8)
                break
            i = k
            continue
        # ---------------------------------------------------------- markup
        c1 = src[i + 1]
        if c1 == 33:  # <!
            if i + 3 < n and src[i + 2] == 45 and src[i + 3] == 45:
                i = _skip_comment(src, i, n)
                continue
            if not seen and i + 9 <= n and _eq_word(src, i + 2, i + 9, _W_DOCTYPE):
                e = _skip_to_gt(src, i + 9, n)
                k = i + 9
                while k < e - 1 and _ws(src[k]):
                    k += 1
                k0 = k
                while k < e - 1 and not _ws(src[k]):
                    k += 1
                if not _eq_word(src, k0, k, _W_HTML):
                    quirks = 1
                else:
                    while k < e - 1 and _ws(src[k]):
                        k += 1
                    quirks = 0 if k >= e - 1 else _doctype_quirks(src, k, e - 1)
                seen = True
                i = e
                continue
            i = _skip_to_gt(src, i + 2, n)
            continue
        if c1 == 63:  # <? bogus comment
            i = _skip_to_gt(src, i + 2, n)
            continue
        end = c1 == 47
        ns = i + 2 if end else i + 1
        if end and src[ns] == 62:  # </>
            i = ns + 1
            continue
        ne, te, selfclose = _tag(src, ns, n, attrs)
        if te < 0:  # EOF in a tag: no token
            break
        tid = _lookup(src, ns, ne, id_names, id_offs, id_vals, id_first)
        i = te
        seen = True
        # ---------------------------------------------------- before <body>
        if not in_body:
            if end:
                if tid == T_BODY or tid == T_HTML or tid == T_BR:
                    in_body = True
                    _open_element(src, S, AF, g, st, rows, T_BODY, 0, 0, BLOCK, False, False, False, True)
                    i = ns - 2
                continue  # other end tags (</head>) change nothing we keep
            if tid == T_HTML or tid == T_HEAD:
                continue
            if tid == T_FRAMESET or tid == T_TEMPLATE:
                _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                break
            if (PROPS[tid] & HEAD_OK) != 0:
                if tid == T_TITLE:
                    e = _raw_end(src, i, n, ns, ne)
                    if g[3] < 0:
                        g[3] = _title_run(title, 0, src, i, e, ebuf, eoffs, eslots, ecps, cp1252)
                        if g[3] < 0:
                            _bail(src, S, AF, g, st, rows, BAIL_UTF8)
                            break
                    i = e
                elif tid == T_SCRIPT:
                    i = _script_end(src, i, n)
                    if i < 0:
                        _bail(src, S, AF, g, st, rows, BAIL_SCRIPT_ESCAPE)
                        break
                elif tid == T_STYLE or tid == T_NOSCRIPT or tid == T_NOFRAMES:
                    i = _raw_end(src, i, n, ns, ne)
                continue
            in_body = True
            if tid == T_BODY:
                hid = _attr_hidden(src, attrs)
                if hid < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_ATTR_REF)
                    break
                rf = attrs[6] >= 0 and _lookup(src, attrs[6], attrs[7], role_names, role_offs, role_vals,
                                               role_first) != 0
                if attrs[6] >= 0 and _has_amp(src, attrs[6], attrs[7]):
                    _bail(src, S, AF, g, st, rows, BAIL_ATTR_REF)
                    break
                _open_element(src, S, AF, g, st, rows, T_BODY, ns, ne, BLOCK, hid == 1, rf, False, True)
                continue
            _open_element(src, S, AF, g, st, rows, T_BODY, 0, 0, BLOCK, False, False, False, True)
            i = ns - 1  # the tag again, in the body
            continue
        # ---------------------------------------------------- in the body
        m = _mode(src, S, AF, g, st, rows)
        if m == M_TEMPLATE:
            _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
            break
        if end:
            if m == M_SELECT:
                if tid == T_SELECT:
                    _pop_until(src, S, AF, g, st, rows, T_SELECT)
                elif tid == T_OPTION and S[g[0] - 1, 0] == T_OPTION:
                    _pop(src, S, AF, g, st, rows, True)
                elif tid == T_OPTGROUP:
                    if S[g[0] - 1, 0] == T_OPTION and g[0] > 1 and S[g[0] - 2, 0] == T_OPTGROUP:
                        _pop(src, S, AF, g, st, rows, True)
                    if S[g[0] - 1, 0] == T_OPTGROUP:
                        _pop(src, S, AF, g, st, rows, True)
                continue
            if tid == T_TABLE or tid == T_TBODY or tid == T_THEAD or tid == T_TFOOT or tid == T_TR \
                    or tid == T_TD or tid == T_TH:
                if _in_scope(src, S, AF, g, st, rows, tid, 3):
                    if tid == T_TD or tid == T_TH:
                        _generate_implied(src, S, AF, g, st, rows, 0)
                    _pop_until(src, S, AF, g, st, rows, tid)
                continue
            if tid == T_BODY or tid == T_HTML or tid == T_CAPTION or tid == T_COL or tid == T_COLGROUP \
                    or tid == T_HEAD or tid == T_FRAMESET:
                continue
            table_ctx = m == M_TABLE or m == M_TBODY or m == M_ROW
            if tid == T_P:
                if not _in_scope(src, S, AF, g, st, rows, T_P, 1):
                    if table_ctx:
                        _bail(src, S, AF, g, st, rows, BAIL_FOSTER)
                        break
                    _open_element(src, S, AF, g, st, rows, T_P, 0, 0, BLOCK, False, False, False, True)
                _close_p(src, S, AF, g, st, rows)
                continue
            if tid == T_BR:
                if table_ctx:
                    _bail(src, S, AF, g, st, rows, BAIL_FOSTER)
                    break
                _reconstruct(src, S, AF, g, st, rows)
                _open_element(src, S, AF, g, st, rows, T_BR, 0, 0, BLOCK | VOID, False, False, False, False)
                continue
            if tid == T_FORM:
                if g[4] == 0:
                    continue
                g[4] = 0
                if not _in_scope(src, S, AF, g, st, rows, T_FORM, 0):
                    continue
                _generate_implied(src, S, AF, g, st, rows, 0)
                if S[g[0] - 1, 0] != T_FORM:
                    _bail(src, S, AF, g, st, rows, BAIL_FORM)
                    break
                _pop(src, S, AF, g, st, rows, True)
                continue
            if tid == T_LI:
                if _in_scope(src, S, AF, g, st, rows, T_LI, 2):
                    _generate_implied(src, S, AF, g, st, rows, T_LI)
                    _pop_until(src, S, AF, g, st, rows, T_LI)
                continue
            if tid == T_DD or tid == T_DT:
                if _in_scope(src, S, AF, g, st, rows, tid, 0):
                    _generate_implied(src, S, AF, g, st, rows, tid)
                    _pop_until(src, S, AF, g, st, rows, tid)
                continue
            if (PROPS[tid] & HEADING) != 0:
                if _in_scope(src, S, AF, g, st, rows, -1, 0):
                    _generate_implied(src, S, AF, g, st, rows, 0)
                    _pop_until(src, S, AF, g, st, rows, -1)
                continue
            if tid == T_TEMPLATE:
                _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                break
            if (PROPS[tid] & FORMATTING) != 0:
                if not _adoption(src, S, AF, g, st, rows, tid):
                    _any_other_end(src, S, AF, g, st, rows, ns, ne, tid)
                continue
            if tid != 0 and (PROPS[tid] & (CLOSES_P | SCOPE)) != 0 or tid == T_BUTTON:
                # address..ul, pre, listing, button, applet, marquee, object: pop to it when in scope
                if _in_scope(src, S, AF, g, st, rows, tid, 0):
                    _generate_implied(src, S, AF, g, st, rows, 0)
                    _pop_until(src, S, AF, g, st, rows, tid)
                continue
            _any_other_end(src, S, AF, g, st, rows, ns, ne, tid)
            continue
        # start tags
        if m == M_SELECT:
            if tid == T_OPTION:
                if S[g[0] - 1, 0] == T_OPTION:
                    _pop(src, S, AF, g, st, rows, True)
                _open_element(src, S, AF, g, st, rows, tid, ns, ne, 0, False, False, False, True)
            elif tid == T_OPTGROUP:
                if S[g[0] - 1, 0] == T_OPTION:
                    _pop(src, S, AF, g, st, rows, True)
                if S[g[0] - 1, 0] == T_OPTGROUP:
                    _pop(src, S, AF, g, st, rows, True)
                _open_element(src, S, AF, g, st, rows, tid, ns, ne, 0, False, False, False, True)
            elif tid == T_SCRIPT:
                i = _script_end(src, i, n)
                if i < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_SCRIPT_ESCAPE)
            else:
                # lexbor parses a <select>'s other content as the Standard's newer
                # customizable <select> does (elements kept, formatting reconstructed)
                _bail(src, S, AF, g, st, rows, BAIL_SELECT)
            continue
        hid = _attr_hidden(src, attrs)
        if hid < 0 or (attrs[6] >= 0 and _has_amp(src, attrs[6], attrs[7])):
            _bail(src, S, AF, g, st, rows, BAIL_ATTR_REF)
            break
        hidden = hid == 1
        role_furn = attrs[6] >= 0 and _lookup(src, attrs[6], attrs[7], role_names, role_offs, role_vals,
                                              role_first) != 0
        has_href = attrs[8] >= 0
        flags = flags_by_id[tid]
        table_ctx = m == M_TABLE or m == M_TBODY or m == M_ROW
        if tid == T_FRAMESET or tid == T_PLAINTEXT or tid == T_TEMPLATE or tid == T_CAPTION or tid == T_COLGROUP \
                or tid == T_ISINDEX:
            _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
            break
        # table structure
        if tid == T_TD or tid == T_TH or tid == T_TR or tid == T_TBODY or tid == T_THEAD or tid == T_TFOOT \
                or tid == T_COL or (tid == T_TABLE and table_ctx):
            if m == M_BODY:
                continue  # ignored outside tables
            if m == M_CELL:  # these close the cell, when there is one in table scope
                if not (_in_scope(src, S, AF, g, st, rows, T_TD, 3) or _in_scope(src, S, AF, g, st, rows, T_TH, 3)):
                    continue
                _generate_implied(src, S, AF, g, st, rows, 0)
                while g[0] > 0 and g[2] == 0:
                    x = S[g[0] - 1, 0]
                    _pop(src, S, AF, g, st, rows, x == T_TD or x == T_TH)
                    if x == T_TD or x == T_TH:
                        break
                m = _mode(src, S, AF, g, st, rows)
            if not (m == M_TABLE or m == M_TBODY or m == M_ROW) or g[2]:
                _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                break
            if tid == T_COL:
                if m != M_TABLE:
                    _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                    break
                continue  # an implied <colgroup> and a void <col>: nothing the scan sees
            if tid == T_TABLE:  # a table directly in a table closes it
                _pop_until(src, S, AF, g, st, rows, T_TABLE)
                m = _mode(src, S, AF, g, st, rows)
                if m == M_TABLE or m == M_TBODY or m == M_ROW:
                    _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                    break
                table_ctx = False  # the new table: in-body rules, below
            else:
                if tid == T_TD or tid == T_TH:
                    if m == M_TABLE:
                        _clear_to(src, S, AF, g, st, rows, 0)
                        _open_element(src, S, AF, g, st, rows, T_TBODY, 0, 0, BLOCK, False, False, False, True)
                        m = M_TBODY
                    if m == M_TBODY:
                        _clear_to(src, S, AF, g, st, rows, 1)
                        _open_element(src, S, AF, g, st, rows, T_TR, 0, 0, BLOCK, False, False, False, True)
                    _clear_to(src, S, AF, g, st, rows, 2)
                    _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
                    _af_marker_push(src, S, AF, g, st, rows)
                    continue
                if m == M_ROW:
                    _clear_to(src, S, AF, g, st, rows, 2)
                    _pop(src, S, AF, g, st, rows, True)
                    m = M_TBODY
                if tid == T_TR:
                    if m == M_TABLE:
                        _clear_to(src, S, AF, g, st, rows, 0)
                        _open_element(src, S, AF, g, st, rows, T_TBODY, 0, 0, BLOCK, False, False, False, True)
                    _clear_to(src, S, AF, g, st, rows, 1)
                    _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
                    continue
                if m == M_TBODY:
                    _clear_to(src, S, AF, g, st, rows, 1)
                    _pop(src, S, AF, g, st, rows, True)
                _clear_to(src, S, AF, g, st, rows, 0)
                _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
                continue
        if table_ctx and tid != T_TABLE:
            if tid == T_SCRIPT:
                i = _script_end(src, i, n)
                if i < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_SCRIPT_ESCAPE)
                continue
            if tid == T_STYLE:
                i = _raw_end(src, i, n, ns, ne)
                continue
            if tid == T_INPUT and attrs[10] >= 0 and _eq_word(src, attrs[10], attrs[11], _W_HIDDEN):
                continue
            if tid == T_FORM:
                if g[4] == 0:
                    g[4] = 1
                    _open_element(src, S, AF, g, st, rows, T_FORM, ns, ne, flags, hidden, role_furn, False, True)
                    _pop(src, S, AF, g, st, rows, True)
                continue
            _bail(src, S, AF, g, st, rows, BAIL_FOSTER)
            break
        # in-body start tags
        if tid == T_HTML or tid == T_HEAD or tid == T_FRAME or tid == T_CAPTION or tid == T_COLGROUP:
            continue
        if tid == T_BODY:
            # its attributes go to the <body> where it lacks them: only a problem when they hide
            # the body or make it furniture (not modelled: that would change what was read)
            if hidden or role_furn:
                _bail(src, S, AF, g, st, rows, BAIL_BODY_ATTRS)
                break
            continue
        if tid == T_TITLE:
            e = _raw_end(src, i, n, ns, ne)
            if g[3] < 0:
                g[3] = _title_run(title, 0, src, i, e, ebuf, eoffs, eslots, ecps, cp1252)
                if g[3] < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_UTF8)
                    break
            _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
            if not _ctx_hide(src, S, AF, g, st, rows):
                if _text_run(out, st, _ctx_link(src, S, AF, g, st, rows), src, i, e, True, False, ebuf, eoffs, eslots, ecps, cp1252) < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_UTF8)
                    break
            i = e
            continue
        if tid == T_SCRIPT:
            i = _script_end(src, i, n)
            if i < 0:
                _bail(src, S, AF, g, st, rows, BAIL_SCRIPT_ESCAPE)
            continue
        if tid == T_STYLE or tid == T_NOSCRIPT or tid == T_NOFRAMES or tid == T_IFRAME or tid == T_NOEMBED:
            # raw text, never shown: the element and its text, then its end tag as usual
            _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
            i = _raw_end(src, i, n, ns, ne)
            continue
        if tid == T_SVG or tid == T_MATH:
            _reconstruct(src, S, AF, g, st, rows)
            if not selfclose:
                i = _skip_foreign(src, i, n, ns, ne, g[3] >= 0, id_names, id_offs, id_vals, id_first, attrs, F)
                if i < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_FOREIGN)
                    break
            continue
        if tid == T_RB or tid == T_RTC or tid == T_RP or tid == T_RT:
            if _in_scope(src, S, AF, g, st, rows, T_RUBY, 0):
                _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                break
        if (PROPS[tid] & CLOSES_P) != 0 or tid == T_LI or tid == T_DD or tid == T_DT or tid == T_TABLE:
            if tid == T_FORM and g[4] != 0:
                continue
            if tid == T_LI or tid == T_DD or tid == T_DT:
                d = g[0] - 1
                while d >= 0:
                    x = S[d, 0]
                    if x == tid or (tid != T_LI and (x == T_DD or x == T_DT)):
                        _generate_implied(src, S, AF, g, st, rows, x)
                        _pop_until(src, S, AF, g, st, rows, x)
                        break
                    if (PROPS[x] & SPECIAL) != 0 and not (x == T_P or x == T_DIV or x == T_ADDRESS):
                        break
                    d -= 1
            if _in_scope(src, S, AF, g, st, rows, T_P, 1):
                if tid == T_TABLE and quirks != 0:
                    if quirks == 2:
                        _bail(src, S, AF, g, st, rows, BAIL_QUIRKS_TABLE)
                        break
                else:
                    _close_p(src, S, AF, g, st, rows)
            if (PROPS[tid] & HEADING) != 0 and g[0] > 0 and (PROPS[S[g[0] - 1, 0]] & HEADING) != 0:
                _pop(src, S, AF, g, st, rows, False)
            if tid == T_XMP:
                _reconstruct(src, S, AF, g, st, rows)
                _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
                e = _raw_end(src, i, n, ns, ne)
                if not _ctx_hide(src, S, AF, g, st, rows):
                    if _text_run(out, st, _ctx_link(src, S, AF, g, st, rows), src, i, e, False, False, ebuf, eoffs, eslots, ecps,
                                 cp1252) < 0:
                        _bail(src, S, AF, g, st, rows, BAIL_UTF8)
                        break
                i = e
                continue
            _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, (PROPS[tid] & VOIDT) == 0)
            if tid == T_FORM:
                g[4] = 1
            if tid == T_PRE or tid == T_LISTING:
                skip_lf = True
            continue
        if tid == T_TEXTAREA:
            # lexbor clones the formatting elements to reconstruct into the textarea, around
            # its text (the Standard does not reconstruct there): not modelled where it shows,
            # a clone with state (<p><i hidden></p><textarea>)
            if _state_to_reconstruct(src, S, AF, g, st, rows):
                _bail(src, S, AF, g, st, rows, BAIL_UNSUPPORTED)
                break
            _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, False, True)
            e = _raw_end(src, i, n, ns, ne)
            k = i
            if k < e and src[k] == 10:
                k += 1
            elif k < e and src[k] == 13:
                k += 2 if k + 1 < e and src[k + 1] == 10 else 1
            if not _ctx_hide(src, S, AF, g, st, rows):
                if _text_run(out, st, _ctx_link(src, S, AF, g, st, rows), src, k, e, True, False, ebuf, eoffs, eslots, ecps, cp1252) < 0:
                    _bail(src, S, AF, g, st, rows, BAIL_UTF8)
                    break
            i = e
            continue
        if tid == T_BUTTON and _in_scope(src, S, AF, g, st, rows, T_BUTTON, 0):
            _generate_implied(src, S, AF, g, st, rows, 0)
            _pop_until(src, S, AF, g, st, rows, T_BUTTON)
        if tid == T_A:
            if _last_af(src, S, AF, g, st, rows, T_A) >= 0:
                _adoption(src, S, AF, g, st, rows, T_A)
                j = _last_af(src, S, AF, g, st, rows, T_A)
                if j >= 0:
                    if AF[j, 1] >= 0:
                        _bail(src, S, AF, g, st, rows, BAIL_ADOPTION)
                        break
                    _af_remove(src, S, AF, g, st, rows, j)
        if tid == T_OPTION or tid == T_OPTGROUP:
            if g[0] > 0 and S[g[0] - 1, 0] == T_OPTION:
                _pop(src, S, AF, g, st, rows, True)
        if (PROPS[tid] & NO_RECON) == 0:
            _reconstruct(src, S, AF, g, st, rows)
        if tid == T_NOBR and _in_scope(src, S, AF, g, st, rows, T_NOBR, 0):
            _adoption(src, S, AF, g, st, rows, T_NOBR)
            _reconstruct(src, S, AF, g, st, rows)
        if g[2]:
            break
        void = (PROPS[tid] & VOIDT) != 0
        _open_element(src, S, AF, g, st, rows, tid, ns, ne, flags, hidden, role_furn, has_href, not void)
        if void:
            continue
        if (PROPS[tid] & FORMATTING) != 0:
            _af_push(src, S, AF, g, st, rows, tid, ns, ne)
        elif (PROPS[tid] & MARKER) != 0:
            _af_marker_push(src, S, AF, g, st, rows)
    if g[2]:
        return g[2], 0, 0, g[3], 2
    while g[0] > 0:
        _pop(src, S, AF, g, st, rows, True)
    _end_block(src, S, AF, g, st, rows, False)
    return 0, st[_OUT], st[_BLOCKS], g[3], st[_NFKC]


TAG_TABLE = _name_table(TAG_ID)
_ENTITIES = _entity_table()
_CP1252 = _cp1252_table()


# Scratch for ``scan`` that never leaves it (a call holds the GIL: numba does not release it here).
# The stack of open elements: tag id, name start, name end, list entry (-1: none), started a
# block, furniture, link, hidden (the context inside it), its own state (STATE_* bits).
_STACK = np.empty((MAX_STACK + 2, 9), dtype=np.int64)
# The list of active formatting elements: tag id, place in the stack (-1: none), marker, state.
_ACTIVE = np.empty((MAX_STACK + 2, 4), dtype=np.int64)
_ATTRS = np.empty(14, dtype=np.int64)
_FOREIGN = np.empty((256, 3), dtype=np.int64)
_STATE = np.empty(_NSTATE + 1, dtype=np.int64)
_GLOBALS = np.empty(8, dtype=np.int64)


_FLAGS: dict[int, tuple[tuple, np.ndarray]] = {}


def _flags_by_id(tag_table: tuple) -> np.ndarray:
    """``html_scan`` flags of each tag id, from a tag table (made once per table)."""
    known = _FLAGS.get(id(tag_table[0]))
    if known is not None and known[0] is tag_table:
        return known[1]
    buf, offs, vals, _ = tag_table
    names = [buf[offs[i]:offs[i + 1]].tobytes().decode() for i in range(len(vals))]
    missing = [n for n in names if n not in TAG_ID]
    if missing:
        raise ValueError(f"tags raw_scan has no id for: {missing}")
    flags = np.zeros(len(TAG_ID) + 1, dtype=np.int64)
    for name, value in zip(names, vals.tolist()):
        flags[TAG_ID[name]] = value
    flags[T_IMAGE] = VOID  # <image> is parsed as <img>
    _FLAGS[id(tag_table[0])] = (tag_table, flags)
    return flags


def scan_html(buf: np.ndarray, tag_table: tuple, role_table: tuple
              ) -> tuple[int, np.ndarray, int, np.ndarray, np.ndarray, int, int]:
    """``scan`` with this module's tables; ``tag_table``/``role_table`` are
    ``html_scan.tag_table(...)``/``role_table(...)`` as ``text`` builds them.

    Returns (bail, out, n_out, rows, title, n_title, nfkc): see ``scan``;
    ``rows`` is already cut to the blocks found.
    """
    n = buf.shape[0]
    # (a character reference can write more bytes than it takes: "&nGt;" is 5 bytes, its
    # two characters 6; the text's newlines and spaces come from at least as many bytes)
    out = np.empty(2 * n + 16, dtype=np.uint8)
    title = np.empty(2 * n + 16, dtype=np.uint8)
    rows = np.empty((n // 3 + 4, 6), dtype=np.int64)
    bail, n_out, n_rows, n_title, nfkc = scan(buf, _flags_by_id(tag_table), *role_table, *TAG_TABLE, *_ENTITIES, _CP1252, out, title, rows,
                                        _STATE, _GLOBALS, _STACK, _ACTIVE, _ATTRS, _FOREIGN)
    return bail, out, n_out, rows[:n_rows].copy(), title, n_title, nfkc
