"""The library stays a library: ``dedup`` never imports scrapy or twisted."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_fingerprinting_and_the_store_import_neither_scrapy_nor_twisted(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        import dedup
        from dedup import Fingerprinter, SimhashStore, jit
        from dedup.fingerprint.jobs import fingerprint_job
        fp = Fingerprinter().fingerprint_html(b"<p>" + b"near duplicate detection for web crawling " * 5 + b"</p>")
        for compiled in (True, False):
            Fingerprinter().fingerprint_html("<p>网页去重 near duplicates</p>".encode() * 9, compiled=compiled)
        fingerprint_job(b"<p>x</p>", None, 15)
        with SimhashStore.open({str(tmp_path / 'store')!r}) as store:
            store.check_and_add(fp.value, "a")
            list(store.pairs())
        bad = sorted(m for m in sys.modules if m.split(".")[0] in ("scrapy", "twisted"))
        print(bad)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
