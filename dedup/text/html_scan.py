"""Blocks of visible text from serialised HTML, in one compiled pass.

The page is parsed by lexbor (the HTML Standard's tree construction, as a
browser builds it) and serialised back; that serialisation is regular: every
element is closed except the void ones, attribute values are double-quoted
with ``& < > "`` escaped, and text escapes only ``& < >`` and U+00A0. This
module scans it with numba, so the per-element work of the walk (hidden
checks, blocks, furniture, link text) runs as machine code instead of as
Python calls on each node.

``scan(src)`` returns the visible text (UTF-8, whitespace folded, blocks
separated by newlines) and one row per block: its code-point span in the text, whether it is
furniture, how many of its characters sit inside ``<a href>`` and how many
inside a listing (``<pre> <code>``...), and its counts of words and Han characters (for the features' short-block test). The rules
are those of ``dedup.text`` (see its docstring); a hidden element is treated
as absent, as a browser renders ``display: none``.

Cost: O(length of the serialisation).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .page import N_COLUMNS, ROW_CODE, ROW_END, ROW_FURNITURE, ROW_HAN, ROW_LINK, ROW_START, ROW_WORDS

# Tag classes (bit flags).
BLOCK, FURNITURE, DROPPED, RAW_DROPPED, RAW_KEPT, VOID, ANCHOR, CODE = 1, 2, 4, 8, 16, 32, 64, 128

#: Raw-text elements (serialised verbatim, not escaped) whose text is never shown.
RAW_DROPPED_TAGS = ("script", "style", "iframe", "noembed", "noframes", "noscript")
#: Raw-text elements whose text is shown as is (only text children: the parser's
#: "text" insertion mode). <plaintext> is unwrapped before serialising (see dedup.text).
RAW_KEPT_TAGS = ("xmp",)
#: Void elements: serialised without an end tag.
VOID_TAGS = ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
             "track", "wbr", "basefont", "bgsound", "frame", "keygen", "param")

def _name_table(names: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Names packed into one byte array: (bytes, offsets, values, first), sorted,
    with ``first[b]:first[b + 1]`` the rows whose name starts with byte b."""
    keys = sorted(names, key=lambda k: k.encode())
    buf = b"".join(k.encode() for k in keys)
    offs = np.zeros(len(keys) + 1, dtype=np.int64)
    offs[1:] = np.cumsum([len(k.encode()) for k in keys])
    first = np.searchsorted(np.array([k.encode()[0] for k in keys]), np.arange(257), side="left").astype(np.int64)
    return (np.frombuffer(buf, dtype=np.uint8).copy(), offs, np.array([names[k] for k in keys], dtype=np.int64),
            first)


def tag_table(block: frozenset[str], furniture: frozenset[str], dropped: frozenset[str],
              code: frozenset[str]) -> tuple:
    flags: dict[str, int] = {}
    for group, bit in ((block, BLOCK), (furniture, FURNITURE), (dropped, DROPPED), (code, CODE),
                       (RAW_DROPPED_TAGS, RAW_DROPPED), (RAW_KEPT_TAGS, RAW_KEPT), (VOID_TAGS, VOID), (("a",), ANCHOR)):
        for name in group:
            flags[name] = flags.get(name, 0) | bit
    return _name_table(flags)


def role_table(roles: frozenset[str]) -> tuple:
    return _name_table({r: 1 for r in roles})


@njit(cache=True)
def _lower(b):
    return b + 32 if 65 <= b <= 90 else b


@njit(cache=True)
def _lookup(src, s, e, names, offs, vals, first):
    """Value of the lower-cased name src[s:e] in a packed name table, else 0."""
    n = e - s
    if n == 0:
        return 0
    f = _lower(src[s])
    for i in range(first[f], first[f + 1]):
        a, b = offs[i], offs[i + 1]
        if b - a != n:
            continue
        same = True
        for j in range(n):
            if _lower(src[s + j]) != names[a + j]:
                same = False
                break
        if same:
            return vals[i]
    return 0


@njit(cache=True)
def _is_space(b):
    return b == 32 or 9 <= b <= 13


