"""The documents a user looks things up in.

The README and ``docs/*.md`` together name every ``NEARDUP_*`` setting and every stat the crawler can
write (``neardup/...``, ``site/...``, and each count's stat in ``crawler/counts.py``); the README names
every public name of ``scrapy_neardup`` and links every document in ``docs/``; every relative link in
them, BENCHMARKS.md and CHANGELOG.md leads to a file that exists, and to a heading of it when the link
names one.

The example outputs are real: every ``console`` block that starts with ``$ neardup ...`` is run (the
command in a fresh interpreter, ``python -m scrapy_neardup``), and its output must be the one shown, up
to the demo site's port, the order of the drops and the bytes downloaded (the demo's other counts are
the same on every run; its bytes hold the ``Server`` header, which names the Python version). The demo
crawl runs once for the module (a few seconds with compiled kernels cached); the commands that read its
output (``neardup search out/demo/...``) run in its directory.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _code() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "crawler").rglob("*.py"))


def _documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _linked_documents() -> list[Path]:
    return [*_documents(), ROOT / "BENCHMARKS.md", ROOT / "CHANGELOG.md"]


def _reference() -> str:
    """What a user can read: the README and every document in docs/."""
    return "\n".join(p.read_text() for p in _documents())


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a ``# comment`` in a code block is no heading, and
    ``[x](y)`` in code is no link)."""
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING.findall(_prose(path.read_text())):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")  # GitHub numbers repeated headings
    return anchors


def _relative_links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_every_setting_is_documented():
    reference = _reference()
    settings = set(re.findall(r'"(NEARDUP_[A-Z_]+)"', _code()))
    assert settings
    assert not {s for s in settings if f"`{s}`" not in reference}, "settings neither README nor docs/ names"


# -- the stats the crawler can write ----------------------------------------------------------------

_STAT_WRITERS = {"inc_value", "set_value", "max_value", "min_value"}
_OUR_STAT = re.compile(r"(?:neardup|site)/[\w/]*")


def _modules() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted((ROOT / "crawler").rglob("*.py"))}


def _constants(modules: dict[Path, ast.Module]) -> dict[str, str]:
    """The crawler's module-level string constants by name (``FETCHED = "neardup/fetched"``), so that
    ``inc_value(counts.FETCHED)`` reads as the stat it writes."""
    found = {}
    for tree in modules.values():
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                found.update({target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)})
    return found


def _string(node: ast.AST, constants: dict[str, str]) -> str | None:
    """What the expression ``node`` is as a string: a literal, a constant by name (``FETCHED``,
    ``counts.FETCHED``), or an f-string up to its first unknown part, ``neardup/skipped/`` for
    ``f"{UNCHECKED}/{reason}"`` (a family of stats); None when it is none of these."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Attribute):
        return constants.get(node.attr)
    if isinstance(node, ast.JoinedStr):
        said = ""
        for part in node.values:
            known = _string(part.value if isinstance(part, ast.FormattedValue) else part, constants)
            if known is None:
                return said
            said += known
        return said
    return None


def _calls(tree: ast.Module, name: str) -> Iterator[ast.Call]:
    """The calls of a function or method called ``name``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and name in (getattr(node.func, "attr", None), getattr(node.func, "id", None)):
            yield node


