"""The compiled word path (``hashed_features`` via ``word_kernel``) against the
reference (``feature_vector`` + ``feature_hashes``), murmur against mmh3, and
the Page/Block round trip."""

from __future__ import annotations

import gzip
import tarfile

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_neardup.dedup.features import FeatureParams, feature_vector, hashed_features, page_plan
from scrapy_neardup.dedup.features.murmur import hash64_many
from scrapy_neardup.dedup.features import feature_hashes
from scrapy_neardup.dedup.text import Block, Page, extract
from scrapy_neardup.dedup import jit
from tests.conftest import shared_path

PARAMS = [FeatureParams(), FeatureParams(tf_power=0.5, zipf_knee=4.0, max_share=0.0),
          FeatureParams(number_weight=0.0, furniture_weight=0.7, short_block_tokens=0),
          FeatureParams(zipf_knee=9.0, language=False)]


def _same(page: Page, params: FeatureParams, seed: int = 0) -> None:
    names, weights, n = feature_vector(page, params)
    hashes, weights2, n2 = hashed_features(page, params, seed)
    assert n == n2
    assert np.array_equal(feature_hashes(names, seed), hashes)
    assert np.array_equal(weights, weights2)  # bit for bit: the same float operations


WORDS = ["the", "of", "and", "Crawler", "我们", "中出了", "一个叛徒", "的", "网页去重", "々", "〇", "㐀", "𤨒晶", "，", "！", "near", "duplicate", "2024", "v2", "a1b2", "x_y", "café", "ÉCOLE", "straße",
         "ﬁne", "Ｆｕｌｌ", "١٢٣", "x²", "Москва", "δέλτα", "😀", "𝐀𝐁", "한국어", "中文", "かな", "e\u0301", "ǅ", "İ",
         "-", "...", "…", "a…b", "’", "\u00a0", "\u3000",
         # scripts without spaces (bigrams), marks, digits of other scripts, NFKC compositions
         "สวัสดี", "๑๒", "ភាសាខ្មែរ", "ລາວ", "မြန်မာ", "བོད", "カー", "か\u3099", "ﾃｽﾄ", "ひらがな日本語", "नमस्ते", "\u0301x",
         "ᄀ\u1161", "Ⅻ", "①",
         # trigram scripts: runs of one and two characters, Thai digits, kana and Thai run together
         "ก", "ลา", "ก๑", "かなสวัส", "สวัสดีカタカナ", "ລາວສວັດດີ",
         # one-character compatibility mappings read in place (and their compositions, which are not)
         "ｶﾞ", "º1", "\u212b", "Ａ\u0301", "ⓒ2024", "ﻥ", "㉑"]


@st.composite
def pages(draw):
    blocks = []
    for _ in range(draw(st.integers(0, 8))):
        words = draw(st.lists(st.sampled_from(WORDS), max_size=40))
        text = " ".join(words)
        blocks.append(Block(text, link_chars=draw(st.integers(0, 5)), furniture=draw(st.booleans()),
                            code_chars=draw(st.sampled_from([0, len(text)]))))
    return Page(draw(st.sampled_from(["", "Title - Site", "A | B | C"])), blocks)


@settings(max_examples=300, deadline=None)
@given(pages(), st.sampled_from(PARAMS), st.sampled_from([0, 1, 2**32 - 1]))
def test_compiled_words_equal_the_reference_on_generated_pages(page, params, seed):
    _same(page, params, seed)


def test_compiled_words_equal_the_reference_on_real_pages():
    root = shared_path("aeb")
    docs = [gzip.decompress(p.read_bytes()) for p in sorted((root / "html").glob("*.html.gz"))[:60]]
    docs += [p.read_bytes() for p in sorted((shared_path("zh-cwced") / "original").glob("*.html"))]
    with tarfile.open(shared_path("sites") / "sqlite3-doc.tar.gz") as tf:
        docs += [tf.extractfile(m).read() for m in tf if m.name.endswith(".html")][:100]
    for data in docs:
        page = extract(data)
        for params in PARAMS:
            _same(page, params)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=50), st.integers(0, 2**32 - 1))
