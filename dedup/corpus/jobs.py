"""A batch of raw records -> fingerprints, in a worker process (or in the run's own).

``fingerprint_batch`` parses each record (a JSON line, a Parquet row, an HTML
body) and fingerprints its text field (``Fingerprinter.fingerprint_text``) or
HTML field (``fingerprint_html``). It returns one small ``Outcome`` per
record, so that little crosses back from a worker: the JSON line itself is
never sent back (the run writes the bytes it read). Parsing here rather than
in the run keeps the run's own thread to reading, deciding and writing.

Exact copies are fingerprinted once per process: each result is remembered
by the digest of what was fingerprinted (``_Memo``: the text with its title
and language, or the HTML bytes), so a record repeated a million times costs
one fingerprint and a million digests (BLAKE2b, some GB/s) in each worker,
on one machine and in each Spark executor's Python worker alike.

The worker processes are forked from the run after ``warm`` has loaded the
fingerprinter's dictionaries and tables and compiled its kernels, so the
workers share those pages with the run instead of each loading its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from ..features.language import cld2_code_of
from ..fingerprint import Fingerprinter

logger = logging.getLogger(__name__)

#: Characters of a record's text (an HTML record's visible text) past which it gets no fingerprint
#: (``too_large`` in ``unfingerprinted``) and is kept, its text written: the features hold about 50 times a
#: text's size at their peak (a 50 MB record held 2.4 GB), and a worker the kernel killed for it stopped
#: every resume at that record. A crawl bounds a page's bytes instead (``NEARDUP_MAX_PAGE_BYTES``)
MAX_TEXT_CHARS = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FieldOptions:
    """Where a record keeps its text: ``text_field`` (plain text) or
    ``html_field`` (HTML), and optionally its id, title, URL and language."""

    text_field: str | None = "text"
    html_field: str | None = None
    id_field: str | None = None
    title_field: str | None = None
    url_field: str | None = None
    language_field: str | None = None
    min_tokens: int = 15


class Outcome(NamedTuple):
    """What a record came to: ``value`` (its fingerprint), or None with
    ``reason`` (too short, empty...); ``error`` when the record is bad input
    (malformed JSON, no such field). ``title``/``text``: only for records whose
    output line is made here (HTML files and WARC records)."""

    value: int | None
    reason: str | None
    error: str | None
    record_id: str | None
    url: str | None
    title: str = ""
    text: str = ""


_STATE: dict[int, Fingerprinter] = {}

#: a lone surrogate (``utf8``)
SURROGATE = re.compile("[\ud800-\udfff]")
#: how many results a process remembers (least recently used out first), and the text they may hold
MEMO_ENTRIES = 1 << 16
MEMO_TEXT_CHARS = 16 << 20


class _Memo:
    """Fingerprint results by content digest, least recently used out first.

    Bounded in entries and in the characters of the titles and texts held
    (an HTML record's outcome carries its visible text). A hit costs the
    digest (O(len(content))) and a dict look-up; ``hits`` and ``misses`` count."""

    def __init__(self, entries: int = MEMO_ENTRIES, text_chars: int = MEMO_TEXT_CHARS) -> None:
        self._items: OrderedDict[bytes, tuple[int | None, str | None, str, str]] = OrderedDict()
        self._entries, self._text_chars, self._held = entries, text_chars, 0
        self.hits = self.misses = 0

    @staticmethod
    def key(*parts: str | bytes | int | None) -> bytes:
        h = hashlib.blake2b(digest_size=16)
        for part in parts:  # each part with its kind and length: no two different tuples hash alike
            if part is None:
                h.update(b"N")
                continue
            data = part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogatepass")
            h.update(b"B" if isinstance(part, bytes) else b"S")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.digest()

    def get(self, key: bytes) -> tuple[int | None, str | None, str, str] | None:
        got = self._items.get(key)
        if got is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return got

    def put(self, key: bytes, value: tuple[int | None, str | None, str, str]) -> None:
        size = len(value[2]) + len(value[3])
        if size > self._text_chars // 4:  # one huge page does not push every other one out
            return
        self._items[key] = value
        self._held += size
        while len(self._items) > self._entries or self._held > self._text_chars:
            _, old = self._items.popitem(last=False)
            self._held -= len(old[2]) + len(old[3])

    def clear(self) -> None:
        self._items.clear()
        self._held = self.hits = self.misses = 0


_MEMO = _Memo()


def _fingerprint_html(fper: Fingerprinter, min_tokens: int, html: bytes,
                      encoding: str | None = None) -> tuple[int | None, str | None, str, str]:
    """(value, reason, title, visible text) of HTML bytes (in ``encoding``, else the one they declare
    or are detected in); an exact copy seen before is not parsed again."""
    key = _Memo.key("html", min_tokens, html, encoding)
    got = _MEMO.get(key)
    if got is None:
        r = fper.fingerprint_html(html, encoding)
        got = (r.value, r.reason, r.title, r.text)
        _MEMO.put(key, got)
    return got


def _fingerprint_text(fper: Fingerprinter, min_tokens: int, text: str, title: str | None,
                      language: str | None) -> tuple[int | None, str | None]:
    """(value, reason) of a text field; an exact copy (same title and language) seen before is not fingerprinted again."""
    key = _Memo.key("text", min_tokens, text, title, language)
    got = _MEMO.get(key)
    if got is None:
        r = fper.fingerprint_text(text, title, language)
        got = (r.value, r.reason, "", "")
        _MEMO.put(key, got)
    return got[0], got[1]


def fingerprinter(min_tokens: int) -> Fingerprinter:
    """This process's ``Fingerprinter`` for ``min_tokens``, bounded at ``MAX_TEXT_CHARS`` of text."""
    fper = _STATE.get(min_tokens)
    if fper is None:
        fper = _STATE[min_tokens] = Fingerprinter(min_tokens=min_tokens, max_text_chars=MAX_TEXT_CHARS)
    return fper


def warm(min_tokens: int) -> None:
    """Load what fingerprinting loads at its first pages (the segmenter's
    dictionary, the term tables of the common languages, the compiled kernels)
    in this process, before workers are forked from it."""
    from .. import jit

    # here (not in jit.warm_all's processes): the workers share the code. Only the fingerprinting kernels:
    # the workers use nothing else ("store": the run's process loads it after the fork, for its kept set;
    # not "batch": a run decides online against the kept set, it never self-joins)
    jit.warm("fingerprint")
    fper = fingerprinter(min_tokens)
    samples = ["near duplicate detection for web crawling and corpus building " * 4,
               "网页去重是搜索引擎和语料库建设中的一个重要问题，我们需要找到近似重复的文档。" * 3,
               "la détection des quasi-doublons pour les moteurs de recherche et les corpus " * 4]
    for text in samples:
        fper.fingerprint_text(text)
    fper.fingerprint_html(("<p>" + samples[0] + "</p>").encode())
    # every language's term weights (each built at its first page, ~5 ms and a few MB): built once here,
    # they are shared with every worker rather than built again in each
    from ..features.term_table import _table, term_hashes

    for lang in _table()[0]:
        term_hashes(lang, fper.params.zipf_knee, fper.seed)


def _field(record: dict[str, Any], name: str | None) -> Any:
    return None if name is None else record.get(name)


def fingerprint_record(record: Any, options: FieldOptions, want_text: bool = False) -> Outcome:
    """One parsed record (a JSON object or a Parquet row). ``want_text``: the
    outcome carries the record's title and (visible) text, for an output that
    is made of them (``--format parquet``)."""
    if not isinstance(record, dict):
        return Outcome(None, None, "not a JSON object", None, None)
    rid = _field(record, options.id_field)
    if options.id_field is not None and rid is None:
        return Outcome(None, None, f"no field {options.id_field!r}", None, None)
    url = _field(record, options.url_field)
    fper = fingerprinter(options.min_tokens)
    if options.html_field is not None:
        html = record.get(options.html_field)
        if not isinstance(html, (str, bytes)):
            return Outcome(None, None, f"no text in field {options.html_field!r}", _str(rid), _str(url))
        # a JSON string is text already: its bytes are our UTF-8, whatever charset its <meta> names
        # (the page's bytes were decoded once, before they were stored as a string)
        value, reason, page_title, page_text = _fingerprint_html(
            fper, options.min_tokens, *((utf8(html), "utf-8") if isinstance(html, str) else (html, None)))
        if want_text:
            return Outcome(value, reason, None, _str(rid), _str(url), page_title, page_text)
    else:
        assert options.text_field is not None
        text = record.get(options.text_field)
        if not isinstance(text, str):
            return Outcome(None, None, f"no text in field {options.text_field!r}", _str(rid), _str(url))
        title = _field(record, options.title_field)
        value, reason = _fingerprint_text(fper, options.min_tokens, text, title if isinstance(title, str) else None,
                                          _language(_field(record, options.language_field), options.language_field))
        if want_text:
            return Outcome(value, reason, None, _str(rid), _str(url), title if isinstance(title, str) else "", text)
    return Outcome(value, reason, None, _str(rid), _str(url))


def _language(value: Any, field_name: str | None) -> str | None:
    """The CLD2 code a record's ``--language-field`` names (``features.language.cld2_code_of``: ``EN``,
    ``en_US`` and ``English`` are ``en``, so two spellings of one language give one fingerprint), or None:
    the language is then read from the text, as without the field. A value that names no language CLD2
    knows is said once per process (each spelling had given its own fingerprint, silently)."""
    if not isinstance(value, str) or not value.strip():
        return None
    code = cld2_code_of(value)
    if code is None and value not in _UNKNOWN_LANGUAGES and len(_UNKNOWN_LANGUAGES) < 100:
        _UNKNOWN_LANGUAGES.add(value)
        logger.warning("%s %r names no language CLD2 knows (a code such as en, zh-Hant, or a name such as "
                       "English): such records' language is read from their text", field_name, value)
    return code


_UNKNOWN_LANGUAGES: set[str] = set()


def utf8(text: str) -> bytes:
    """``text`` in UTF-8, a lone surrogate (which a JSON string may escape, and UTF-8 cannot hold) as
    U+FFFD, the replacement character, as a browser decodes one."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return SURROGATE.sub("\ufffd", text).encode()


def _str(value: Any) -> str | None:
    """A record's id or URL as the text the outputs name it by: a string as it is, a number as JSON
    writes it, and a JSON object, array or boolean as its JSON text (``{"a": 1}``, ``true``; Python's
    ``repr``, ``{'a': 1}`` and ``True``, named no record as its input has it)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple, bool)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _int(digits: str) -> int | Decimal:
    """A JSON integer as Python reads it, or a ``Decimal`` past the digits Python converts to an
    ``int`` (``sys.get_int_max_str_digits``, 4,300 by default, a guard against slow conversions):
    valid JSON, which must not cost its line for a field nobody reads."""
    limit = sys.get_int_max_str_digits()
    return int(digits) if not limit or len(digits) <= limit else Decimal(digits)