def _members(modules: dict[Path, ast.Module], constants: dict[str, str]) -> dict[str, set[str]]:
    """The known members of the stat families the crawler writes with an f-string: the reasons a page
    passes through unchecked (``count_unchecked(stats, "unparsable")``, what ``unchecked_reason`` returns,
    the library's ``Fingerprint(None, "too_short")``), and the rule book's events (``events.append(("learned",
    ...))``)."""
    reasons, events = set(), set()
    for tree in modules.values():
        reasons |= {_string(call.args[1], constants) for call in _calls(tree, "count_unchecked") if len(call.args) > 1}
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef) and function.name == "unchecked_reason":
                reasons |= {_string(node.value, constants) for node in ast.walk(function)
                            if isinstance(node, ast.Return) and node.value is not None}
        for call in _calls(tree, "append"):
            if getattr(call.func, "value", None) is not None and getattr(call.func.value, "attr", None) == "events" \
                    and call.args and isinstance(call.args[0], ast.Tuple):
                events.add(_string(call.args[0].elts[0], constants))
    library = ast.parse((ROOT / "dedup" / "fingerprint" / "pipeline.py").read_text())
    reasons |= {(_string(call.args[1], constants) or "").split(":")[0] for call in _calls(library, "Fingerprint")
                if len(call.args) > 1}
    return {"neardup/skipped/": reasons - {None, ""}, "neardup/url_rules/": events - {None}}


def _stats_written() -> set[str]:
    """Every stat the crawler can write: each ``stats.inc_value/set_value/max_value(...)`` whose name it
    can read (a literal, a constant, an f-string: a family ends with ``/``, and its known members are
    added), every module-level constant that names a ``neardup/`` or ``site/`` stat, and every count's
    stat in ``crawler/counts.py`` ``STATS``."""
    modules = _modules()
    constants = _constants(modules)
    stats = {value for value in constants.values() if _OUR_STAT.fullmatch(value)}
    for tree in modules.values():
        for name in _STAT_WRITERS:
            stats |= {_string(call.args[0], constants) for call in _calls(tree, name) if call.args}
    counts = modules[ROOT / "crawler" / "counts.py"]
    table = next(node.value for node in counts.body if isinstance(node, ast.Assign)
                 and any(getattr(target, "id", None) == "STATS" for target in node.targets))
    assert isinstance(table, ast.Dict)
    stats |= {_string(value, constants) for value in table.values}
    for family, members in _members(modules, constants).items():
        stats |= {family + member for member in members}
    stats.discard(None)
    return {s for s in stats if s}


def test_the_stats_the_crawler_writes_are_all_found():
    """The search for stats reads constants, f-strings, families and ``STATS`` (or the check below
    would pass by finding too little)."""
    stats = _stats_written()
    assert {"neardup/fetched", "neardup/kept", "neardup/skipped", "neardup/skipped/", "neardup/skipped/too_short",
            "neardup/skipped/non_html", "neardup/skipped/store_unavailable", "neardup/skipped/binary",
            "neardup/url_rules/learned", "neardup/url_rules/retired", "neardup/distance_count/",
            "neardup/indexed", "neardup/frontier/given_up", "site/max_pages/discarded",
            "downloader/response_bytes"} <= stats
    assert len(stats) > 40


def _spelled_out(reference: str) -> str:
    """``reference`` with each stat written as a set (`` `scheduler/enqueued[/disk,/memory]` ``) also
    spelled out as its names (`` `scheduler/enqueued` ``, `` `scheduler/enqueued/disk` ``...)."""
    names = [f"`{stem}`" + "".join(f" `{stem}{tail.strip()}`" for tail in tails.split(","))
             for stem, tails in re.findall(r"`([\w/]+)\[([^\]`]+)\]`", reference)]
    return reference + "\n" + "\n".join(names)


def test_every_stat_is_documented():
    reference = _spelled_out(_reference())

    def documented(stat: str) -> bool:
        if stat.endswith("/"):  # a family: named as `family/<...>`, or by a member
            return f"`{stat}<" in reference or re.search(rf"`{re.escape(stat)}\w", reference) is not None
        family, _, last = stat.rpartition("/")  # by name, or as a member of a family: `family/<reason>` ... `last`
        return f"`{stat}`" in reference or (f"`{family}/<" in reference and f"`{last}`" in reference)

    assert not sorted(s for s in _stats_written() if not documented(s)), "stats neither README nor docs/ names"


def test_the_readme_lists_every_public_name():
    import scrapy_neardup  # the facade loads its names lazily: this imports neither scrapy nor twisted

    readme = README.read_text()
    assert not [n for n in scrapy_neardup.__all__ if not re.search(rf"\b{re.escape(n)}\b", readme)]


