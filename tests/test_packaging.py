"""The distribution as packagers and users check it: ``python -m build`` makes an
sdist and, from it, a wheel (tests/fixtures/wheel.py); ``twine check`` passes;
the wheel installs one top-level package, ``scrapy_neardup``, with every module
of the repository's ``crawler/`` and ``dedup/`` folders; the version is one
number wherever it is written; the ``neardup`` command of the installed wheel
answers.
"""

from __future__ import annotations

import email
import email.message
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import scrapy_neardup
from tests.fixtures.wheel import Distributions, WheelVenv, distributions, wheel_venv  # noqa: F401 (fixtures)

# the README's introduction (before its first section) says which version it describes
README_VERSION = re.compile(r"\bversion (\d+\.\d+\.\d+)\b", re.IGNORECASE)
# files setuptools writes into an sdist, not copied from the checkout
SDIST_GENERATED = re.compile(r"PKG-INFO|setup\.cfg|[^/]+\.egg-info/.*")


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _sdist_files(sdist: Path) -> set[str]:
    """The sdist's file names, without its top directory ``scrapy_neardup-<version>/``."""
    with tarfile.open(sdist) as archive:
        return {PurePosixPath(*PurePosixPath(m.name).parts[1:]).as_posix() for m in archive.getmembers() if m.isfile()}


def _wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if not n.endswith("/")}


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def _package_modules(source: Path) -> set[str]:
    """What the wheel must hold under ``scrapy_neardup/``: the files of the
    checkout's ``scrapy_neardup/`` and every ``.py`` under ``crawler/`` and
    ``dedup/``, which install as ``scrapy_neardup.crawler`` and ``scrapy_neardup.dedup``."""
    expected = {f"scrapy_neardup/{name}" for name in _files(source / "scrapy_neardup")}
    for folder in ("crawler", "dedup"):
        expected |= {f"scrapy_neardup/{folder}/{name}" for name in _files(source / folder) if name.endswith(".py")}
    return expected | PACKAGE_DATA


# data files the package reads (and their licence), beside its modules
PACKAGE_DATA = {"scrapy_neardup/dedup/features/data/term_zipf.npz", "scrapy_neardup/dedup/features/data/README.md"}


def test_the_sdist_holds_the_sources_and_documents_and_no_checkout_litter(distributions: Distributions):
    files = _sdist_files(distributions.sdist)
    copied = {f for f in files if not SDIST_GENERATED.fullmatch(f)}
    # everything in it comes from the checkout's sources: no build/, .venv, out/, bytecode
    assert copied <= _files(distributions.source), sorted(copied - _files(distributions.source))
    assert {"README.md", "LICENSE", "pyproject.toml", "PKG-INFO"} <= files
    # and the documents the README points to
    documents = {f for f in _files(distributions.source)
                 if f in ("CHANGELOG.md", "BENCHMARKS.md") or (f.startswith("docs/") and f.endswith(".md"))}
    assert documents <= files, sorted(documents - files)
    assert {f for f in files if f.startswith(("crawler/", "dedup/", "scrapy_neardup/"))} == \
        {f for f in _files(distributions.source) if f.startswith(("crawler/", "dedup/", "scrapy_neardup/"))}
    # the test suite needs the repository's layout (scrapy.cfg, settings/): none of it, not a part
    assert not [f for f in files if f.startswith(("tests/", "bench/", "settings/", ".ci/", "scripts/"))]


def test_the_wheel_installs_one_package_with_every_module(distributions: Distributions):
    files = _wheel_files(distributions.wheel)
    version = _metadata(distributions.wheel)["Version"]
    assert {f.split("/")[0] for f in files} == {"scrapy_neardup", f"scrapy_neardup-{version}.dist-info"}
    package = {f for f in files if f.startswith("scrapy_neardup/")}
    expected = _package_modules(distributions.source)
    assert {"scrapy_neardup/__init__.py", "scrapy_neardup/__main__.py", "scrapy_neardup/py.typed",
            "scrapy_neardup/crawler/__init__.py", "scrapy_neardup/dedup/__init__.py"} <= expected
    # a sub-package missing from pyproject's package list shows here, whatever the checkout's build/ holds
    assert sorted(expected - package) == [], "modules the wheel leaves out"
    assert sorted(package - expected) == [], "files the wheel holds that are not the package's"
    dist_info = {f.split("/", 1)[1] for f in files - package}
    assert {"METADATA", "WHEEL", "RECORD", "entry_points.txt", "licenses/LICENSE",
            "licenses/dedup/features/data/README.md"} <= dist_info
    # the table in the wheel is the checkout's, byte for byte (its digest is in the scheme string)
    with zipfile.ZipFile(distributions.wheel) as archive:
        table = archive.read("scrapy_neardup/dedup/features/data/term_zipf.npz")
    assert table == (distributions.source / "dedup/features/data/term_zipf.npz").read_bytes()


