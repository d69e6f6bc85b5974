"""Which encoding a page's bytes are in, as browsers decide it.

Order: a BOM, the encoding declared outside the document (the HTTP header's
charset), ``<meta charset>``, then detection (``_detect``). w3lib maps legacy
labels to their supersets as browsers do (gb2312 -> gb18030, iso-8859-1 ->
cp1252).

>>> sniff_encoding("<meta charset=gb2312><p>中文</p>".encode("gb2312"))
('gb18030', 0)
"""

from __future__ import annotations

import codecs
import logging
import re
from functools import lru_cache

import numpy as np
import regex
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom, to_unicode

logger = logging.getLogger(__name__)


def sniff_encoding(data: bytes, encoding: str | None = None) -> tuple[str, int]:
    """``(encoding, BOM length)`` of HTML bytes, without decoding them.

    Order, as in browsers: a BOM, then the caller's declared encoding (e.g.
    from a Content-Type header), then ``<meta charset>`` / ``http-equiv``,
    then detection. w3lib maps legacy labels to their supersets as browsers
    do (gb2312 -> gb18030, iso-8859-1 -> cp1252), which is what makes gb2312
    pages with GBK-only characters decode right.
    """
    bom_enc, bom = read_bom(data)
    if bom_enc is not None and bom is not None:
        return bom_enc, len(bom)
    enc = None
    if encoding:
        try:
            codecs.lookup(encoding)
            enc = http_content_type_encoding(f"text/html; charset={encoding}")
        except LookupError:
            logger.debug("unknown declared encoding %r, ignoring it", encoding)
    enc = _page_encoding(enc) or meta_encoding(data) or _detect(data) or "utf-8"
    if enc in ("utf-16", "utf-32"):
        enc += "-be"
    return enc, 0


def is_wide(encoding: str | None) -> bool:
    """Whether ``encoding`` names UTF-16 or UTF-32 (in any spelling Python knows: ``UTF-16LE``, ``utf_32``):
    the encodings ASCII markup is not in, which a BOM or a header may declare and a ``<meta>`` may not. O(1).

    >>> is_wide("UTF-16LE"), is_wide("utf_32"), is_wide("utf-8"), is_wide("bogus"), is_wide(None)
    (True, True, False, False, False)
    """
    if not encoding:
        return False
    try:
        return codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))
    except LookupError:
        return False


#: Python's text codecs that read ASCII as ASCII and are no encoding of the web: escapes (a page's "\\n" would
#: become a line break), domain names, and UTF-7, which the Encoding Standard leaves out
_NOT_THE_WEBS = frozenset({"idna", "punycode", "raw-unicode-escape", "unicode-escape", "utf-7"})
#: ASCII markup, which a page's encoding must decode as ASCII (``_page_encoding``)
_MARKUP = b'<html lang="en"><meta charset=x><p class=a>Text, 0-9.</p>'


@lru_cache(maxsize=None)
def _page_encoding(enc: str | None) -> str | None:
    """``enc`` if a page can be in it (a text encoding that reads ASCII markup as ASCII, as every encoding
    of the web but UTF-16, which a BOM says), else None: a declared ``base64``, ``rot13``, ``zlib`` or
    ``punycode`` (Python codecs, no web page's) made a page unparsable or empty, and ``cp037`` (EBCDIC) read
    its bytes as other letters. Browsers ignore such labels. O(1) a label (cached).

    >>> _page_encoding("cp1251"), _page_encoding("base64"), _page_encoding("cp037")
    ('cp1251', None, None)
    """
    if not enc:
        return None
    try:
        info = codecs.lookup(enc)
        ok = info._is_text_encoding and info.name not in _NOT_THE_WEBS and (
            is_wide(enc) or _MARKUP.decode(enc) == _MARKUP.decode("ascii"))
    except (LookupError, UnicodeDecodeError, ValueError, TypeError):
        ok = False
    if not ok:
        logger.debug("declared encoding %r is not a web page's, ignoring it", enc)
    return enc if ok else None


def meta_encoding(data: bytes) -> str | None:
    """The encoding the page's ``<meta>`` declares, if a page can be in it (``_page_encoding``), else None;
    UTF-16 and UTF-32 read as UTF-8, as the HTML Standard says (a ``<meta>`` readable as ASCII is not in
    them: a BOM or the header says so).

    >>> meta_encoding(b'<meta charset="utf-16"><p>x</p>'), meta_encoding(b'<meta charset="koi8-r">')
    ('utf-8', 'koi8-r')
    """
    enc = html_body_declared_encoding(data)
    return "utf-8" if is_wide(enc) else _page_encoding(enc)


def detect_encoding(data: bytes) -> str | None:
    """The encoding detection alone says ``data`` is in (no BOM, header nor ``<meta>`` asked), for a page
    whose declared encoding reads it mostly as U+FFFD (``text.visible.extract``). See ``_detect``."""
    return _page_encoding(_detect(data))


