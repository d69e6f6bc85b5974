"""The warm-up of the fingerprint kernels (``jit`` group ``fingerprint``).

Fingerprints a few small pages, chosen to reach every compiled kernel on the
way: the visible-text scan, the word kernel with jieba's segmenter (Han,
Japanese, Thai, Korean, Arabic, Greek, full-width and compatibility
characters), a declared legacy encoding (and undeclared ones), MurmurHash3 over many strings and
the simhash sums. Importing this module registers it with ``jit``; ``jit.warm``
imports it by name.
"""

from __future__ import annotations

import numpy as np

from .. import jit
from ..features.murmur import hash64_many
from ..simhash import simhash
from .pipeline import Fingerprinter

PAGES = (
    b"<html><title>Warm up - Site</title><body><nav><a href='/'>Home</a></nav><p>"
    + b"Near-duplicate detection for web crawling, with simhash fingerprints. " * 4 + b"</p></body></html>",
    "<p>网页去重：相似网页的指纹只差几位。日本語のテキストもあります。ｆｕｌｌ ｗｉｄｔｈ … ™ Straße</p>".encode() * 4,
    "<meta charset=gbk><p>网页去重：相似网页的指纹只差几位，抓取时丢弃重复的网页。</p>".encode("gbk") * 4,
    "<p>สวัสดีครับ ภาษาไทย 한국어 텍스트 العربية Ελληνικά</p>".encode() * 6,
)
#: Pages in undeclared legacy encodings: they load the East Asian codecs' tables and the generic
#: detector (``text.decode._detect``), 30-80 ms at a process's first such page. Fingerprinted by the
#: compiled warm-up only, which a worker runs after it has said it is ready, so that they do not
#: hold up its start.
UNDECLARED_PAGES = (
    "<p>Grüße aus Köln: eine Seite ohne erklärten Zeichensatz, in Latin-1 geschrieben.</p>".encode("latin-1") * 4,
    "<p>한국어 텍스트: 선언된 문자 집합이 없는 페이지입니다.</p>".encode("cp949") * 4,
    "<p>繁體中文網頁，沒有宣告字元集。這是一個測試頁面。</p>".encode("big5") * 4,
)


def warm_compiled() -> None:
    """Run every fingerprint kernel on ``PAGES`` (compiling it, or loading it from the cache)."""
    fper = Fingerprinter()
    for page in PAGES + UNDECLARED_PAGES:
        fper.fingerprint_html(page, compiled=True)
    hashes = hash64_many(["warm", "up"])
    simhash(hashes, np.array([1.0, 2.0]), compiled=True)


def warm_reference() -> None:
    """Fingerprint ``PAGES`` by the reference path: loads jieba's dictionary in
    rjieba and the decoders' tables, so the first real pages do not pay for it."""
    fper = Fingerprinter()
    for page in PAGES:
        fper.fingerprint_html(page, compiled=False)


jit.register("fingerprint", warm_compiled, reference=warm_reference)
