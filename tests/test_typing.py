"""The package ships ``py.typed``: mypy must pass over it as users' type checkers see it.

mypy does not follow setuptools' editable finder, so the test lays the installed
layout out of symbolic links (``scrapy_neardup/``, with ``crawler/`` and ``dedup/``
inside it, as in the wheel) and checks that, with the project's ``[tool.mypy]``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_mypy_passes_over_the_package(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the [test] extra")
    pkg = tmp_path / "scrapy_neardup"
    pkg.mkdir()
    for entry in (ROOT / "scrapy_neardup").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for part in ("crawler", "dedup"):
        (pkg / part).symlink_to(ROOT / part, target_is_directory=True)
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                        "--cache-dir", str(tmp_path / ".mypy_cache"), "-p", "scrapy_neardup"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
