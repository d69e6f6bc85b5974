"""Where a report's inputs are, and reading them into aggregates.

``locate(path)`` finds the files of what ``path`` names: a crawl's directory
(``neardup crawl --out DIR``: ``DIR/index.sqlite3``, ``DIR/store/``,
``DIR/job``), a store directory (``NEARDUP_STORE``, or ``JOBDIR/neardup``), a
``JOBDIR``, a duplicates file, or a ``neardup dedup`` output directory
(``summary.json`` and ``duplicates.jsonl``, ``.parquet``, or the Spark job's ``duplicates/``). ``read(inputs)`` reads them,
read-only, into a ``CrawlData``: counts, histograms and the largest
clusters, never a list of every page, so that a report of 100,000 pages
stays small. Input that is not what it should be raises ``ReportInputError``
with a one-line message; a duplicates line that cannot be read is skipped
and counted (``CrawlData.skipped_lines``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..commands.common import crawl_out_of_jobdir
from ..counts import DROPPED, KEPT, RANGED_GET_STATS, REQUESTS_AVOIDED
from ..filter.captured_text import FILENAME as CAPTURED_FILENAME
from ..filter.captured_text import read_texts
from ..filter.runs_log import FILENAME as RUNS_FILENAME
from ..filter.runs_log import read_runs
from ..sqlite_files import INDEX, STORE, WrongFileError, columns_of, open_readonly

logger = logging.getLogger(__name__)

#: Clusters shown, and example pairs of each
TOP_CLUSTERS, PAIRS_PER_CLUSTER = 10, 3
#: Rows of the per-host and per-prefix tables
TOP_ROWS = 15


class ReportInputError(ValueError):
    """The path is not something a report can be made of; the message says why, in one line."""


@dataclass
class Inputs:
    """The files of one crawl (or one ``neardup dedup`` run); None: absent."""

    kind: str  # "crawl" or "dedup"
    where: str  # what the user named, for the title
    duplicates: Path | None = None
    index: Path | None = None
    rules: Path | str | None = None
    runs: Path | None = None
    captured: Path | None = None
    store: Path | None = None
    summary: Path | None = None
    #: the crawl's own stats (``NEARDUP_REPORT``: the crawl that writes the report), for what its
    #: files do not say when it has no runs file (no ``JOBDIR``)
    stats: dict[str, Any] | None = None


def _first(*candidates: Path) -> Path | None:
    return next((c for c in candidates if c.is_file()), None)


def _dir(candidate: Path) -> Path | None:
    return candidate if candidate.is_dir() else None


def _store_dir(d: Path, where: str, jobdir: Path | None = None) -> Inputs:
    """A store directory (also ``JOBDIR/neardup``): its duplicates file, rule
    book, capture and store, and the index a crawl writes beside them."""
    return Inputs("crawl", where, duplicates=_first(d / "duplicates.jsonl"), index=_first(d / "index.sqlite3"),
                  rules=_first(d / "url_rules.sqlite3"), captured=_first(d / CAPTURED_FILENAME),
                  store=_first(d / "store.sqlite3"),
                  runs=_first(d / RUNS_FILENAME, *([jobdir / "neardup" / RUNS_FILENAME] if jobdir else [])))


def locate(path: str | Path) -> Inputs:
    """The inputs ``path`` names (see the module docstring), or ``ReportInputError``."""
    p = Path(path)
    where = str(path)
    if "://" in where:  # (a Path would read "redis://h/0" as the directory "redis:/h/0")
        raise ReportInputError(f"{where} is a URL: the report reads a crawl's files (its --out directory, store "
                               f"directory, JOBDIR or duplicates file); a shared store's process keeps its "
                               f"duplicates file and index in its JOBDIR")
    if not p.exists():
        raise ReportInputError(f"{p}: no such file or directory")
    if p.is_file():
        if p.suffix not in (".jsonl", ".parquet"):
            raise ReportInputError(f"{p} is not a crawl's directory, store, JOBDIR or duplicates file "
                                   f"(.jsonl, or a neardup dedup output's .parquet)")
        if (p.parent / "summary.json").is_file():  # (a neardup dedup output's)
            return Inputs("dedup", where, duplicates=p, summary=p.parent / "summary.json")
        found = _store_dir(p.parent, where)
        found.duplicates = p
        return found
    # (neardup dedup's output: its duplicates as JSON lines, or as Parquet with --format parquet, or the Spark
    # job's directory of part files)
    if (p / "summary.json").is_file() and (dup := _first(p / "duplicates.jsonl", p / "duplicates.parquet")
                                           or _dir(p / "duplicates")):
        return Inputs("dedup", where, duplicates=dup, summary=p / "summary.json")
    if p.name == "duplicates" and (p.parent / "summary.json").is_file():  # (the Spark job's, named itself)
        return Inputs("dedup", where, duplicates=p, summary=p.parent / "summary.json")
    if (p / "store").is_dir() and ((p / "index.sqlite3").is_file() or (p / "store" / "duplicates.jsonl").is_file()):
        found = _store_dir(p / "store", where, jobdir=p / "job")
        found.index = _first(p / "index.sqlite3")
        return found
    if (p / "duplicates.jsonl").is_file() or (p / "store.sqlite3").is_file():
        return _store_dir(p, where)
    if (p / "neardup").is_dir() and ((p / "neardup" / "duplicates.jsonl").is_file()
                                     or (p / "neardup" / "store.sqlite3").is_file()):
        return _store_dir(p / "neardup", where)
    if (out := crawl_out_of_jobdir(p)) is not None:  # (neardup crawl's JOBDIR: the crawl is its --out)
        return locate(out)
    if (p / "neardup" / "runs.jsonl").is_file():
        raise ReportInputError(f"{p} is a JOBDIR whose store is elsewhere (NEARDUP_STORE): give the store's "
                               f"directory, or the crawl's --out directory")
    raise ReportInputError(f"{p} is not a crawl: no index.sqlite3, store/, duplicates.jsonl, neardup/ (a JOBDIR) "
                           f"nor summary.json (a neardup dedup output) in it")


# -- reading -------------------------------------------------------------------------

@dataclass
class Cluster:
    """A kept page and the pages dropped as its near-duplicates."""

    twin: str
    size: int = 0
    pairs: list[tuple[str, int]] = field(default_factory=list)  # (dropped URL, distance), the first few


@dataclass
class CrawlData:
    """What a report shows, aggregated."""

    inputs: Inputs
    dropped: int = 0
    avoided: int = 0
    kept: int | None = None  # pages kept: in the index with a fingerprint (None: no index)
    unchecked: int = 0  # pages in the index passed through unchecked (too short, not HTML...): no fingerprint
    fingerprints: int | None = None  # in the store
    #: the counts are the crawl's stats: it kept no duplicates file (nothing says which page each duplicated)
    counts_from_stats: bool = False
    distances: Counter[int] = field(default_factory=Counter)
    hosts: Counter[str] = field(default_factory=Counter)
    prefixes: Counter[str] = field(default_factory=Counter)
    avoided_by_rule: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)
    clusters: list[Cluster] = field(default_factory=list)
    cluster_count: int = 0
    # (seconds since the epoch) of each event, for the timeline
    kept_times: list[float] = field(default_factory=list)
    dropped_times: list[float] = field(default_factory=list)
    avoided_times: list[float] = field(default_factory=list)
    rules: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # a neardup dedup run's summary.json
    texts: dict[str, str] = field(default_factory=dict)  # URL -> visible text, for the clusters' pairs
    titles: dict[str, str] = field(default_factory=dict)  # URL -> title, of the clusters' kept pages
    skipped_lines: int = 0  # duplicates and runs lines that could not be read
    captured: bool = False  # a capture of dropped pages' text exists
    #: predicted copies confirmed by ranged GETs: ``RANGED_GET_STATS`` by their last part
    #: (``range_confirmed``...), over the runs that closed, or the crawl's own stats
    ranged: Counter[str] = field(default_factory=Counter)
    #: the duplicates file's lines of copies confirmed by a ranged GET (distinct URLs): what the report
    #: says of confirmation when no run closed with its counts and no stats were given
    confirmed_lines: int = 0

    @property
    def bytes_per_response(self) -> float | None:
        """Bytes downloaded per page fetched, over the runs that closed (None: unknown)."""
        closed = [r for r in self.runs if r["event"] == "close"]
        fetched = sum(int(r.get("fetched") or 0) for r in closed)
        got = sum(int(r.get("bytes_downloaded") or 0) for r in closed)
        return got / fetched if fetched else None

    @property
    def drops_known(self) -> bool:
        """Whether what was dropped is known: a duplicates file, or the crawl's stats (a store alone: not)."""
        return self.inputs.duplicates is not None or self.counts_from_stats


