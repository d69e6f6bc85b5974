"""The dedup command line, run as a real subprocess."""

from __future__ import annotations

import gzip
import subprocess
import sys

from tests.fixtures.pages import EN_PAGE
from tests.test_fingerprint import GOLDEN_EN


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dedup", *args], capture_output=True, text=True, timeout=120)


def test_fingerprint_lines(tmp_path):
    a = tmp_path / "a.html"
    a.write_bytes(EN_PAGE)
    g = tmp_path / "b.html.gz"
    g.write_bytes(gzip.compress(EN_PAGE))
    short = tmp_path / "short.html"
    short.write_bytes(b"<p>hi</p>")
    missing = tmp_path / "missing.html"
    r = run("fingerprint", str(a), str(g), str(short), str(missing))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"{GOLDEN_EN}\t{a}", f"{GOLDEN_EN}\t{g}", f"-\t{short}\ttoo_short",
        f"-\t{missing}\tunreadable: FileNotFoundError"]


def test_distance():
    r = run("distance", "00000000000000ff", "000000000000000f")
    assert (r.returncode, r.stdout) == (0, "4\n")
    assert run("distance", "xyz", "0").returncode == 2