def load_line(payload: bytes | str) -> Any:
    """One JSON line's value. ``ValueError`` (``RecursionError`` for nesting deeper than Python's
    parser goes) when it is not JSON. O(the line); an integer of thousands of digits is read again
    as a ``Decimal`` (``_int``), so only lines that hold one pay for it."""
    try:
        return json.loads(payload)
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        return json.loads(payload, parse_int=_int)


def fingerprint_batch(kind: str, options: FieldOptions, payloads: list[Any], want_text: bool = False) -> list[Outcome]:
    """Fingerprint a batch of raw records of one ``kind`` (``jsonl``: line
    bytes; ``parquet``: row dicts; ``html``/``warc``: HTML bytes). ``want_text``:
    JSON lines' outcomes carry their title and text too (HTML's always do)."""
    out: list[Outcome] = []
    for payload in payloads:
        if kind == "jsonl":
            try:
                record = load_line(payload)
            except ValueError as exc:
                out.append(Outcome(None, None, f"malformed JSON: {exc}", None, None))
                continue
            except RecursionError:  # (valid JSON nested deeper than Python's parser goes)
                out.append(Outcome(None, None, "malformed JSON: nested too deeply", None, None))
                continue
            out.append(fingerprint_record(record, options, want_text))
        elif kind == "parquet":
            out.append(fingerprint_record(payload, options, want_text))
        else:
            value, reason, title, text = _fingerprint_html(fingerprinter(options.min_tokens), options.min_tokens,
                                                           payload)
            out.append(Outcome(value, reason, None, None, None, title, text))
    return out