@njit(cache=True)
def _ws_len(src, i, n):
    """Byte length of the Unicode white space character at src[i] (str.isspace), else 0."""
    b = src[i]
    if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
        return 1
    if b == 0xC2 and i + 1 < n and (src[i + 1] == 0x85 or src[i + 1] == 0xA0):
        return 2
    if i + 2 < n:
        b1, b2 = src[i + 1], src[i + 2]
        if b == 0xE1 and b1 == 0x9A and b2 == 0x80:  # U+1680
            return 3
        if b == 0xE2 and b1 == 0x80 and (b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF):
            return 3 if b2 >= 0x80 else 0  # U+2000..200A, 2028, 2029, 202F
        if b == 0xE2 and b1 == 0x81 and b2 == 0x9F:  # U+205F
            return 3
        if b == 0xE3 and b1 == 0x80 and b2 == 0x80:  # U+3000
            return 3
    return 0


@njit(cache=True)
def _find(src, i, n, pat):
    """Index of the first occurrence of pat in src[i:n], else n."""
    m = pat.shape[0]
    while i + m <= n:
        if src[i] == pat[0]:
            ok = True
            for j in range(1, m):
                if src[i + j] != pat[j]:
                    ok = False
                    break
            if ok:
                return i
        i += 1
    return n


@njit(cache=True)
def _end_tag_at(src, i, n, ns, ne):
    """True when ``</name`` (case-insensitive; name = src[ns:ne]) starts at i."""
    m = ne - ns
    if i + 2 + m > n or src[i] != 60 or src[i + 1] != 47:
        return False
    for j in range(m):
        if _lower(src[i + 2 + j]) != _lower(src[ns + j]):
            return False
    return True


@njit(cache=True)
def _find_end_tag(src, i, n, ns, ne):
    """Index of ``</name`` (case-insensitive; name = src[ns:ne]) at or after i, else n."""
    while i < n:
        if src[i] == 60 and _end_tag_at(src, i, n, ns, ne):
            return i
        i += 1
    return n


@njit(cache=True)
def _has_word_then(src, s, e, w1, w2):
    """True when lower(src[s:e]) contains w1, ASCII spaces, ':', spaces, w2."""
    m1, m2 = w1.shape[0], w2.shape[0]
    i = s
    while i + m1 <= e:
        ok = True
        for j in range(m1):
            if _lower(src[i + j]) != w1[j]:
                ok = False
                break
        if ok:
            k = i + m1
            while k < e and _is_space(src[k]):
                k += 1
            if k < e and src[k] == 58:
                k += 1
                while k < e and _is_space(src[k]):
                    k += 1
                if k + m2 <= e and _eq_lower(src, k, k + m2, w2):
                    return True
        i += 1
    return False


@njit(cache=True)
def _eq_lower(src, s, e, word):
    """True when lower(src[s:e]) == word."""
    if e - s != word.shape[0]:
        return False
    for j in range(e - s):
        if _lower(src[s + j]) != word[j]:
            return False
    return True


# Slots of the scan's state vector (one int64 array, so that the inlined
# helpers below can update it in place).
_OUT, _CP, _START, _HAS, _PENDING, _RAW, _LINK, _SPACES, _HAN, _BLOCKS, _CODE, _NSTATE = range(12)
# columns of the block rows ``scan`` returns (``text.Page.rows``)


@njit(cache=True)
def _is_han(c):
    # the ranges of dedup.features' Han count: CJK unified ideographs, extension A, compatibility, planes 2-3
    return (0x3400 <= c <= 0x4DBF) or (0x4E00 <= c <= 0x9FFF) or (0xF900 <= c <= 0xFAFF) or (0x20000 <= c <= 0x3134F)


@njit(cache=True)
def _space(st, link, code):
    """One white space character of the source: folded into a pending space."""
    st[_RAW] += 1
    if link:
        st[_LINK] += 1
    if code:
        st[_CODE] += 1
    if st[_HAS]:
        st[_PENDING] = 1


@njit(cache=True)
def _open_char(out, st):
    """Before a visible character: write the pending space, start the block."""
    if st[_PENDING]:
        out[st[_OUT]] = 32
        st[_OUT] += 1
        st[_CP] += 1
        st[_SPACES] += 1
        st[_PENDING] = 0
    if not st[_HAS]:
        if st[_BLOCKS]:  # blocks are separated by a newline in the text
            out[st[_OUT]] = 10
            st[_OUT] += 1
            st[_CP] += 1
        st[_START] = st[_CP]
        st[_HAS] = 1