def test_one_version_in_the_metadata_the_package_and_the_readme(distributions: Distributions):
    metadata = _metadata(distributions.wheel)
    assert metadata["Version"] == scrapy_neardup.__version__
    assert distributions.wheel.name.startswith(f"scrapy_neardup-{scrapy_neardup.__version__}-")
    assert distributions.sdist.name == f"scrapy_neardup-{scrapy_neardup.__version__}.tar.gz"
    readme = (distributions.source / "README.md").read_text(encoding="utf-8")
    introduction = readme.split("\n## ", 1)[0]
    stated = README_VERSION.search(introduction)
    assert stated, "the README's introduction does not say its version (e.g. 'Version 0.1.0')"
    assert stated.group(1) == scrapy_neardup.__version__
    # the README is the long description
    assert metadata["Description-Content-Type"].startswith("text/markdown")
    assert stated.group(0) in metadata.get_payload()


def test_twine_check_passes(distributions: Distributions):
    r = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(distributions.sdist),
                        str(distributions.wheel)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_metadata_names_the_framework_the_licence_the_extras_and_the_command(distributions: Distributions):
    metadata = _metadata(distributions.wheel)
    classifiers = metadata.get_all("Classifier", [])
    assert "Framework :: Scrapy" in classifiers
    assert "Typing :: Typed" in classifiers
    # the code is MIT, the word-frequency table it ships CC BY-SA 4.0 (wordfreq's data)
    assert metadata["License-Expression"] == "MIT AND CC-BY-SA-4.0"
    assert metadata.get_all("License-File") == ["LICENSE", "dedup/features/data/README.md"]
    requirements = metadata.get_all("Requires-Dist", [])
    assert 'wordfreq==3.1.1; extra == "table"' in requirements  # only to rebuild the table
    for extra in ("redis", "test", "bench", "table"):
        assert extra in metadata.get_all("Provides-Extra", [])
        assert any(f'extra == "{extra}"' in r for r in requirements), f"the [{extra}] extra requires nothing"
    assert any(r.startswith("scrapy>=") for r in requirements)
    with zipfile.ZipFile(distributions.wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(name).decode()
    assert re.search(r"^\[console_scripts\]\nneardup = scrapy_neardup\.crawler\.cli:main$", entry_points, re.M)


def test_the_installed_wheel_answers_as_neardup_and_is_not_the_checkout(wheel_venv: WheelVenv, tmp_path):
    env = wheel_venv.env()
    where = subprocess.run([str(wheel_venv.python), "-c",
                            "import importlib.util as u, scrapy_neardup\n"
                            "print(scrapy_neardup.__file__)\n"
                            "print(u.find_spec('crawler'), u.find_spec('dedup'))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    package_file, bare_names = where.stdout.splitlines()
    assert Path(package_file).is_relative_to(wheel_venv.site_packages), package_file
    assert bare_names == "None None", "the wheel installs a top-level crawler or dedup"

    # the console script pip wrote from the wheel's entry point, found on PATH as a user finds it
    assert shutil.which("neardup", path=env["PATH"]) == str(wheel_venv.bin / "neardup")
    usage = subprocess.run(["neardup", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0, usage.stderr
    assert "neardup crawl" in usage.stdout + usage.stderr
    scheme = subprocess.run(["neardup", "scheme"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert scheme.returncode == 0, scheme.stderr
    assert scheme.stdout.strip() == scrapy_neardup.Fingerprinter().scheme  # the checkout's code, the same scheme