def _seconds(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def prefix_of(url: str) -> str:
    """The host and first path segment of a URL: what a site's sections share.

    >>> prefix_of("https://example.com/docs/a/b.html"), prefix_of("http://h/index.html"), prefix_of("doc-17")
    ('example.com/docs/', 'h/', 'doc-17')
    """
    parts = urlsplit(url)
    if not parts.netloc:
        return url.split("/")[0] + ("/" if "/" in url else "")
    first = parts.path.lstrip("/").split("/")
    return parts.netloc + "/" + (first[0] + "/" if len(first) > 1 else "")


def _source_file(source: Any) -> str:
    """What stands for the host of a corpus record named by its id: the input file it came from."""
    if isinstance(source, dict):  # (neardup dedup's {"file": ..., "line": ...})
        source = source.get("file")
    return str(source) if source else "(no host)"


def _records(path: Path) -> Iterator[dict[str, Any] | None]:
    """The duplicates file's records (``read_records``), its faults as ``ReportInputError``."""
    from scrapy_neardup.dedup.corpus.drops_file import read_records  # (here: the corpus package imports much)

    try:
        yield from read_records(path)
    except (OSError, ValueError) as exc:  # (ValueError: a damaged Parquet file, or no pyarrow to read it)
        raise ReportInputError(f"{path} cannot be read: {exc}") from None


def _read_duplicates(path: Path, data: CrawlData) -> None:
    """Aggregate the duplicates file (JSON lines or Parquet): one pass, memory by distinct twin. O(lines)."""
    members: dict[str, Cluster] = {}
    avoided: dict[str, tuple[str, float | None]] = {}  # URL -> (rule, time): its last line says avoided
    confirmed: set[str] = set()  # URLs confirmed as copies by a ranged GET
    lines = 0
    for record in _records(path):
        lines += 1
        try:
            if record is None:
                raise ValueError
            key = str(record.get("id") or record["url"])
            if record.get("requeued"):  # (requested after all: it withdraws the URL's avoided line)
                avoided.pop(key, None)
                continue
            twin = str(record["duplicate_of"])
        except (ValueError, KeyError):
            data.skipped_lines += 1
            continue
        when = _seconds(record["time"]) if "time" in record else None
        if record.get("avoided"):
            if record.get("confirmed"):  # (requested as a ranged GET: a body not downloaded, counted by the stats)
                avoided.pop(key, None)
                confirmed.add(key)
                continue
            avoided[key] = (str(record.get("rule")), when)
            continue
        data.dropped += 1
        try:
            data.distances[int(record.get("distance", -1))] += 1
        except (TypeError, ValueError):
            pass
        host = urlsplit(key).netloc
        data.hosts[host or _source_file(record.get("source"))] += 1
        if host:  # (a corpus record's id is no path: its file stands for its host, and it has no prefix)
            data.prefixes[prefix_of(key)] += 1
        if when is not None:
            data.dropped_times.append(when)
        cluster = members.get(twin)
        if cluster is None:
            cluster = members[twin] = Cluster(twin)
        cluster.size += 1
        if len(cluster.pairs) < PAIRS_PER_CLUSTER:
            cluster.pairs.append((key, int(record.get("distance") or 0)))
    data.avoided = len(avoided)  # (URLs never downloaded, as the crawl's neardup/requests_avoided counts them)
    data.confirmed_lines = len(confirmed)
    for rule, when in avoided.values():
        data.avoided_by_rule[rule] += 1
        if when is not None:
            data.avoided_times.append(when)
    data.avoided_times.sort()
    if lines and data.skipped_lines == lines:
        raise ReportInputError(f"{path} is not a duplicates file: none of its {lines} lines is a drop "
                               f"(JSON with url or id, and duplicate_of)")
    if data.skipped_lines:
        logger.warning("%s: skipped %d line(s) that are not drops (JSON with url or id, and duplicate_of)", path,
                       data.skipped_lines)
    data.cluster_count = len(members)
    data.clusters = sorted(members.values(), key=lambda c: (-c.size, c.twin))[:TOP_CLUSTERS]


@contextmanager
def _reading(path: Path | str) -> Iterator[None]:
    """Whatever keeps ``path`` from being read as the file it should be (another
    kind of file, a damaged one): a one-line ``ReportInputError`` naming it."""
    try:
        yield
    except WrongFileError as exc:
        raise ReportInputError(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise ReportInputError(f"{path} cannot be read: {exc}") from None


def _read_index(path: Path, data: CrawlData) -> None:
    with _reading(path), closing(open_readonly(path, INDEX)) as db:
        columns = columns_of(db, "pages")
        language = "language" if "language" in columns else "NULL"
        data.kept = 0
        for fetched_at, lang, fingerprint in db.execute(f"SELECT fetched_at, {language}, fingerprint FROM pages"):
            if not fingerprint:  # (passed through unchecked: not a page the filter kept, as the crawl counts)
                data.unchecked += 1
                continue
            data.kept += 1
            data.languages[lang or "unknown"] += 1
            when = _seconds(fetched_at)
            if when is not None:
                data.kept_times.append(when)
        twins = sorted({c.twin for c in data.clusters})
        if twins:
            marks = ",".join("?" * len(twins))
            for url, title, text in db.execute(f"SELECT url, title, text FROM pages WHERE url IN ({marks})", twins):
                data.texts[url] = text or ""
                data.titles[url] = title or ""


def _read_store(path: Path, data: CrawlData) -> None:
    with _reading(path), closing(open_readonly(path, STORE)) as db:
        data.fingerprints = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]


def _read_ranged(inputs: Inputs, data: CrawlData) -> None:
    """The ranged GETs' counts: summed over the runs that closed (each close line's
    ``ranged``), or, with no runs file, the crawl's own stats."""
    closed = [line for line in data.runs if line["event"] == "close"]
    if closed:
        for line in closed:
            ranged = line.get("ranged")
            if isinstance(ranged, dict):
                data.ranged.update({str(k): int(v) for k, v in ranged.items() if isinstance(v, (int, float))})
    elif inputs.stats:
        data.ranged.update({key.rsplit("/", 1)[1]: int(inputs.stats[key]) for key in RANGED_GET_STATS
                            if inputs.stats.get(key)})
    elif data.confirmed_lines:  # (no counts at all: the duplicates file's confirmed lines, said as such)
        data.ranged["range_confirmed"] = data.confirmed_lines


def read(inputs: Inputs) -> CrawlData:
    """Read what ``inputs`` names into a ``CrawlData`` (``ReportInputError``
    for a damaged file). O(duplicates lines + index rows)."""
    data = CrawlData(inputs)
    if inputs.duplicates is not None:
        _read_duplicates(inputs.duplicates, data)
    if inputs.index is not None:
        _read_index(inputs.index, data)
    if inputs.store is not None:
        _read_store(inputs.store, data)
    if inputs.summary is not None:
        try:
            summary = json.loads(inputs.summary.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ReportInputError(f"{inputs.summary} cannot be read as JSON: {exc}") from None
        if not isinstance(summary, dict):
            raise ReportInputError(f"{inputs.summary} is not a summary (a JSON object)")
        data.summary = summary
    if inputs.rules is not None:
        from ..url_rules.book import list_rules

        with _reading(inputs.rules):
            data.rules = list_rules(inputs.rules)
    if inputs.runs is not None:
        data.runs, bad = read_runs(inputs.runs)
        data.skipped_lines += bad
    _read_ranged(inputs, data)
    if inputs.duplicates is None and inputs.stats:
        # a crawl with no file of its drops (no JOBDIR, NEARDUP_STORE nor NEARDUP_DUPLICATES_FILE) writing its
        # own report: its stats say how many it dropped and avoided (it reported "nothing was dropped")
        data.counts_from_stats = True
        data.dropped = int(inputs.stats.get(DROPPED, 0))
        data.avoided = int(inputs.stats.get(REQUESTS_AVOIDED, 0))
        if data.kept is None:
            data.kept = int(inputs.stats.get(KEPT, 0))
    if inputs.captured is not None:
        data.captured = True
        wanted = {url for c in data.clusters for url, _ in c.pairs} | {c.twin for c in data.clusters}
        with _reading(inputs.captured):
            data.texts.update(read_texts(inputs.captured, wanted))
    return data
