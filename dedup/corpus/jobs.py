"""A batch of raw records -> fingerprints, in a worker process (or in the run's own).

``fingerprint_batch`` parses each record (a JSON line, a Parquet row, an HTML
body) and fingerprints its text field (``Fingerprinter.fingerprint_text``) or
HTML field (``fingerprint_html``). It returns one small ``Outcome`` per
record, so that little crosses back from a worker: the JSON line itself is
never sent back (the run writes the bytes it read). Parsing here rather than
in the run keeps the run's own thread to reading, deciding and writing.

The worker processes are forked from the run after ``warm`` has loaded the
fingerprinter's dictionaries and tables and compiled its kernels, so the
workers share those pages with the run instead of each loading its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..fingerprint import Fingerprinter


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


def fingerprinter(min_tokens: int) -> Fingerprinter:
    fper = _STATE.get(min_tokens)
    if fper is None:
        fper = _STATE[min_tokens] = Fingerprinter(min_tokens=min_tokens)
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
        r = fper.fingerprint_html(html.encode() if isinstance(html, str) else html)
        if want_text:
            return Outcome(r.value, r.reason, None, _str(rid), _str(url), r.title, r.text)
    else:
        assert options.text_field is not None
        text = record.get(options.text_field)
        if not isinstance(text, str):
            return Outcome(None, None, f"no text in field {options.text_field!r}", _str(rid), _str(url))
        title = _field(record, options.title_field)
        language = _field(record, options.language_field)
        r = fper.fingerprint_text(text, title if isinstance(title, str) else None,
                                  language if isinstance(language, str) and language else None)
        if want_text:
            return Outcome(r.value, r.reason, None, _str(rid), _str(url), title if isinstance(title, str) else "", text)
    return Outcome(r.value, r.reason, None, _str(rid), _str(url))


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def fingerprint_batch(kind: str, options: FieldOptions, payloads: list[Any], want_text: bool = False) -> list[Outcome]:
    """Fingerprint a batch of raw records of one ``kind`` (``jsonl``: line
    bytes; ``parquet``: row dicts; ``html``/``warc``: HTML bytes). ``want_text``:
    JSON lines' outcomes carry their title and text too (HTML's always do)."""
    out: list[Outcome] = []
    for payload in payloads:
        if kind == "jsonl":
            try:
                record = json.loads(payload)
            except ValueError as exc:
                out.append(Outcome(None, None, f"malformed JSON: {exc}", None, None))
                continue
            out.append(fingerprint_record(record, options, want_text))
        elif kind == "parquet":
            out.append(fingerprint_record(payload, options, want_text))
        else:
            r = fingerprinter(options.min_tokens).fingerprint_html(payload)
            out.append(Outcome(r.value, r.reason, None, None, None, r.title, r.text))
    return out