def test_murmur_equals_mmh3(strings, seed):
    got = hash64_many(strings, seed)
    assert [int(x) for x in got] == [mmh3.hash64(s, seed, signed=False)[0] for s in strings]


def test_page_rows_and_blocks_round_trip():
    blocks = [Block("Home About", 10, True), Block("Body text 中文字", 0, False), Block("x", 1, False)]
    page = Page("T", blocks)
    assert page.text == "Home About\nBody text 中文字\nx"
    assert page.rows.tolist() == [[0, 10, 1, 10, 2, 0, 0], [11, 24, 0, 0, 3, 3, 0], [25, 26, 0, 1, 1, 0, 0]]
    again = Page("T", encoding="utf-8", text=page.text, rows=page.rows).blocks
    assert [(b.text, b.link_chars, b.furniture, b.n_words, b.n_han) for b in again] == [
        ("Home About", 10, True, 2, 0), ("Body text 中文字", 0, False, 3, 3), ("x", 1, False, 1, 0)]


def test_scan_rows_match_their_blocks():
    page = extract("<nav><a href=/>Home</a></nav><p>Some 中文 text, <a href=/x>a link</a>.</p>".encode())
    for b, (start, end, *_rest) in zip(page.blocks, page.rows.tolist()):
        assert page.text[start:end] == b.text
        assert b.n_words == len(b.text.split())


@pytest.mark.parametrize("runs", [1, 2])
def test_warmup_runs_every_kernel(runs):
    for _ in range(runs):
        for group in jit.GROUPS:
            assert jit.warm(group) >= 0


