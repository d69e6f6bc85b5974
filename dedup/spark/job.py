"""Corpus deduplication on Spark: ``run`` and the script ``spark-submit`` runs.

The steps (docs/spark.md):

1. read JSON lines in input order (``reader``: each record's ``pos``);
2. fingerprint the text in the executors with the one-machine scheme (each
   partition checks its ``Fingerprinter.scheme`` against the driver's);
3. collapse exact copies: each fingerprint's first record (smallest pos)
   stands for it;
4. the pairs among distinct fingerprints (``pairs``: the permuted tables as
   a partitioned join);
5. the greedy decision per connected component (``components``), then each
   copy follows its first record: dropped as its copy if that was kept, else
   with the same twin;
6. write ``unique`` (the kept lines as they came, in input order),
   ``duplicates`` (one JSON line per drop, naming its kept twin) and
   ``summary.json``.

Records with no fingerprint (too short, empty) are kept unchecked, as the
crawl lets such a page through; malformed lines and lines without the text
field are skipped and counted.

As a script::

    spark-submit --master local[2] "$(python -c 'import scrapy_neardup.dedup.spark.job as j; print(j.__file__)')" \\
        INPUT... -o OUT
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)


def fingerprint_text(fingerprinter: Any, text: str) -> Any:
    """The one-machine text entry point (``Fingerprinter.fingerprint_text``)
    when the installed package has it; else the text's lines as the blocks of
    a page, through ``fingerprint_page`` (same features, weights and mask)."""
    entry = getattr(fingerprinter, "fingerprint_text", None)
    if entry is not None:
        return entry(text)
    from scrapy_neardup.dedup.text.page import Block, Page

    return fingerprinter.fingerprint_page(Page("", [Block(line) for line in text.split("\n") if line.strip()]))


#: reasons a line is left out of the output (counted); other reasons (too short) keep it unchecked
SKIP_REASONS = ("malformed_json", "no_text_field")


def display_path(name: str) -> str:
    """A listed input as the output names it: a local file's path without
    Hadoop's ``file:`` scheme; any other file system's URI as it is."""
    if name.startswith("file://"):
        return name.removeprefix("file://")
    return name.removeprefix("file:")


def default_id(files: Sequence[str], pos: int) -> str:
    """The id of a record without ``id_field``: ``FILE@OFFSET`` (its byte offset;
    the one-machine command's ``FILE:LINE`` would need every line counted)."""
    from scrapy_neardup.dedup.spark.reader import split_position

    file_no, offset = split_position(pos)
    return f"{display_path(files[file_no])}@{offset}"


class SchemeMismatch(RuntimeError):
    """An executor's fingerprint scheme differs from the driver's."""


def fingerprint_partition(rows: Iterable[tuple[int, str]], scheme: str, text_field: str, id_field: str | None,
                          min_tokens: int | None = None
                          ) -> Iterator[tuple[int, tuple[str | None, int | None, str | None]]]:
    """(pos, (id, fingerprint or None, reason)) per line of one partition."""
    from scrapy_neardup.dedup.fingerprint import Fingerprinter
    from scrapy_neardup.dedup.spark.reader import parse_records

    fper = Fingerprinter() if min_tokens is None else Fingerprinter(min_tokens=min_tokens)
    if fper.scheme != scheme:
        raise SchemeMismatch(f"executor scheme {fper.scheme!r} != driver scheme {scheme!r}: "
                             "install the same scrapy-neardup on every executor")
    for pos, rid, text, reason in parse_records(rows, text_field, id_field):
        if text is None:
            yield pos, (rid, None, reason)
            continue
        fp = fingerprint_text(fper, text)
        yield pos, (rid, fp.value, fp.reason)


def _session(master: str | None, app: str = "neardup-dedup") -> tuple[Any, bool]:
    """A session, and whether it was made here (and is to be stopped here):
    a session already active in this process is used as it is, and left running."""
    # the Python workers must run this interpreter (with this package), not the system's python
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    return builder.getOrCreate(), True


def _write_text(sc: Any, path: str, text: str) -> None:
    if "://" not in path or path.startswith("file://"):
        local = path.removeprefix("file://")
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        with open(local, "w", encoding="utf-8") as f:
            f.write(text)
    else:  # a cluster file system: one part file in a folder of that name
        sc.parallelize([text], 1).saveAsTextFile(path)


def run(inputs: Sequence[str], out: str, *, spark: Any = None, master: str | None = None, k: int = 3,
        text_field: str = "text", id_field: str | None = "id", max_group: int | None = None,
        blocks: int | None = None, partitions: int | None = None, min_tokens: int | None = None) -> dict:
    """Deduplicate JSON lines ``inputs`` into ``out`` on Spark; returns the summary.

    ``spark``: a SparkSession to use (else one is made, with ``master``);
    ``blocks``: the layout's block count (default: ``store.self_join.join_layout``
    for the number of distinct fingerprints); ``max_group``: the largest
    prefix group compared in one task before it is split; ``partitions``: of
    every shuffle (default: Spark's default parallelism); ``min_tokens``: the
    fingerprinter's (default: its own). ``id_field`` None, or a record without
    it: the id is ``FILE@OFFSET``."""
    from scrapy_neardup.dedup.fingerprint import Fingerprinter
    from scrapy_neardup.dedup.spark import components, pairs as pairs_mod, reader
    from scrapy_neardup.dedup.store.layout import make_layout
    from scrapy_neardup.dedup.store.self_join import join_layout

    started = time.time()
    own = False
    if spark is None:
        spark, own = _session(master)
    sc = spark.sparkContext
    try:
        scheme = Fingerprinter().scheme
        files = reader.list_inputs(sc, inputs)
        lines = reader.read_lines(sc, files)
        # every shuffle gets this many partitions (Spark's default parallelism: the cores), since
        # what is shuffled is small beside the text: positions, fingerprints, pairs
        parts = partitions or sc.defaultParallelism
        from pyspark import StorageLevel

        # (pos, (id, fp, reason)): small beside the text, kept (spilled if need be) rather than fingerprinted twice
        recs = (lines.mapPartitions(lambda it: fingerprint_partition(it, scheme, text_field, id_field, min_tokens))
                .persist(StorageLevel.MEMORY_AND_DISK))
        # (fp, pos) of every fingerprinted record; each fingerprint's first record stands for it
        with_fp = recs.filter(lambda r: r[1][1] is not None).map(lambda r: (r[1][1], r[0])).persist()
        firsts = with_fp.reduceByKey(min, parts).persist()
        copies = with_fp.join(firsts, parts).filter(lambda kv: kv[1][0] != kv[1][1]).map(lambda kv: (kv[1][1], kv[1][0]))
        n_distinct = firsts.count()
        lay = make_layout(k, blocks) if blocks else join_layout(k, n_distinct)
        found, pair_stats = pairs_mod.near_pairs(firsts, lay,
                                                 max_group or pairs_mod.DEFAULT_MAX_GROUP, parts)
        found = found.persist()
        n_pairs = found.count()
        dropped, comp_stats = components.decide_pairs(found, parts) if n_pairs else (sc.emptyRDD(), {})
        dropped = dropped.persist()
        # copies: (first pos, copy pos) -> the copy's twin is the first if kept, else the first's twin
        copy_drops = copies.leftOuterJoin(dropped, parts).map(
            lambda kv: (kv[1][0], (kv[0], 0) if kv[1][1] is None else kv[1][1]))
        all_dropped = dropped.union(copy_drops).persist()
        # outputs: the kept lines as they came, in input order (the text is read again, not held);
        # the drops with their twins
        skips = recs.filter(lambda r: r[1][2] in SKIP_REASONS).map(lambda r: (r[0], None))
        (lines.subtractByKey(all_dropped.union(skips), parts).sortByKey(numPartitions=parts).values()
         .saveAsTextFile(os.path.join(out, "unique")))
        meta = recs.mapValues(lambda v: (v[0], v[1]))  # pos -> (id, fp)

        def dup_line(kv: tuple[int, Any]) -> tuple[int, str]:
            # the one schema of docs/stats.md ("The duplicates file"), as the one-machine command writes it
            twin_pos, (pos, dist, rid, fp) = kv[0], kv[1][0]
            twin_id, twin_fp = kv[1][1]
            file_no, offset = reader.split_position(pos)
            return pos, json.dumps({
                "id": rid if rid is not None else default_id(files, pos),
                "duplicate_of": twin_id if twin_id is not None else default_id(files, twin_pos),
                "distance": dist, "fingerprint": f"{fp:016x}", "duplicate_of_fingerprint": f"{twin_fp:016x}",
                "source": {"file": display_path(files[file_no]), "offset": offset}}, ensure_ascii=False)

        (all_dropped.join(meta, parts).map(lambda kv: (kv[1][0][0], (kv[0], kv[1][0][1], kv[1][1][0], kv[1][1][1])))
         .join(meta, parts).map(dup_line).sortByKey(numPartitions=parts).values().saveAsTextFile(os.path.join(out, "duplicates")))
        distance_count = dict(all_dropped.map(lambda kv: (kv[1][1], 1)).reduceByKey(lambda a, b: a + b, parts).collect())
        reasons = dict(recs.filter(lambda r: r[1][1] is None).map(lambda r: (r[1][2] or "none", 1))
                       .reduceByKey(lambda a, b: a + b, parts).collect())
        n_dropped = all_dropped.count()
        n_lines = recs.count()
        bad = {r: v for r, v in reasons.items() if r in SKIP_REASONS}
        n_records = n_lines - sum(bad.values())
        seconds = time.time() - started
        # the one-machine summary's keys where they mean the same (docs/corpus.md), then the job's own
        summary = {"records": n_records, "kept": n_records - n_dropped, "dropped": n_dropped,
                   "unfingerprinted": {r: v for r, v in reasons.items() if r not in SKIP_REASONS},
                   "bad": bad, "distance_count": {str(d): distance_count[d] for d in sorted(distance_count)},
                   "seconds": round(seconds, 3), "docs_per_s": round(n_records / seconds, 1) if seconds else None,
                   "inputs": [display_path(f) for f in files], "max_distance": k, "scheme": scheme,
                   "engine": "spark", "master": sc.master, "layout": lay.describe(),
                   "fingerprinted": with_fp.count(), "distinct": n_distinct, "pairs": n_pairs,
                   **pair_stats, **comp_stats}
        _write_text(sc, os.path.join(out, "summary.json"), json.dumps(summary, indent=1) + "\n")
        logger.info("spark dedup: %d records, %d dropped, %d pairs", n_records, n_dropped, n_pairs)
        return summary
    finally:
        if own:
            spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="job.py", description="near-duplicate removal of JSON lines on Spark")
    ap.add_argument("inputs", nargs="+", help="JSON lines files, directories or globs (any path Spark reads)")
    ap.add_argument("-o", "--out", required=True, help="output folder (unique/, duplicates/, summary.json)")
    ap.add_argument("--spark-master", default=None, help="Spark master URL (default: spark-submit's)")
    ap.add_argument("-k", "--max-distance", type=int, default=3)
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--id-field", default="id")
    ap.add_argument("--max-group", type=int, default=None, help="split prefix groups larger than this")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    summary = run(args.inputs, args.out, master=args.spark_master, k=args.max_distance,
                  text_field=args.text_field, id_field=args.id_field, max_group=args.max_group)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