def decode_html(data: bytes, encoding: str | None = None) -> tuple[str, str]:
    """Decode HTML bytes; returns ``(text, encoding_used)``. See ``sniff_encoding``."""
    enc, skip = sniff_encoding(data, encoding)
    return to_unicode(data[skip:], enc), enc


#: punctuation and symbols (other than U+FFFD) are plausible in any script
_PUNCT = r"\p{P}\p{Sm}\p{So}\p{Sk}\p{Sc}--\ufffd"
#: Multi-byte East Asian codecs tried before generic detection: (codec,
#: characters a real page in it is mostly made of beyond ASCII, characters only
#: its language writes much of, the least share of those). Half-width katakana
#: and Hangul count as implausible: they are what other codecs' bytes turn
#: into when read as Shift_JIS or UHC, and real pages seldom use them.
_FULLWIDTH = r"\u3000-\u303f\uff00-\uff60\uffe0-\uffef"
_CJK_CODECS = (
    ("gb18030", regex.compile(r"[\p{Han}" + _FULLWIDTH + _PUNCT + "]", regex.V1), None, 0.0),
    ("big5hkscs", regex.compile(r"[\p{Han}" + _FULLWIDTH + _PUNCT + "]", regex.V1), None, 0.0),
    # Japanese writes kana between its kanji: a page without them is Chinese
    # read with a Japanese codec (GB2312 and EUC-JP share their kana rows, so
    # EUC-JP text also reads as GB18030, with the same kana and wrong kanji).
    ("cp932", regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}" + _FULLWIDTH + _PUNCT + "--\uff61-\uff9f]", regex.V1),
     regex.compile(r"[\p{Hiragana}\p{Katakana}--\uff61-\uff9f]", regex.V1), 0.1),
    ("euc_jp", regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}" + _FULLWIDTH + _PUNCT + "--\uff61-\uff9f]", regex.V1),
     regex.compile(r"[\p{Hiragana}\p{Katakana}--\uff61-\uff9f]", regex.V1), 0.1),
    # Korean is mostly Hangul syllables; EUC-KR's Hangul rows are GB2312's
    # commonest Hanzi, so Korean also reads as plausible GB18030, and Chinese
    # reads as 40-55% Hangul in UHC (measured on zh-cwced's GBK pages).
    ("cp949", regex.compile(r"[\p{Hangul}\p{Han}" + _FULLWIDTH + _PUNCT + "]", regex.V1),
     regex.compile(r"[\uac00-\ud7a3]"), 0.8),
)
#: The least mean length of the runs of characters beyond ASCII for a text read with an East Asian
#: codec to be taken for CJK text: CJK is written in runs of several characters (sentences, words;
#: Korean words between spaces: 2.2-3.0 on average, Chinese and Japanese more), while Latin-script
#: text in a single-byte code page, read with one of these codecs, makes each accented letter and the
#: byte after it one character between ASCII letters: runs of one (1.0-1.4 on average, measured on the
#: installation guide's pages in 12 languages and pangrams of Polish, Hungarian, Turkish, Lithuanian).
MIN_CJK_RUN = 1.5
#: The encodings a page without a declared one is guessed among: the web's legacy encodings (the
#: WHATWG Encoding Standard's, as Python names them), without Mac OS's two (macintosh, x-mac-cyrillic:
#: seldom served, and a generic detector's frequent wrong guess for short Central European text).
#: Others (cp775, cp850, hp_roman8, mac_iceland...) are no web page's, and charset-normalizer picked
#: them for 2-17 of 40 undeclared pages of the installation guide in a Western language.
WEB_ENCODINGS = ("cp1252", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258",
                 "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_5", "iso8859_6", "iso8859_7", "iso8859_8",
                 "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "koi8_r", "koi8_u",
                 "cp866", "cp874", "gb18030", "big5", "euc_jp", "shift_jis", "cp932", "iso2022_jp", "euc_kr", "cp949")
#: the lead bytes of kana (hiragana, katakana) in the Japanese codecs
_KANA_LEADS = {"cp932": (0x82, 0x83), "euc_jp": (0xA4, 0xA5)}
#: ISO-2022 escape sequences: a 7-bit Japanese or Korean page (all ASCII bytes)
_ISO_2022 = ((re.compile(rb"\x1b\$[@B]|\x1b\(J|\x1b\$\(D"), "iso2022_jp_ext"), (re.compile(rb"\x1b\$\)C"), "iso2022_kr"))


@lru_cache(maxsize=None)
def _bmp_table(pattern: regex.Pattern) -> np.ndarray:
    """Which BMP code points a one-character pattern matches, as a bool array:
    a page's characters are looked up at once instead of scanned by the
    pattern (~100x faster on a Chinese page)."""
    cps = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    chars = "".join(map(chr, cps))
    table = np.zeros(0x10000, dtype=bool)
    table[[cps[m.start()] for m in pattern.finditer(chars)]] = True
    return table