@njit(cache=True)
def _char(out, st, link, code, value):
    """One visible character given by its code point (< 0x800: entities)."""
    _open_char(out, st)
    o = st[_OUT]
    if value < 0x80:
        out[o] = value
        st[_OUT] = o + 1
    else:
        out[o] = 0xC0 | (value >> 6)
        out[o + 1] = 0x80 | (value & 0x3F)
        st[_OUT] = o + 2
    st[_CP] += 1
    st[_RAW] += 1
    if link:
        st[_LINK] += 1
    if code:
        st[_CODE] += 1


@njit(cache=True)
def _text(out, st, link, code, src, k, e, raw):
    """Visible text from src[k] up to e, or up to the next ``<`` unless ``raw``
    (raw-text elements, whose text is also not entity-decoded). Returns where it stopped."""
    while k < e:
        ch = src[k]
        if ch == 60 and not raw:
            break
        if 33 <= ch <= 126 and (raw or ch != 38):  # most text: a run of printable ASCII
            _open_char(out, st)
            o = st[_OUT]
            k0 = k
            while k < e:
                ch = src[k]
                if ch < 33 or ch > 126 or (not raw and (ch == 38 or ch == 60)):
                    break
                out[o] = ch
                o += 1
                k += 1
            st[_OUT] = o
            st[_CP] += k - k0
            st[_RAW] += k - k0
            if link:
                st[_LINK] += k - k0
            if code:
                st[_CODE] += k - k0
            continue
        if ch >= 0x80 and not _ws_len(src, k, e):
            # a run of visible characters with non-ASCII ones (Chinese text): counted
            # in locals, written to the state once, as the ASCII run above
            _open_char(out, st)
            o = st[_OUT]
            n_cp = 0
            han = 0
            while k < e:
                lead = src[k]
                if lead < 0x80:
                    if lead < 33 or lead > 126 or (not raw and (lead == 38 or lead == 60)):
                        break
                    out[o] = lead
                    o += 1
                    k += 1
                    n_cp += 1
                    continue
                # only these lead bytes start a white space character (see _ws_len)
                if (lead == 0xC2 or lead == 0xE1 or lead == 0xE2 or lead == 0xE3) and _ws_len(src, k, e):
                    break
                out[o] = lead
                o += 1
                k += 1
                value = 0
                if lead >= 0xF0:
                    value = lead & 0x07
                elif lead >= 0xE0:
                    value = lead & 0x0F
                elif lead >= 0xC0:
                    value = lead & 0x1F
                while k < e and (src[k] & 0xC0) == 0x80:
                    value = (value << 6) | (src[k] & 0x3F)
                    out[o] = src[k]
                    o += 1
                    k += 1
                n_cp += 1
                if lead >= 0xE0 and _is_han(value):
                    han += 1
            st[_OUT] = o
            st[_CP] += n_cp
            st[_RAW] += n_cp
            if link:
                st[_LINK] += n_cp
            if code:
                st[_CODE] += n_cp
            st[_HAN] += han
            continue
        if ch == 32 or 9 <= ch <= 13:
            _space(st, link, code)
            k += 1
            continue
        if ch == 38:  # an entity: the serialiser writes only &amp; &lt; &gt; &nbsp; (&quot; in values)
            value = -1
            ln = 0
            if k + 4 < e and src[k + 1] == 97 and src[k + 2] == 109 and src[k + 3] == 112 and src[k + 4] == 59:
                value, ln = 38, 5
            elif k + 3 < e and src[k + 1] == 108 and src[k + 2] == 116 and src[k + 3] == 59:
                value, ln = 60, 4
            elif k + 3 < e and src[k + 1] == 103 and src[k + 2] == 116 and src[k + 3] == 59:
                value, ln = 62, 4
            elif k + 5 < e and src[k + 1] == 110 and src[k + 2] == 98 and src[k + 3] == 115 \
                    and src[k + 4] == 112 and src[k + 5] == 59:
                value, ln = 0xA0, 6
            elif k + 5 < e and src[k + 1] == 113 and src[k + 2] == 117 and src[k + 3] == 111 \
                    and src[k + 4] == 116 and src[k + 5] == 59:
                value, ln = 34, 6
            if value == 0xA0:  # no-break space: white space
                _space(st, link, code)
                k += ln
                continue
            if value >= 0:
                _char(out, st, link, code, value)
                k += ln
                continue
        w = _ws_len(src, k, e)
        if w:
            _space(st, link, code)
            k += w
            continue
        # what is left is one ASCII character: a control character, or "&" that starts no entity
        # (any other non-ASCII character went to the run above, or was white space)
        _char(out, st, link, code, src[k])
        k += 1
    return k


