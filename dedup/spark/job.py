"""Corpus deduplication on Spark: ``run`` and the script ``spark-submit`` runs.

The steps (docs/spark.md):

1. read every input in input order (``reader``: each record's ``pos``), JSON
   lines, HTML files, WARC and Parquet, with the one-machine readers;
2. fingerprint each record in the executors with the one-machine parsing and
   scheme (``corpus.jobs.fingerprint_batch``; each partition checks its
   ``Fingerprinter.scheme`` against the driver's);
3. collapse exact copies: each fingerprint's first record (smallest pos)
   stands for it;
4. the pairs among distinct fingerprints (``pairs``: the permuted tables as
   a partitioned join);
5. the greedy decision per connected component (``components``), then each
   copy follows its first record: dropped as its copy if that was kept, else
   with the same twin;
6. write ``unique`` (the kept records' lines as the one-machine run writes
   them, in input order) and ``duplicates`` (one JSON line per drop, naming
   its kept twin), as JSON lines part files or Parquet, and ``summary.json``.

Records with no fingerprint (too short, empty) are kept unchecked, as the
crawl lets such a page through; bad records (malformed JSON, no such field)
are left out, counted and named, as the one-machine run does.

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

from scrapy_neardup.dedup.corpus.inputs import InputFile, RawRecord
from scrapy_neardup.dedup.corpus.jobs import FieldOptions
from scrapy_neardup.dedup.corpus.parquet_out import check_fields
from scrapy_neardup.dedup.spark.reader import OFFSET_BITS, SparkInput, display_path, split_position

logger = logging.getLogger(__name__)

#: the formats ``unique`` and ``duplicates`` are written in
FORMATS = ("jsonl", "parquet")
#: how many bad records the summary names (all are counted), as the one-machine run
MAX_NAMED = 1000
#: records fingerprinted together (``corpus.jobs.fingerprint_batch``)
BATCH = 256
#: what ``fingerprint_partition`` says of a record: a record (fingerprinted or not), bad input,
#: not a record (a WARC request...), the end of a file that could not be read to its end
OK, BAD, SKIP, FILE_ERROR = "ok", "bad", "skip", "file_error"


def fingerprint_text(fingerprinter: Any, text: str) -> Any:
    """The one-machine text entry point (``Fingerprinter.fingerprint_text``)."""
    return fingerprinter.fingerprint_text(text)


def default_id(f: SparkInput, rec: RawRecord) -> str:
    """The id of a record without ``id_field``: the one-machine run's
    (``FILE:LINE``, ``FILE:ROW``, a WARC record's id, an HTML file's path)."""
    from scrapy_neardup.dedup.corpus.inputs import default_id as one_machine_id

    return one_machine_id(f.input_file(), rec)


def source(f: SparkInput, locator: int) -> dict[str, Any]:
    """A drop's ``source``, as the one-machine run writes it (``file``, and ``line``, ``row`` or ``offset``)."""
    from scrapy_neardup.dedup.corpus.inputs import source_of

    return source_of(f.input_file(), RawRecord(None, locator, 0))


class SchemeMismatch(RuntimeError):
    """An executor's fingerprint scheme differs from the driver's."""


