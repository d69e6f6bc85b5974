"""HTML bytes -> 64-bit simhash fingerprint, under a named scheme.

>>> fp = Fingerprinter()
>>> r = fp.fingerprint_html(b"<p>" + b"near duplicate detection for web crawling " * 5 + b"</p>")
>>> r.ok, len(r.hex)
(True, 16)
>>> Fingerprinter().fingerprint_html(b"<p>too short</p>").reason
'too_short'
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path


from .. import jit
from ..features import UNDETERMINED, FeatureParams, hashed_features, language_mask
from ..features.language import page_language_code, public_code
from ..features.term_table import table_digest
from ..simhash import FP_BITS, simhash, to_hex
from ..text import Page, extract
from ..text.plain import text_page
from ..text.binary_sniff import binary_kind
from ..text.hostile_scan import hostile_reason
from ..text.visible import OnDocument

#: Bump when extraction, tokenisation, features or hashing change output.
# v9: Thai, Lao, Khmer, Myanmar and Tibetan cut in character trigrams (v8: bigrams); CLD2's pseudo-languages
# (xx-Latn..., garbled text) are undetermined, mask 0
SCHEME_VERSION = 9
DEFAULT_MIN_TOKENS = 15


@dataclass(slots=True)
class Fingerprint:
    """Result of fingerprinting one document: ``value`` or a ``reason`` why not."""

    value: int | None
    reason: str | None = None
    title: str = ""
    text: str = ""
    n_tokens: int = 0
    page: Page | None = field(default=None, repr=False)
    #: the language of the page's prose (BCP 47: ISO 639-1 where there is one), or "und"; see
    #: ``features.language.public_code``
    language: str = UNDETERMINED

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def hex(self) -> str | None:
        return None if self.value is None else to_hex(self.value)


class Fingerprinter:
    """Turns pages into fingerprints. Stateless and deterministic: the same
    bytes and scheme always give the same fingerprint.

    The fingerprint is the simhash of the page's weighted features (``features``)
    XORed with the mask of its prose's language (``features.language``): pages in
    one language keep their distances, pages in two are as far apart as
    unrelated ones.

    ``min_tokens``: pages with fewer content+furniture tokens get no
    fingerprint (reason ``too_short``) rather than a near-constant value that
    would make every short page a duplicate of every other.
    """

    def __init__(self, params: FeatureParams = FeatureParams(), *, min_tokens: int = DEFAULT_MIN_TOKENS,
                 seed: int = 0, max_text_chars: int | None = None) -> None:
        if min_tokens < 1:
            raise ValueError("min_tokens must be >= 1")
        self.params = params
        self.min_tokens = min_tokens
        self.seed = seed
        #: visible text past which a page gets no fingerprint (``too_large``), its text kept; None: no bound
        #: (a crawl bounds a page's bytes before, ``NEARDUP_MAX_PAGE_BYTES``)
        self.max_text_chars = max_text_chars

    @property
    def scheme(self) -> str:
        """Identity of everything that shapes a fingerprint; stores record it."""
        return (f"neardup-v{SCHEME_VERSION};text=lexbor-visible;tok=jieba-dict+kana-bigram+trigram-fallback;"
                f"feat={self.params.tag};terms=wordfreq-3.1.1:{table_digest()};"
                f"{'lang=cld2;' if self.params.language else ''}"
                f"hash=mmh3x64s{self.seed};f={FP_BITS}")

    def fingerprint_page(self, page: Page, compiled: bool | None = None, *, language: str | None = None
                         ) -> Fingerprint:
        """``compiled``: the compiled features and simhash (True) or the reference
        path (False), which give the same fingerprint; None: as ``jit`` says.
        ``language``: the prose's language code (CLD2's, e.g. ``en``, ``zh``) when
        the caller knows it; None: detected from the prose."""
        if self.max_text_chars is not None and len(page.text) > self.max_text_chars:  # (the features cost most)
            return Fingerprint(None, "too_large", page.title, page.text, 0, page)
        if compiled is None:
            compiled = jit.ready("fingerprint")
        # the prose's language first: it chooses the term weights, and masks the fingerprint
        code = language or page_language_code(page, self.params)
        hashes, weights, n_tokens = hashed_features(page, self.params, self.seed, compiled, code)
        text = page.text
        if not text.strip():
            return Fingerprint(None, "empty", page.title, text, 0, page)
        if n_tokens < self.min_tokens or not hashes.size:
            return Fingerprint(None, "too_short", page.title, text, n_tokens, page)
        value = simhash(hashes, weights, compiled=compiled)
        language = public_code(code) if self.params.language else UNDETERMINED  # "und" for a pseudo-language
        return Fingerprint(value ^ language_mask(language, self.seed), None, page.title, text, n_tokens, page, language)

    def fingerprint_html(self, data: bytes, encoding: str | None = None,
                         compiled: bool | None = None, on_document: OnDocument | None = None, *,
                         no_budget: bool = False) -> Fingerprint:
        """Never raises on bad bytes: unparsable input gives reason
        ``unparsable``, a binary file (PDF, image, archive...) ``binary: KIND``,
        a page past a bound of the pre-parse scan (``text.hostile_scan``: an
        element of 200,000 attributes, millions of elements) ``hostile: WHY``,
        without parsing it. ``compiled`` as in ``fingerprint_page``;
        ``on_document`` as in ``text.extract`` (not called for such pages). ``no_budget``: nothing stops
        the parse if it runs long (the crawl's thread, not a worker): the scan is ``thorough``."""
        kind = binary_kind(data, encoding)
        if kind is not None:
            return Fingerprint(None, f"binary: {kind}")
        hostile = hostile_reason(data, thorough=no_budget, encoding=encoding)
        if hostile is not None:
            return Fingerprint(None, f"hostile: {hostile}")
        if compiled is None:
            compiled = jit.ready("fingerprint")
        try:
            page = extract(data, encoding, compiled, on_document)
        except MemoryError:  # not the page's fault: the process's (a worker's cap says so itself)
            raise
        except Exception as exc:  # parser/codec failures on hostile input
            return Fingerprint(None, f"unparsable: {type(exc).__name__}")
        return self.fingerprint_page(page, compiled)

    def fingerprint_text(self, text: str, title: str | None = None, language: str | None = None,
                         compiled: bool | None = None) -> Fingerprint:
        """Plain text (a corpus record's text field) under the same scheme: the
        same features and language mask as a page, on the blocks of
        ``text.plain.text_page`` (one per non-blank line). A page's visible text
        lands within a few bits of its HTML's fingerprint (docs/corpus.md gives
        the measured distances). ``language`` as in ``fingerprint_page``.
        O(len(text)), ~0.3 ms for a 5 kB article."""
        return self.fingerprint_page(text_page(text, title), compiled, language=language)

    def fingerprint_file(self, path: str | Path) -> Fingerprint:
        return self.fingerprint_html(read_document(path))


def read_document(path: str | Path) -> bytes:
    """Bytes of a file; ``.gz`` files are decompressed transparently."""
    p = Path(path)
    data = p.read_bytes()
    if p.suffix == ".gz" or data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data
