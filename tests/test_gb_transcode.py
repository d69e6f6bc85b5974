"""GB18030 -> UTF-8 in one compiled pass equals Python's codec, or declines."""

from __future__ import annotations

import random

from w3lib.encoding import to_unicode

from dedup.gb_transcode import gb_to_utf8
from tests.conftest import shared_path


def _codec(data: bytes) -> bytes:
    return to_unicode(data, "gb18030").encode("utf-8", "surrogatepass")


def test_random_bytes():
    rng = random.Random(3)
    accepted = 0
    for _ in range(20000):
        data = bytes(rng.choice([rng.randrange(256), rng.randrange(0x81, 0xFF), rng.randrange(0x40, 0xFF), 65])
                     for _ in range(rng.randrange(1, 30)))
        got = gb_to_utf8(data)
        if got is not None:
            accepted += 1
            assert got == _codec(data), data
    assert accepted > 5000


def test_every_two_byte_code():
    for lead in range(0x81, 0xFF):
        data = b"".join(bytes((lead, t)) for t in range(0x40, 0xFF) if t != 0x7F)
        got = gb_to_utf8(data)
        assert got is None or got == _codec(data)


def test_real_gbk_pages():
    transcoded = 0
    for path in sorted(shared_path("zh-cwced", "original").glob("*.html")):
        data = path.read_bytes()
        got = gb_to_utf8(data)
        if got is not None:
            transcoded += 1
            assert got == _codec(data), path
    assert transcoded >= 40