def fingerprint_partition(rows: Iterable[tuple[int, RawRecord | str]], scheme: str, files: Sequence[SparkInput],
                          options: FieldOptions) -> Iterator[tuple[int, tuple]]:
    """(pos, (status, id, fingerprint or None, reason, url, locator, output line or None))
    per record of one partition, by the one-machine ``corpus.jobs.fingerprint_batch``.

    ``status``: ``OK`` (a record; ``reason`` says why it has no fingerprint,
    if it has none), ``BAD`` (``reason``: the one-machine error), ``SKIP``
    (not a record), ``FILE_ERROR`` (the file ends here; ``reason``). The
    output line is the record's ``unique`` line for a file read whole (the
    lines of split files are read again rather than held)."""
    from scrapy_neardup.dedup.corpus.inputs import json_line
    from scrapy_neardup.dedup.corpus.jobs import fingerprint_batch, fingerprinter

    mine = fingerprinter(options.min_tokens).scheme
    if mine != scheme:
        raise SchemeMismatch(f"executor scheme {mine!r} != driver scheme {scheme!r}: "
                             "install the same scrapy-neardup on every executor")

    def decided(batch: list[tuple[int, RawRecord]]) -> Iterator[tuple[int, tuple]]:
        f = files[split_position(batch[0][0])[0]]
        todo = [rec.payload for _, rec in batch if rec.sent]
        outcomes = iter(fingerprint_batch(f.kind, options, todo) if todo else [])
        for pos, rec in batch:
            if rec.skip is not None:
                yield pos, (SKIP, None, None, rec.skip, None, rec.locator, None)
                continue
            if rec.bad is not None:
                yield pos, (BAD, None, None, rec.bad, None, rec.locator, None)
                continue
            oc = next(outcomes)
            if oc.error is not None:
                yield pos, (BAD, None, None, oc.error, None, rec.locator, None)
                continue
            rid = oc.record_id or default_id(f, rec)
            url = rec.url or oc.url
            line = None
            if not f.split:  # the one-machine run's unique line
                if f.kind == "jsonl":
                    line = rec.payload.decode("utf-8", "replace").removesuffix("\n")
                elif f.kind == "parquet":
                    line = json_line(rec.payload).decode().removesuffix("\n")
                else:
                    line = json_line({"id": rid, "url": url, "title": oc.title, "text": oc.text}).decode()[:-1]
            yield pos, (OK, rid, oc.value, oc.reason, url, rec.locator, line)

    batch: list[tuple[int, RawRecord]] = []
    for pos, rec in rows:
        if batch and (len(batch) >= BATCH or pos >> OFFSET_BITS != batch[0][0] >> OFFSET_BITS):
            yield from decided(batch)
            batch = []
        if isinstance(rec, str):
            if batch:
                yield from decided(batch)
                batch = []
            yield pos, (FILE_ERROR, None, None, rec, None, -1, None)
            continue
        batch.append((pos, rec))
    if batch:
        yield from decided(batch)


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


#: input bytes per shuffle partition by default: what is shuffled (positions, fingerprints, table
#: rows, pairs) is about 1.1 KB a document at 10 tables, so about 128 MB a partition for short texts
INPUT_BYTES_PER_PARTITION = 64 << 20