def test_every_document_in_docs_is_linked_from_the_readme():
    docs = sorted(DOCS.glob("*.md"))
    assert docs
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _relative_links(README)}
    assert not [p.name for p in docs if p.resolve() not in linked], "docs/ files the README does not link"


def test_every_relative_link_resolves():
    broken = []
    for doc in _linked_documents():
        for target in _relative_links(doc):
            file_part, _, anchor = target.partition("#")
            path = (doc.parent / file_part).resolve() if file_part else doc
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_anchor_of_a_heading_is_githubs():
    assert _slug("Crash safety: kill -9 at any moment") == "crash-safety-kill--9-at-any-moment"
    assert _slug("The library's commands") == "the-librarys-commands"
    assert _slug("Every pair within 3 bits, by J band") == "every-pair-within-3-bits-by-j-band"


# -- the example outputs, against real runs -----------------------------------------------------------

_CONSOLE = re.compile(r"^```console\n(.*?)^```", re.M | re.S)
_PORT = re.compile(r"127\.0\.0\.1:\d+")
_BYTES = re.compile(r"\b\d+ bytes downloaded\b")


def _examples() -> list[tuple[str, str, str]]:
    """``(document, command line, output shown)`` of every ``console`` block that shows ``$ neardup ...``."""
    found = []
    for doc in _documents():
        for block in _CONSOLE.findall(doc.read_text()):
            first, _, shown = block.partition("\n")
            if first.startswith("$ neardup"):
                found.append((doc.relative_to(ROOT).as_posix(), first[2:], shown))
    return found


def _neardup(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scrapy_neardup", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


class Demo(NamedTuple):
    run: subprocess.CompletedProcess
    directory: Path  # where it ran: its output is in out/demo/


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Demo:
    """``neardup crawl``, the demo, run once in a directory of its own."""
    directory = tmp_path_factory.mktemp("demo")
    run = _neardup(["crawl"], directory)
    assert run.returncode == 0, run.stderr[-3000:]
    return Demo(run, directory)


def _normalised(output: str) -> list[str]:
    """``output``'s lines with the demo site's port and the bytes downloaded made the same on every run,
    and the drops (a dropped URL's line, then its ``duplicates`` line) in one order."""
    lines = _BYTES.sub("N bytes downloaded", _PORT.sub("127.0.0.1:PORT", output)).rstrip("\n").split("\n")
    drops = [i for i, line in enumerate(lines) if line.startswith("    duplicates ")]
    if drops:
        first, last = drops[0] - 1, drops[-1] + 1
        pairs = sorted(tuple(lines[i - 1:i + 1]) for i in drops)
        lines[first:last] = [line for pair in pairs for line in pair]
    return lines


def test_the_documents_show_example_outputs():
    shown = {command.split()[1] for _, command, _ in _examples()}
    assert {"crawl", "--help", "scheme", "search"} <= shown


@pytest.mark.parametrize(("document", "command", "shown"), _examples(), ids=[f"{d}: {c}" for d, c, _ in _examples()])
def test_an_example_output_is_the_real_one(document, command, shown, request, tmp_path):
    args = shlex.split(command)[1:]
    if args == ["crawl"]:  # the demo (run once for the module)
        real = request.getfixturevalue("demo").run
    elif args[0] == "search" and args[1].startswith("out/demo/"):  # the demo's index
        real = _neardup(args, request.getfixturevalue("demo").directory)
    elif args[0] in ("--help", "--version", "scheme", "distance"):
        real = _neardup(args, tmp_path)
    else:
        pytest.fail(f"{document}: `$ {command}` is shown as a real run, but this test cannot run it: "
                    "show it in a ```bash block, or teach the test to run it")
    assert real.returncode == 0, real.stderr[-3000:]
    assert _normalised(shown) == _normalised(real.stdout), f"{document}: `$ {command}` prints something else now"