def _count_matching(pattern: regex.Pattern, non_ascii: np.ndarray) -> int:
    """How many of the code points ``non_ascii`` the one-character ``pattern`` matches."""
    bmp = non_ascii < 0x10000
    n = int(np.count_nonzero(_bmp_table(pattern)[non_ascii[bmp]]))
    if not bmp.all():  # beyond the BMP (rare): the pattern itself
        n += len(pattern.findall("".join(map(chr, non_ascii[~bmp].tolist()))))
    return n


def _code_points(sample: bytes, codec: str) -> np.ndarray:
    """``sample`` read with ``codec`` (U+FFFD for what it cannot read), as a uint32 array of code points."""
    return np.frombuffer(sample.decode(codec, errors="replace").encode("utf-32-le"), dtype=np.uint32)


def cjk_codec_scores(sample: bytes, codec: str, cps: np.ndarray | None = None) -> tuple[int, int, int, int] | None:
    """``(characters beyond ASCII, replacement characters, plausible, signature)``
    of ``sample`` read with one of ``_CJK_CODECS`` (``cps``: that reading's code points,
    if made already); None without any character beyond ASCII."""
    _, plausible, signature, _ = next(c for c in _CJK_CODECS if c[0] == codec)
    if cps is None:
        cps = _code_points(sample, codec)
    non_ascii = cps[cps >= 0x80]
    if not non_ascii.size:
        return None
    bad = int(np.count_nonzero(non_ascii == 0xFFFD))
    return (int(non_ascii.size), bad, _count_matching(plausible, non_ascii),
            _count_matching(signature, non_ascii) if signature is not None else 0)


def mean_run(cps: np.ndarray) -> float:
    """The mean length of the runs of characters beyond ASCII among code points ``cps`` (0.0: none). O(len)."""
    beyond = cps >= 0x80
    runs = int(np.count_nonzero(beyond[1:] & ~beyond[:-1])) + int(beyond[:1].sum())
    return float(np.count_nonzero(beyond)) / runs if runs else 0.0


def _cjk_codec(sample: bytes) -> str | None:
    """The East Asian codec that reads ``sample`` as mostly CJK text: a codec
    whose language has a signature (kana, Hangul) wins when the text shows
    enough of it, else the first codec (GB18030, then Big5) that fits. None
    when the characters beyond ASCII come one at a time between ASCII ones
    (``MIN_CJK_RUN``): Western text in a single-byte code page reads as
    "plausible" Han characters in GB18030 and Big5 (an accented letter and the
    letter after it make one), and CJK text is written in runs."""
    fallback = None
    high = np.bincount(np.frombuffer(sample, dtype=np.uint8), minlength=256)
    for codec, _, signature, least in _CJK_CODECS:
        if signature is None and fallback is not None:
            continue
        if codec in _KANA_LEADS:
            # Skip decoding when the kana cannot reach their share: each kana
            # has one of these lead bytes, and a character beyond ASCII has
            # at most three bytes, all of them >= 0x80.
            if high[list(_KANA_LEADS[codec])].sum() < least * high[0x80:].sum() / 3:
                continue
        cps = _code_points(sample, codec)  # (one reading for the scores and the runs)
        scores = cjk_codec_scores(sample, codec, cps)
        if scores is None:
            return None  # nothing beyond ASCII: no codec of these to tell
        n, bad, good, sig = scores
        # Real pages carry the odd broken sequence (a character cut in two):
        # tolerate up to 1% of replacement characters.
        if bad > 0.01 * n or good < 0.9 * n:
            continue
        if mean_run(cps) < MIN_CJK_RUN:
            continue
        if signature is None:
            fallback = codec
        elif sig >= least * n:
            return codec
    return fallback


def _detect(data: bytes) -> str | None:
    """Encoding of undeclared bytes: ISO-2022 by its escapes, UTF-8, else an
    East Asian codec that decodes them into mostly CJK text (``_cjk_codec``),
    else charset-normalizer's guess.

    Generic detectors often call GBK text a Cyrillic or Latin code page (any
    byte string is valid in those), so the East Asian codecs are checked first.
    Cost: O(sample); on a 13 KB undeclared GBK page ~0.4 ms (three decodes).
    """
    sample = data[:200_000]
    if sample.isascii():
        for escape, codec in _ISO_2022:
            if escape.search(sample):
                return codec
    try:
        sample.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 4:  # a character cut by the sample boundary
            return "utf-8"
    cjk = _cjk_codec(sample)
    if cjk:
        return cjk
    from charset_normalizer import from_bytes  # imported lazily: rarely needed

    matches = from_bytes(sample, cp_isolation=list(WEB_ENCODINGS))
    best = matches.best()
    if best is None:
        return "cp1252"
    enc = best.encoding
    # On a tie (short Western text: windows-1250, -1252 and -1257 read it
    # equally well), the web's default for undeclared pages, as browsers do.
    if any(m.encoding == "cp1252" and (m.chaos, m.coherence) == (best.chaos, best.coherence) for m in matches):
        enc = "cp1252"
    return "gb18030" if enc in ("gb2312", "gbk") else enc