def test_a_process_that_exits_during_a_background_warmup_lets_it_end_first(tmp_path):
    """A crawl that finishes while its warm-up thread is still loading kernels: the
    interpreter's exit waits for that thread (a daemon thread still in numba's LLVM code
    when Python finalizes is ended with pthread_exit, which can abort the process with
    "terminate called without an active exception"); groups not begun are skipped."""
    import subprocess
    import sys

    done = tmp_path / "waited"
    code = (f"import time, pathlib\nfrom scrapy_neardup.dedup import jit\njit.defer()\n"
            f"jit.warm_in_background(('store',), wait=lambda: (time.sleep(1.0), pathlib.Path({str(done)!r}).touch()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert done.exists()  # (the exit waited for the thread's wait, then it began no group)
    # a wait that would last long (a crawl's wait for its workers to fill the cache) watches
    # exiting() and returns at the exit, which then does not wait it out
    code = ("import time\nfrom scrapy_neardup.dedup import jit\njit.defer()\n"
            "def wait():\n    t = time.monotonic() + 600\n"
            "    while time.monotonic() < t and not jit.exiting():\n        time.sleep(0.05)\n"
            "jit.warm_in_background(('store',), wait=wait)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_warmup_that_fails_because_the_interpreter_exits_logs_no_error():
    """At the exit, Python's finalizers (``weakref.finalize``: a ``TemporaryDirectory``'s cleanup, the store
    warm-up's snapshot directory) may run before the exit waits for the warm-up thread, which then fails on
    files that are gone: that is the exit, not a kernel that could not compile, and is said at DEBUG only
    (it was a traceback at ERROR, seen at the end of a test run). A failure before the exit still is one."""
    import subprocess
    import sys

    code = ("import logging\nfrom scrapy_neardup.dedup import jit\n"
            "logging.basicConfig(level=logging.INFO)\n"
            "def gone():\n    jit._exiting.set()\n    raise FileNotFoundError('its temporary directory is gone')\n"
            "jit.warm = lambda group: gone()\n"
            "jit.warm_in_background(('store',)).join()\n"
            "jit._exiting.clear()\n"
            "def broken():\n    raise RuntimeError('LLVM said no')\n"
            "jit.warm = lambda group: broken()\n"
            "jit.warm_in_background(('store',)).join()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "its temporary directory is gone" not in r.stderr, r.stderr[-2000:]
    assert "could not compile the store kernels" in r.stderr and "LLVM said no" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("words, straight", [
    ("Crawler café ÉCOLE Москва δέλτα 2024 the of", True),   # NFKC, casefold keeps the length: page text as is
    ("wait… and…see x…y", True),                              # "…" is not NFKC ("..."), but only separates words
    ("Straße İstanbul crawler", True),                         # casefold lengthens ß and İ: offsets moved
    ("ﬁne Ｆｕｌｌ crawler", True),                              # ﬁ -> fi (longer), Ｆ -> F (in place)
    ("Crawler™ Ⅱ ½ cup ﺃﻫﻼ Straße™", True),                     # NFKC longer or composed, then casefold longer
    ("cafe\u0301 crawler", False),                            # NFKC composes two characters: joined texts
    ("网页去重，我们！ 〇 々 crawler\u3000ok", True),          # full-width punctuation and U+3000: separators either way
])
def test_both_compiled_routes_equal_the_reference(words, straight):
    from scrapy_neardup.dedup.features.weights import _page_spans

    blocks = [Block(" ".join([words] * 8)), Block("Menu Home " + words, 10, True), Block("short " + words)]
    page = Page("Title – Site | Section", blocks)
    assert (_page_spans(page, FeatureParams()) is not None) == straight
    for params in PARAMS:
        _same(page, params)


def test_chinese_pages_take_the_compiled_path():
    from scrapy_neardup.dedup.features.weights import _page_spans

    pages = [extract(p.read_bytes()) for p in sorted((shared_path("zh-cwced") / "original").glob("*.html"))]
    straight = [page for page in pages if _page_spans(page, FeatureParams()) is not None]
    # most Chinese pages are NFKC but for full-width punctuation: their own text is read
    assert len(straight) >= len(pages) // 2


@pytest.mark.parametrize("text", ["日本語のテキストです。ひらがなとカタカナ", "ภาษาไทย ๑๒๓ ทดสอบ", "नमस्ते दुनिया café",
                                  "𤨒晶 𠀀𠀁 emoji 😀 𝐀𝐁 math", "字\U000E0100 variation"])
def test_other_scripts_read_straight_from_the_page_text(text):
    from scrapy_neardup.dedup.features.weights import _page_spans

    page = Page("", [Block(" ".join([text] * 10))])
    assert _page_spans(page, FeatureParams()) is not None or "𝐀" in text  # (𝐀: NFKC makes it A)
    for params in PARAMS:
        _same(page, params)


def _plan_reference(rows, cutoff, short_block_tokens, listing_prose_tokens):
    """The block plan block by block, in Python integers: the oracle of the numpy ``_block_plan``."""
    kinds = []  # 0 long, 1 furniture, 2 short, 3 listing
    long_tokens = short_tokens = 0
    for start, end, furniture, link, words, han, code in rows.tolist():
        if furniture or link > cutoff * (end - start):
            kinds.append(1)
            continue
        if code / (end - start) > 0.5 if end > start else False:
            kinds.append(3)
            continue
        tokens10 = 10 * words + 6 * han
        if short_block_tokens and tokens10 < 10 * short_block_tokens:
            kinds.append(2)
            short_tokens += tokens10
        else:
            kinds.append(0)
            long_tokens += tokens10
    content = [i for i, k in enumerate(kinds) if k == 0]
    furn = [i for i, k in enumerate(kinds) if k == 1]
    shorts = [i for i, k in enumerate(kinds) if k == 2]
    listings = [i for i, k in enumerate(kinds) if k == 3]
    prose = [i for i, k in enumerate(kinds) if k in (0, 2)]
    if short_block_tokens and long_tokens >= short_tokens:
        furn += shorts
    else:
        content += shorts
    if listing_prose_tokens and long_tokens + short_tokens >= 10 * listing_prose_tokens:
        furn += listings
    else:
        content += listings
    return np.array(content), np.array(furn), np.array(prose)


def test_block_plan_equals_the_row_by_row_reference():
    from scrapy_neardup.dedup.features.blocks import _block_plan

    rng = np.random.default_rng(5)
    for _ in range(2000):
        n = int(rng.integers(0, 30))
        rows = np.zeros((n, 7), dtype=np.int64)
        rows[:, 0] = rng.integers(0, 100, n)
        rows[:, 1] = rows[:, 0] + rng.integers(0, 200, n)
        rows[:, 2] = rng.integers(0, 2, n) * (rng.random(n) < 0.3)
        rows[:, 3] = rng.integers(0, 200, n)
        rows[:, 4] = rng.integers(0, 60, n)
        rows[:, 5] = rng.integers(0, 60, n)
        rows[:, 6] = (rows[:, 1] - rows[:, 0]) * rng.integers(0, 3, n) // 2 * (rng.random(n) < 0.4)
        cutoff, sbt, lpt = float(rng.choice([0.0, 0.3, 0.5, 1.0])), int(rng.choice([0, 5, 20])), int(rng.choice([0, 40]))
        got, want = _block_plan(rows, cutoff, sbt, lpt), _plan_reference(rows, cutoff, sbt, lpt)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]


def test_listings_are_furniture_beside_prose_and_content_without_it():
    prose = " ".join(WORDS[i % len(WORDS)] for i in range(60))
    listing = "sudo apt-get install foo && systemctl restart foo " * 20
    page = extract(f"<p>{prose}</p><pre>{listing}</pre>".encode())
    assert page.blocks[1].code_density == 1.0
    content, furniture, _, _ = page_plan(page, FeatureParams())
    assert content.tolist() == [0] and furniture.tolist() == [1]
    assert page_plan(page, FeatureParams(listing_prose_tokens=0))[0].tolist() == [0, 1]
    only = extract(f"<p>Source of foo.c</p><pre>{listing}</pre>".encode())  # mostly listing: its content
    assert only.rows[:, 6].tolist()[1] > 0 and 1 in page_plan(only, FeatureParams())[0].tolist()


def test_compiled_words_equal_the_reference_in_a_language_the_table_lacks():
    """Thai: trigrams, and every token counted once (no term table), on both paths."""
    text = "ระบบติดตั้งจะแบ่งพาร์ติชันของดิสก์ก่อน แล้วจึงติดตั้งระบบลงในเครื่องของคุณ ๒๐๒๔ かなสวัส ก ลา " * 6
    page = extract(f"<html><body><nav>หน้าแรก ข่าว</nav><p>{text}</p></body></html>".encode())
    for params in PARAMS:
        _same(page, params)
    names, weights, _ = feature_vector(page)
    assert "ระบ" in names and max(weights) <= 1.0


def test_compiling_the_kernels_does_not_log_numbas_debug_lines(monkeypatch):
    """A crawl logs at DEBUG (Scrapy's default); numba's compiler logs each step at DEBUG: a crawl that
    compiled the kernels in its own process logged ~460,000 lines of it. Unless its level was set."""
    import logging

    from scrapy_neardup.dedup import jit

    numba_logger = logging.getLogger("numba")
    monkeypatch.setattr(numba_logger, "level", logging.NOTSET)
    monkeypatch.setattr(jit, "_warmed", set())
    monkeypatch.setattr(jit, "_warmups", {"store": jit.Warmup(lambda: None)})
    monkeypatch.setattr(jit, "_ready", dict(jit._ready))
    jit.warm("store")
    assert numba_logger.getEffectiveLevel() == logging.INFO
    monkeypatch.setattr(numba_logger, "level", logging.DEBUG)  # a level the user set stays
    monkeypatch.setattr(jit, "_warmed", set())
    jit.warm("store")
    assert numba_logger.level == logging.DEBUG
