"""Is it a binary file rather than a page? (PDF, image, archive, font, media)

A server that labels a PDF ``text/html``, or a PDF given to ``python -m
dedup fingerprint``, would otherwise be "parsed" into a fingerprint of noise
(and its noise indexed). The signatures are those of the WHATWG MIME
Sniffing Standard (images, audio and video, fonts, archives) and PDF's; a
resource without one is binary when at least 5% of its first 1,445 bytes
are binary data bytes (the standard's control characters: random bytes have
~10%, text almost none; a UTF-16 or UTF-32 BOM first makes it text).

>>> binary_kind(b"%PDF-1.7 ...")
'pdf'
>>> binary_kind(b"<!doctype html><p>hi</p>") is None
True
"""

from __future__ import annotations

import re

from .decode import is_wide

#: (regular expression over the first bytes, kind)
_SIGNATURES = tuple((re.compile(p, re.S), kind) for p, kind in (
    (rb"%PDF-", "pdf"),
    (rb"\x89PNG\r\n\x1a\n", "image"),
    (rb"GIF8[79]a", "image"),
    (rb"\xff\xd8\xff", "image"),
    (rb"RIFF....WEBP", "image"),
    (rb"\x00\x00[\x01\x02]\x00", "image"),  # ICO, CUR
    (rb"RIFF....(?:AVI |WAVE)", "media"),
    (rb"\x1aE\xdf\xa3", "media"),  # WebM / Matroska
    (rb"OggS\x00", "media"),
    (rb"ID3[\x02-\x04]\x00", "media"),
    (rb"fLaC", "media"),
    (rb"MThd\x00\x00\x00\x06", "media"),
    (rb"....ftyp", "media"),  # MP4 family
    (rb"(?:wOFF|wOF2|ttcf|\x00\x01\x00\x00)", "font"),  # (OpenType's "OTTO" and "true" could begin a text)
    (rb"\x1f\x8b\x08", "archive"),  # gzip (a body still compressed)
    (rb"PK\x03\x04", "archive"),  # zip, docx, xlsx, epub, jar
    (rb"Rar!\x1a\x07", "archive"),
    (rb"7z\xbc\xaf\x27\x1c", "archive"),
    (rb"\x7fELF", "executable"),
))
_BINARY_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0C, 0x0D, 0x1B))
_TEXT_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe", b"\x00\x00\xfe\xff")
_HEADER = 1445  # the MIME Sniffing Standard's resource header


def binary_kind(data: bytes, encoding: str | None = None) -> str | None:
    """``'pdf' 'image' 'media' 'font' 'archive' 'executable' 'data'`` or
    None for what may be a page. ``encoding``: the one declared outside the
    bytes (an HTTP header's charset): UTF-16 or UTF-32 declared there makes
    the bytes text as a BOM does (half of UTF-16's bytes are NUL). O(1): looks
    at the first 1,445 bytes.

    >>> binary_kind("<p>hi</p>".encode("utf-16-le")), binary_kind("<p>hi</p>".encode("utf-16-le"), "utf-16le")
    ('data', None)
    """
    head = data[:_HEADER]
    if head.startswith(_TEXT_BOMS):
        return None
    for pattern, kind in _SIGNATURES:
        if pattern.match(head):
            return kind
    if is_wide(encoding):
        return None
    if head and len(head) - len(head.translate(None, _BINARY_BYTES)) >= 0.05 * len(head):
        return "data"
    return None