def shuffle_partitions(files: Sequence[SparkInput], cores: int) -> int:
    """How many partitions each shuffle gets: one per ``INPUT_BYTES_PER_PARTITION`` of input,
    and at least ``cores``. A fixed count (the cores) made each partition grow with the corpus:
    at 10M documents on ``local[2]``, two partitions of 5M records each ran a 3 GB heap out of
    memory caching one of them.

    >>> shuffle_partitions([], 2)
    2
    """
    total = sum(f.size for f in files)
    return max(cores, -(-total // INPUT_BYTES_PER_PARTITION))


def in_input_order(rdd: Any, files: Sequence[SparkInput], partitions: int) -> Any:
    """``rdd`` of (pos, value) sorted by pos, in ``partitions`` ranges of input
    order cut by the files' sizes (a record's place in its file counted as
    bytes): no sampling pass, as ``sortByKey`` makes, to find the ranges. Any
    cut gives the same order; the sizes only balance the parts."""
    starts = [0]
    for f in files:
        starts.append(starts[-1] + max(f.size, 1))
    total = starts[-1]
    sizes = [max(f.size, 1) for f in files]

    def part(pos: int) -> int:
        no, place = split_position(pos)
        return min(partitions - 1, (starts[no] + min(place, sizes[no] - 1)) * partitions // total)

    return rdd.repartitionAndSortWithinPartitions(partitions, part)


def _write_lines(spark: Any, lines: Any, path: str, fmt: str) -> None:
    """Write an RDD of JSON lines (in order) as text part files, or as Parquet
    (columns inferred from the lines by Spark's JSON reader; part files in the same order)."""
    if fmt == "jsonl":
        lines.saveAsTextFile(path)
    elif lines.isEmpty():  # (nothing to infer a schema from)
        spark.createDataFrame([], "id string").write.parquet(path)
    else:
        spark.read.json(lines).write.parquet(path)


def out_refusal(out: str) -> str | None:
    """Why the job cannot write into ``out``, or None: a local directory that holds anything (a
    one-machine run's outputs and state among them, which this would mix with its own and leave
    answering another run's summary). The job has no resume: it writes into an empty or new one."""
    local = display_path(out)  # (a local path, or another file system's URI as it is)
    if "://" not in local and os.path.isdir(local) and os.listdir(local):
        return f"{out}: the Spark job writes into an empty or new directory (no resume)"
    return None


def run(inputs: Sequence[str], out: str, *, spark: Any = None, master: str | None = None, k: int = 3,
        text_field: str = "text", id_field: str | None = None, fields: FieldOptions | None = None,
        output_format: str = "jsonl", max_group: int | None = None, blocks: int | None = None,
        partitions: int | None = None, min_tokens: int | None = None) -> dict:
    """Deduplicate ``inputs`` (files, directories, globs of any kind the
    one-machine command reads) into ``out`` on Spark; returns the summary.

    ``spark``: a SparkSession to use (else one is made, with ``master``);
    ``fields``: where records keep their text, id, title, URL, language (else
    ``text_field``, ``id_field`` and ``min_tokens``; an id_field of None: the
    one-machine default ids, ``FILE:LINE``...); ``output_format``: ``jsonl``
    or ``parquet``; ``blocks``: the layout's block count (default:
    ``store.self_join.join_layout`` for the number of distinct fingerprints);
    ``max_group``: the largest prefix group compared in one task before it is
    split; ``partitions``: of every shuffle (default: ``shuffle_partitions``)."""
    from pyspark import StorageLevel

    from scrapy_neardup.dedup.corpus.jobs import fingerprinter
    from scrapy_neardup.dedup.simhash import to_hex
    from scrapy_neardup.dedup.spark import components, pairs as pairs_mod, reader
    from scrapy_neardup.dedup.store.layout import make_layout
    from scrapy_neardup.dedup.store.self_join import join_layout

    if output_format not in FORMATS:
        raise ValueError(f"output_format must be one of {FORMATS}, got {output_format!r}")
    if (why := out_refusal(out)) is not None:
        raise ValueError(why)
    if fields is None:
        fields = FieldOptions(text_field=text_field, id_field=id_field)
        if min_tokens is not None:
            fields = FieldOptions(text_field=text_field, id_field=id_field, min_tokens=min_tokens)
    started = time.time()
    own = False
    if spark is None:
        spark, own = _session(master)
    sc = spark.sparkContext
    try:
        scheme = fingerprinter(fields.min_tokens).scheme
        files = reader.list_inputs(sc, inputs)
        # (a Parquet input without the text column: refused before any row is read, as the one-machine
        # command refuses it, not every row a bad record; a file Hadoop opens is left to its rows)
        local_parquet = [InputFile(f.name, f.kind, f.size) for f in files if f.local and f.kind == "parquet"]
        if local_parquet:
            check_fields(local_parquet, fields.html_field or fields.text_field)
        records, lines = reader.read_records(sc, files)
        parts = partitions or shuffle_partitions(files, sc.defaultParallelism)
        # (pos, (status, id, fp, reason, url, locator, line)): small beside the text of split files (their
        # lines are read again, not held); kept, spilled if need be, rather than fingerprinted twice
        recs = (records.mapPartitions(lambda it: fingerprint_partition(it, scheme, files, fields))
                .persist(StorageLevel.MEMORY_AND_DISK))
        # (fp, pos) of every fingerprinted record; each fingerprint's first record stands for it
        with_fp = recs.filter(lambda r: r[1][0] == OK and r[1][2] is not None).map(lambda r: (r[1][2], r[0])).persist()
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
        # outputs: the kept records' lines in input order (a split file's lines are read again); the drops
        not_kept = all_dropped.union(recs.filter(lambda r: r[1][0] != OK).mapValues(lambda _: None))
        held = recs.filter(lambda r: r[1][6] is not None).mapValues(lambda v: v[6])
        out_lines = held if lines is None else held.union(lines.mapValues(lambda nl: nl[1]))
        _write_lines(spark, in_input_order(out_lines.subtractByKey(not_kept, parts), files, parts).values(),
                     os.path.join(out, "unique"), output_format)
        meta = recs.filter(lambda r: r[1][0] == OK).mapValues(lambda v: (v[1], v[2], v[4], v[5]))  # id, fp, url, locator

        def dup_line(kv: tuple[int, Any]) -> tuple[int, str]:
            # the one schema of docs/stats.md ("The duplicates file"), as the one-machine command writes it
            (pos, dist, rid, fp, url, locator), (twin_id, twin_fp, _, _) = kv[1]
            line: dict[str, Any] = {"id": rid, "duplicate_of": twin_id, "distance": dist,
                                    "fingerprint": to_hex(fp), "duplicate_of_fingerprint": to_hex(twin_fp)}
            if url:
                line["url"] = url
            line["source"] = source(files[split_position(pos)[0]], locator)
            return pos, json.dumps(line, ensure_ascii=False, default=str)

        dup_lines = (all_dropped.join(meta, parts).map(lambda kv: (kv[1][0][0], (kv[0], kv[1][0][1], *kv[1][1])))
                     .join(meta, parts).map(dup_line))
        dup_lines = in_input_order(dup_lines, files, parts).values()
        _write_lines(spark, dup_lines, os.path.join(out, "duplicates"), output_format)
        distance_count = dict(all_dropped.map(lambda kv: (kv[1][1], 1)).reduceByKey(lambda a, b: a + b, parts).collect())
        # (status, reason category) -> count: unfingerprinted records, bad records, not records
        tally = dict(recs.filter(lambda r: r[1][0] != OK or r[1][2] is None)
                     .map(lambda r: ((r[1][0], (r[1][3] or "none").split(":")[0] if r[1][0] == BAD else r[1][3] or "none"), 1))
                     .reduceByKey(lambda a, b: a + b, parts).collect())
        named = recs.filter(lambda r: r[1][0] in (BAD, FILE_ERROR)).takeOrdered(MAX_NAMED, key=lambda r: r[0])
        n_dropped = all_dropped.count()
        n_records = recs.filter(lambda r: r[1][0] == OK).count()
        seconds = time.time() - started

        def by_status(status: str) -> dict[str, int]:
            return {reason: n for (st, reason), n in sorted(tally.items()) if st == status}

        def where(pos: int, locator: int) -> dict[str, Any]:
            return source(files[split_position(pos)[0]], locator)

        # the one-machine summary's keys (docs/corpus.md), then the job's own
        summary = {"records": n_records, "kept": n_records - n_dropped, "dropped": n_dropped,
                   "unfingerprinted": by_status(OK), "bad": by_status(BAD), "skipped": by_status(SKIP),
                   "distance_count": {str(d): distance_count[d] for d in sorted(distance_count)},
                   "bad_records": [{**where(p, v[5]), "reason": v[3]} for p, v in named if v[0] == BAD],
                   "file_errors": [{"file": files[split_position(p)[0]].name, "error": v[3]}
                                   for p, v in named if v[0] == FILE_ERROR],
                   "seconds": round(seconds, 3), "docs_per_s": round(n_records / seconds, 1) if seconds else None,
                   "inputs": [f.name for f in files], "max_distance": k, "scheme": scheme,
                   "engine": "spark", "master": sc.master, "format": output_format, "layout": lay.describe(),
                   "fingerprinted": with_fp.count(), "distinct": n_distinct, "pairs": n_pairs,
                   **pair_stats, **comp_stats}
        _write_text(sc, os.path.join(out, "summary.json"), json.dumps(summary, indent=1) + "\n")
        logger.info("spark dedup: %d records, %d dropped, %d pairs", n_records, n_dropped, n_pairs)
        return summary
    finally:
        if own:
            spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="job.py", description="near-duplicate removal of a corpus on Spark")
    ap.add_argument("inputs", nargs="+",
                    help="JSON lines, HTML, WARC or Parquet files, directories or globs (any path Spark reads)")
    ap.add_argument("-o", "--out", required=True, help="output folder (unique/, duplicates/, summary.json)")
    ap.add_argument("--spark-master", default=None, help="Spark master URL (default: spark-submit's)")
    ap.add_argument("-k", "--max-distance", type=int, default=3)
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--html-field", default=None)
    ap.add_argument("--id-field", default=None, help="default: the one-machine ids (FILE:LINE, ...)")
    ap.add_argument("--title-field", default=None)
    ap.add_argument("--url-field", default=None)
    ap.add_argument("--language-field", default=None)
    ap.add_argument("--min-tokens", type=int, default=None)
    ap.add_argument("--format", choices=FORMATS, default="jsonl", help="of unique/ and duplicates/")
    ap.add_argument("--max-group", type=int, default=None, help="split prefix groups larger than this")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    fields = field_options(args)
    summary = run(args.inputs, args.out, master=args.spark_master, k=args.max_distance, fields=fields,
                  output_format=args.format, max_group=args.max_group)
    print(json.dumps(summary))
    return 0


def field_options(args: argparse.Namespace) -> FieldOptions:
    """The ``FieldOptions`` of parsed ``dedup`` arguments (the command's or the script's)."""
    extra = {} if args.min_tokens is None else {"min_tokens": args.min_tokens}
    return FieldOptions(text_field=None if args.html_field else args.text_field, html_field=args.html_field,
                        id_field=args.id_field, title_field=args.title_field, url_field=args.url_field,
                        language_field=args.language_field, **extra)


if __name__ == "__main__":
    sys.exit(main())