@njit(cache=True)
def _end_block(blocks, nb, st, furniture):
    """Close the current block (a row when it has text); returns (blocks, nb)."""
    if st[_HAS]:
        if nb == blocks.shape[0]:
            blocks = np.concatenate((blocks, np.empty_like(blocks)))
        start, end = st[_START], st[_CP]
        length = end - start
        blocks[nb, ROW_START] = start
        blocks[nb, ROW_END] = end
        blocks[nb, ROW_FURNITURE] = furniture
        # link characters counted before white space folding: scaled down with it
        blocks[nb, ROW_LINK] = min(length, (st[_LINK] * length) // st[_RAW]) if st[_RAW] else 0
        blocks[nb, ROW_CODE] = min(length, (st[_CODE] * length) // st[_RAW]) if st[_RAW] else 0
        blocks[nb, ROW_WORDS] = st[_SPACES] + 1
        blocks[nb, ROW_HAN] = st[_HAN]
        nb += 1
        st[_BLOCKS] = nb
    st[_HAS] = 0
    st[_PENDING] = 0
    st[_RAW] = 0
    st[_LINK] = 0
    st[_CODE] = 0
    st[_SPACES] = 0
    st[_HAN] = 0
    return blocks, nb


@njit(cache=True)
def scan(src, names, offs, vals, first, role_names, role_offs, role_vals, role_first, kw):
    """Scan a lexbor serialisation (uint8 UTF-8); see the module docstring.

    ``kw`` is ``KEYWORDS``: the byte patterns for attributes and comments.

    Returns (out, n_out, rows): the visible text is ``out[:n_out]`` (UTF-8,
    blocks separated by a newline);
    rows is an (m, 7) int64 array, one row per block: start and end code
    point in the text, furniture (0/1), link characters, words (white-space
    separated), Han characters and listing characters (``text.page.ROW_*``).
    """
    n = src.shape[0]
    out = np.empty(n + 1, dtype=np.uint8)
    st = np.zeros(_NSTATE, dtype=np.int64)
    blocks = np.empty((16, N_COLUMNS), dtype=np.int64)
    nb = 0
    depth_cap = 16
    st_block = np.zeros(depth_cap, dtype=np.bool_)
    st_furn = np.zeros(depth_cap, dtype=np.bool_)
    st_link = np.zeros(depth_cap, dtype=np.bool_)
    st_hide = np.zeros(depth_cap, dtype=np.bool_)
    st_code = np.zeros(depth_cap, dtype=np.bool_)
    depth = 0
    # the current element's context
    furn = False
    link = False
    hide = False
    code = False

    kw_hidden = kw[0:6]
    kw_aria = kw[6:17]
    kw_style = kw[17:22]
    kw_role = kw[22:26]
    kw_href = kw[26:30]
    kw_true = kw[30:34]
    kw_display = kw[34:41]
    kw_none = kw[41:45]
    kw_visibility = kw[45:55]
    kw_comment_end = kw[55:58]
    kw_gt = kw[58:59]

    i = 0
    while i < n:
        if src[i] != 60:  # text up to the next tag
            if hide:
                while i < n and src[i] != 60:
                    i += 1
            else:
                i = _text(out, st, link, code, src, i, n, False)
            continue
        if i + 1 >= n:
            break
        c1 = src[i + 1]
        if c1 == 33:  # <!-- comment --> or <!DOCTYPE>
            if i + 3 < n and src[i + 2] == 45 and src[i + 3] == 45:
                i = _find(src, i + 4, n, kw_comment_end) + 3
            else:
                i = _find(src, i + 2, n, kw_gt) + 1
            continue
        if c1 == 63:  # <?processing instruction>
            i = _find(src, i + 2, n, kw_gt) + 1
            continue
        if c1 == 47:  # an end tag closes the innermost element (the serialisation is balanced)
            i = _find(src, i + 2, n, kw_gt) + 1
            if depth == 0:
                continue
            depth -= 1
            if st_block[depth]:
                blocks, nb = _end_block(blocks, nb, st, furn)
            if depth > 0:
                furn, link, hide, code = st_furn[depth - 1], st_link[depth - 1], st_hide[depth - 1], st_code[depth - 1]
            else:
                furn, link, hide, code = False, False, False, False
            continue
        # a start tag: its name, then its attributes
        ns = i + 1
        k = ns
        while k < n and not _is_space(src[k]) and src[k] != 62 and src[k] != 47:
            k += 1
        ne = k
        flags = _lookup(src, ns, ne, names, offs, vals, first)
        hidden = False
        role_furn = False
        has_href = False
        while k < n and src[k] != 62:
            if _is_space(src[k]) or src[k] == 47:
                k += 1
                continue
            an = k
            while k < n and not _is_space(src[k]) and src[k] != 61 and src[k] != 62 and src[k] != 47:
                k += 1
            ae = k
            vs = ve = k
            if k < n and src[k] == 61:
                k += 1
                if k < n and (src[k] == 34 or src[k] == 39):
                    q = src[k]
                    vs = k + 1
                    k = vs
                    while k < n and src[k] != q:
                        k += 1
                    ve = k
                    k += 1
                else:
                    vs = k
                    while k < n and not _is_space(src[k]) and src[k] != 62:
                        k += 1
                    ve = k
            if hide:
                continue  # inside a hidden subtree: nothing to decide
            if _eq_lower(src, an, ae, kw_hidden):
                hidden = True
            elif _eq_lower(src, an, ae, kw_aria):
                s2, e2 = vs, ve
                while s2 < e2 and _is_space(src[s2]):
                    s2 += 1
                while e2 > s2 and _is_space(src[e2 - 1]):
                    e2 -= 1
                if _eq_lower(src, s2, e2, kw_true):
                    hidden = True
            elif _eq_lower(src, an, ae, kw_style):
                if _has_word_then(src, vs, ve, kw_display, kw_none) or \
                        _has_word_then(src, vs, ve, kw_visibility, kw_hidden):
                    hidden = True
            elif _eq_lower(src, an, ae, kw_role):
                if _lookup(src, vs, ve, role_names, role_offs, role_vals, role_first):
                    role_furn = True
            elif _eq_lower(src, an, ae, kw_href):
                has_href = True
        i = k + 1
        new_hide = hide or hidden or (flags & (DROPPED | RAW_DROPPED)) != 0
        is_block = False
        new_furn = furn
        if not new_hide:
            is_block = (flags & BLOCK) != 0
            if not furn and ((flags & FURNITURE) != 0 or role_furn):
                new_furn = True
                is_block = True
            if is_block:  # a block starts: the text so far is one block
                blocks, nb = _end_block(blocks, nb, st, furn)
        new_link = link or ((flags & ANCHOR) != 0 and has_href)
        new_code = code or (flags & CODE) != 0
        if flags & VOID:
            continue  # no content, no end tag (<br>, <hr> ended the block above)
        if flags & (RAW_DROPPED | RAW_KEPT):
            # raw text runs, verbatim, to the end tag, which is then read as usual
            e = _find_end_tag(src, i, n, ns, ne)
            if not new_hide:
                _text(out, st, new_link, new_code, src, i, e, True)
            i = e
        if depth == depth_cap:
            st_block = np.concatenate((st_block, np.zeros(depth_cap, dtype=np.bool_)))
            st_furn = np.concatenate((st_furn, np.zeros(depth_cap, dtype=np.bool_)))
            st_link = np.concatenate((st_link, np.zeros(depth_cap, dtype=np.bool_)))
            st_hide = np.concatenate((st_hide, np.zeros(depth_cap, dtype=np.bool_)))
            st_code = np.concatenate((st_code, np.zeros(depth_cap, dtype=np.bool_)))
            depth_cap *= 2
        st_block[depth] = is_block
        st_furn[depth] = new_furn
        st_link[depth] = new_link
        st_hide[depth] = new_hide
        st_code[depth] = new_code
        depth += 1
        furn, link, hide, code = new_furn, new_link, new_hide, new_code
    blocks, nb = _end_block(blocks, nb, st, False)
    return out, st[_OUT], blocks[:nb]


#: the byte patterns ``scan`` takes as ``kw`` (offsets fixed there)
KEYWORDS = np.frombuffer(b"hidden" b"aria-hidden" b"style" b"role" b"href" b"true" b"display" b"none"
                         b"visibility" b"-->" b">", dtype=np.uint8).copy()
