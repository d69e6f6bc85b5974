"""The library stays a library: ``scrapy_neardup.dedup`` never imports scrapy or
twisted, and neither do the package's lazy re-exports of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_LOADED = 'sorted(m for m in sys.modules if m.split(".")[0] in ("scrapy", "twisted"))'


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_fingerprinting_and_the_store_import_neither_scrapy_nor_twisted(tmp_path):
    assert _run(f"""
        import sys
        import scrapy_neardup.dedup
        from scrapy_neardup.dedup import Fingerprinter, SimhashStore, jit
        from scrapy_neardup.dedup.fingerprint.jobs import fingerprint_job
        fp = Fingerprinter().fingerprint_html(b"<p>" + b"near duplicate detection for web crawling " * 5 + b"</p>")
        for compiled in (True, False):
            Fingerprinter().fingerprint_html("<p>网页去重 near duplicates</p>".encode() * 9, compiled=compiled)
        fingerprint_job(b"<p>x</p>", None, 15)
        with SimhashStore.open({str(tmp_path / 'store')!r}) as store:
            store.check_and_add(fp.value, "a")
            list(store.pairs())
        print({_LOADED})
    """) == "[]"


@pytest.mark.parametrize("statement", [
    "import scrapy_neardup.dedup",
    "from scrapy_neardup import Fingerprinter, SimhashStore, hamming, extract, __version__",
])
def test_the_package_and_its_re_exports_load_neither_scrapy_nor_twisted(statement):
    assert _run(f"import sys\n{statement}\nprint({_LOADED})") == "[]"


def test_the_add_ons_are_reached_through_the_package():
    out = _run("""
        import scrapy_neardup
        from scrapy_neardup.crawler.addon import NearDupAddon
        assert scrapy_neardup.NearDupAddon is NearDupAddon
        assert set(scrapy_neardup.__all__) <= set(dir(scrapy_neardup))
        for name in scrapy_neardup.__all__:
            getattr(scrapy_neardup, name)
        print("ok")
    """)
    assert out == "ok"


def test_an_unknown_name_is_an_attribute_error():
    import scrapy_neardup

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        scrapy_neardup.Nope  # noqa: B018
