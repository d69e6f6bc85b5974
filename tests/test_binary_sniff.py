"""Binary files are not fingerprinted as pages."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from scrapy_neardup.dedup import Fingerprinter
from scrapy_neardup.dedup.text.binary_sniff import binary_kind
from tests.conftest import shared_path
from tests.fixtures.pages import EN_PAGE, ZH_PAGE


def _png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", bytes([0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]))
            + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))


@pytest.mark.parametrize(("data", "kind"), [
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj", "pdf"),
    (_png(), "image"),
    (b"GIF89a\x01\x00\x01\x00\x80\x00\x00", "image"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "image"),
    (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image"),
    (b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00", "media"),
    (b"ID3\x04\x00\x00\x00\x00\x00\x00", "media"),
    (b"wOF2\x00\x01\x00\x00", "font"),
    (gzip.compress(b"<html><p>still compressed</p></html>"), "archive"),
    (b"PK\x03\x04\x14\x00\x06\x00", "archive"),
    (b"\x7fELF\x02\x01\x01\x00", "executable"),
    (random.Random(1).randbytes(4000), "data"),
    (b"SQLite format 3\x00\x10\x00\x01\x01\x00\x40\x20\x20" + bytes(80), "data"),
])
def test_binary_files_are_named(data, kind):
    assert binary_kind(data) == kind
    fp = Fingerprinter().fingerprint_html(data)
    assert (fp.value, fp.reason) == (None, f"binary: {kind}")


@pytest.mark.parametrize("data", [
    EN_PAGE, ZH_PAGE, b"", b"<p>a stray \x00 NUL and a \x01 in a page</p>" + b" text" * 50,
    "<p>UTF-16 with its BOM</p>".encode("utf-16"), "<p>UTF-32</p>".encode("utf-32"),
    b"ID3 of a page that starts with it", b"OTTO was here: a text page", b"true story",
])
def test_pages_are_not_binary(data):
    assert binary_kind(data) is None


def test_no_real_page_is_binary():
    root = shared_path()
    pages = list(root.glob("aeb/html/*.html.gz")) + list(root.glob("zh-cwced/original/*.html"))
    assert pages
    for p in pages:
        data = p.read_bytes()
        assert binary_kind(gzip.decompress(data) if p.suffix == ".gz" else data) is None, p.name


def test_utf16_declared_by_the_header_is_text():
    """A page in UTF-16 without a BOM, its charset in the Content-Type: half its bytes are NUL, and it was
    taken for binary data (passed unchecked). Declared outside the bytes, UTF-16 or UTF-32 is text, as a BOM."""
    from scrapy_neardup.dedup.fingerprint import Fingerprinter

    page = ("<html><head><title>Seite</title></head><body><p>" + " ".join(f"wort{i} haus garten" for i in range(40))
            + "</p></body></html>")
    for codec in ("utf-16-le", "utf-16-be"):
        data = page.encode(codec)
        assert binary_kind(data) == "data" and binary_kind(data, codec.replace("-le", "le").replace("-be", "be")) is None
        got = Fingerprinter().fingerprint_html(data, codec)
        assert got.value is not None and got.title == "Seite"
    assert binary_kind(b"%PDF-1.7 ...", "utf-16le") == "pdf"  # (a signature still says what it is)
