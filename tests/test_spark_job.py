"""The Spark job (local[2]) against the one-machine decision on the same fingerprints."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyspark", reason="the Spark job needs the [spark] extra")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("the Spark job needs Java (openjdk-17-jre-headless; test.sh installs it)", allow_module_level=True)

from scrapy_neardup.dedup.fingerprint import Fingerprinter  # noqa: E402
from scrapy_neardup.dedup.spark import job  # noqa: E402
from scrapy_neardup.dedup.spark.reader import position  # noqa: E402
from scrapy_neardup.dedup.store.greedy import decide  # noqa: E402
from scrapy_neardup.dedup.store.self_join import self_join  # noqa: E402

K = 3


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("neardup-test")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               # small splits: the big file is read by several tasks, out of input order
               .config("spark.hadoop.mapreduce.input.fileinputformat.split.maxsize", str(64 * 1024))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def make_docs(seed: int, n: int) -> list[str]:
    """Random texts, near-copies (a word or two changed), chains of edits and exact copies."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}x{rng.integers(1000)}" for i in range(3000)]
    docs = [" ".join(rng.choice(vocab, size=120)) for _ in range(n)]
    for _ in range(n // 3):
        words = docs[int(rng.integers(len(docs)))].split()
        for _ in range(int(rng.integers(1, 3))):
            words[int(rng.integers(len(words)))] = str(rng.choice(vocab))
        docs.append(" ".join(words))
    for _ in range(n // 10):  # chains: each an edit of the one before
        words = docs[int(rng.integers(n))].split()
        for _ in range(3):
            words[int(rng.integers(len(words)))] = str(rng.choice(vocab))
            docs.append(" ".join(words))
    docs.extend(docs[int(i)] for i in rng.integers(0, len(docs), size=n // 5))
    docs.append("too short")
    order = rng.permutation(len(docs))
    return [docs[i] for i in order]


def write_corpus(root: Path, docs: list[str], sizes: list[float]) -> list[Path]:
    """Files of very unequal sizes (shares ``sizes``), named so that the sorted order is not the size order."""
    files, start = [], 0
    counts = [int(s * len(docs)) for s in sizes[:-1]]
    counts.append(len(docs) - sum(counts))
    for i, c in enumerate(counts):
        path = root / f"part-{len(counts) - i:02d}.jsonl"
        with open(path, "w") as f:
            for j, text in enumerate(docs[start : start + c]):
                f.write(json.dumps({"id": f"{path.stem}-{j}", "text": text}) + "\n")
            if i == 1:
                f.write("{not json\n")
                f.write(json.dumps({"id": "nofield"}) + "\n")
        files.append(path)
        start += c
    return sorted(files)


def one_machine(files: list[Path]) -> tuple[list[int], dict[int, int]]:
    """Input positions and fingerprints of the fingerprinted records, and the kept set, on one machine."""
    fper = Fingerprinter()
    positions, fps = [], []
    for no, path in enumerate(files):
        with open(path, "rb") as f:
            offset = 0
            for raw in f:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    rec = {}
                if isinstance(rec.get("text"), str):
                    fp = job.fingerprint_text(fper, rec["text"])
                    if fp.ok:
                        positions.append(position(no, offset))
                        fps.append(fp.value)
                offset += len(raw)
    dec = decide(self_join(np.array(fps, dtype=np.uint64), K))
    kept = [p for p, k in zip(positions, dec.kept.tolist()) if k]
    return kept, dict(zip(positions, fps))


def spark_output(out: Path) -> tuple[list[dict], list[dict], dict]:
    def rows(name: str) -> list[dict]:
        lines = []
        for part in sorted((out / name).glob("part-*")):
            lines.extend(json.loads(x) for x in part.read_text().splitlines() if x.strip())
        return lines
    return rows("unique"), rows("duplicates"), json.loads((out / "summary.json").read_text())


def check(spark, tmp_path: Path, docs: list[str], sizes: list[float], **kw) -> dict:
    files = write_corpus(tmp_path, docs, sizes)
    summary = job.run([str(tmp_path / "*.jsonl")], str(tmp_path / "out"), spark=spark, k=K, id_field="id", **kw)
    unique, dups, summary2 = spark_output(tmp_path / "out")
    assert summary2 == summary
    kept_pos, fp_of = one_machine(files)
    # the same kept set as the one-machine decision, in input order
    ids_by_pos = {}
    for no, path in enumerate(files):
        offset = 0
        with open(path, "rb") as f:
            for raw in f:
                try:
                    ids_by_pos[position(no, offset)] = json.loads(raw).get("id")
                except ValueError:
                    pass
                offset += len(raw)
    unchecked = [r["id"] for r in unique if r.get("text") == "too short"]
    kept_ids = [r["id"] for r in unique if r.get("text") != "too short"]
    assert kept_ids == [ids_by_pos[p] for p in kept_pos]
    assert len(unchecked) == 1
    # the oracle property: no kept pair within k, every drop's twin kept, before it and within k
    kept = np.array([fp_of[p] for p in kept_pos], dtype=np.uint64)
    dk = np.bitwise_count(kept[:, None] ^ kept[None, :])
    assert not np.any(np.triu(dk <= K, 1))
    kept_set = set(kept_ids)
    pos_of = {v: p for p, v in ids_by_pos.items()}
    for d in dups:
        assert d["duplicate_of"] in kept_set
        assert pos_of[d["duplicate_of"]] < pos_of[d["id"]]
        assert d["distance"] == (int(d["fingerprint"], 16) ^ int(d["duplicate_of_fingerprint"], 16)).bit_count() <= K
        assert set(d["source"]) == {"file", "line"} and d["source"]["file"] in map(str, files)
    assert len(dups) == summary["dropped"] == len(fp_of) - len(kept_pos)
    assert summary["unfingerprinted"] == {"too_short": 1}
    assert summary["bad"] == {"malformed JSON": 1, "no text in field 'text'": 1}
    assert [r["reason"].split(":")[0] for r in summary["bad_records"]] == ["malformed JSON", "no text in field 'text'"]
    assert summary["kept"] == len(unique) and summary["records"] == summary["kept"] + summary["dropped"]
    assert sum(summary["distance_count"].values()) == summary["dropped"]
    assert any(d["distance"] > 0 for d in dups) and any(d["distance"] == 0 for d in dups)
    return summary


def test_same_kept_set_as_one_machine_with_unequal_files(spark, tmp_path):
    # one file holds 85% of the records and is read in several splits, out of input order
    summary = check(spark, tmp_path, make_docs(2, 300), [0.85, 0.01, 0.04, 0.1])
    assert summary["records"] == summary["fingerprinted"] + 1


def test_shuffle_partitions_grow_with_the_input_and_keep_the_kept_set(spark, tmp_path, monkeypatch):
    """Each shuffle gets a partition per ``INPUT_BYTES_PER_PARTITION`` of input (a fixed count,
    the cores, ran a 3 GB heap out of memory at 10M documents); many partitions, the same kept set."""
    from scrapy_neardup.dedup.spark.reader import SparkInput

    big = SparkInput("a.jsonl", "jsonl", "file:a.jsonl", True, 10 * job.INPUT_BYTES_PER_PARTITION + 1)
    assert job.shuffle_partitions([big], 2) == 11 and job.shuffle_partitions([big], 16) == 16
    monkeypatch.setattr(job, "INPUT_BYTES_PER_PARTITION", 64 << 10)
    check(spark, tmp_path, make_docs(2, 300), [0.85, 0.01, 0.04, 0.1])
    assert len(list((tmp_path / "out" / "unique").glob("part-*"))) > 2


def test_oversized_groups_are_split(spark, tmp_path):
    # a dense corpus: many copies of one record and near-identical ones; groups of more than 8 split
    rng = np.random.default_rng(5)
    docs = make_docs(3, 100)
    base = docs[0].split()
    near = []
    for _ in range(100):
        w = list(base)
        w[int(rng.integers(len(w)))] = f"edit{rng.integers(100000)}"
        near.append(" ".join(w))
    dense = docs + [docs[0]] * 300 + near
    rng.shuffle(dense)
    summary = check(spark, tmp_path, dense, [0.5, 0.2, 0.3], max_group=8)
    assert summary["oversized_groups"] > 0


def test_scheme_mismatch_is_refused():
    from scrapy_neardup.dedup.corpus.inputs import RawRecord
    from scrapy_neardup.dedup.corpus.jobs import FieldOptions

    with pytest.raises(job.SchemeMismatch, match="executor scheme"):
        list(job.fingerprint_partition([(0, RawRecord('{"text": "x"}', 1, 0))], "another-scheme", [], FieldOptions()))


def test_command_with_engine_spark_keeps_what_the_one_machine_command_keeps(spark, tmp_path, capsys):
    from scrapy_neardup.dedup.cli import main

    files = write_corpus(tmp_path, make_docs(7, 60), [0.6, 0.1, 0.3])
    local, on_spark = tmp_path / "local", tmp_path / "spark"
    common = ["--id-field", "id", "--quiet"]
    assert main(["dedup", *map(str, files), "-o", str(local), "--workers", "1", *common]) == 0
    assert main(["dedup", str(tmp_path / "*.jsonl"), "-o", str(on_spark), "--engine", "spark", *common]) == 0
    assert spark.sparkContext._jsc is not None  # the command used the running session and left it running

    def lines(paths) -> list[dict]:
        return [json.loads(x) for p in paths for x in p.read_text().splitlines() if x.strip()]

    kept_local = [r["id"] for r in lines([local / "unique.jsonl"])]
    kept_spark = [r["id"] for r in lines(sorted((on_spark / "unique").glob("part-*")))]
    assert kept_spark == kept_local
    dups_local = lines([local / "duplicates.jsonl"])
    dups_spark = lines(sorted((on_spark / "duplicates").glob("part-*")))
    assert dups_spark and len(dups_spark) == len(dups_local)
    # the one schema of the duplicates file (docs/stats.md), and the same twins
    for d in dups_spark:
        assert set(d) == {"id", "duplicate_of", "distance", "fingerprint", "duplicate_of_fingerprint", "source"}
        assert set(d["source"]) == {"file", "line"} and Path(d["source"]["file"]) in files
    assert dups_spark == dups_local
    summary_local = json.loads((local / "summary.json").read_text())
    summary_spark = json.loads((on_spark / "summary.json").read_text())
    for key in SAME_SUMMARY:
        assert summary_spark[key] == summary_local[key], key
    assert sum(summary_spark["bad"].values()) == 2


#: the summary keys the Spark job shares with the one-machine command
SAME_SUMMARY = ("records", "kept", "dropped", "unfingerprinted", "bad", "skipped", "distance_count", "bad_records",
                "file_errors", "inputs", "max_distance", "scheme")


@pytest.mark.parametrize("extra, named", [(["--store", "s"], "--store"), (["--workers", "2"], "--workers"),
                                          (["--strict"], "--strict")])
def test_command_with_engine_spark_refuses_what_does_not_apply(tmp_path, capsys, extra, named):
    from scrapy_neardup.dedup.cli import main

    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    assert main(["dedup", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), "--engine", "spark", *extra]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1


def test_a_file_given_twice_or_an_out_that_holds_a_run_is_refused(spark, tmp_path):
    """As the one-machine command refuses them: a file given twice (each record was dropped as a
    duplicate of itself), and, from the library too, an OUT that holds anything (a one-machine
    run's outputs were mixed with the job's, its summary overwritten)."""
    from scrapy_neardup.dedup.corpus import InputError
    from scrapy_neardup.dedup.spark.job import run

    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "near duplicate detection for web crawling with simhash"}\n')
    with pytest.raises(InputError, match="given twice"):
        run([str(path), str(tmp_path / "." / "a.jsonl")], str(tmp_path / "out"), spark=spark)
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="writes into an empty or new directory"):
        run([str(path)], str(tmp_path / "held"), spark=spark)
    assert (tmp_path / "held" / "summary.json").read_text() == "{}"
    # a Parquet input without the text column: refused before any row is read, as the one-machine command does
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["near duplicate detection"]}), tmp_path / "b.parquet")
    with pytest.raises(InputError, match="no column 'text'"):
        run([str(tmp_path / "b.parquet")], str(tmp_path / "out2"), spark=spark)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_title_and_language_fields_are_refused_with_an_html_field(tmp_path, capsys, engine):
    from scrapy_neardup.dedup.cli import main

    (tmp_path / "a.jsonl").write_text('{"html": "<p>x</p>", "lang": "de"}\n')
    assert main(["dedup", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), "--html-field", "html",
                 "--language-field", "lang", "--engine", engine]) == 2
    assert "apply to --text-field records" in capsys.readouterr().err


def test_spark_options_are_refused_without_engine_spark(tmp_path, capsys):
    from scrapy_neardup.dedup.cli import main

    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    assert main(["dedup", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), "--spark-master", "local[1]"]) == 2
    assert "--spark-master" in capsys.readouterr().err


def _page(title: str, text: str) -> str:
    return f"<html><head><title>{title}</title></head><body><nav><a href='/'>Home</a></nav><p>{text}</p></body></html>"


def write_every_kind(root: Path) -> None:
    """One small corpus in every kind the one-machine command reads, with near-copies across and
    within files, blank and malformed lines, records without the text field, WARC records that are
    not responses, and a truncated file."""
    import gzip
    from io import BytesIO

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    docs = iter(make_docs(11, 150))
    root.mkdir()

    def lines(n: int, **extra) -> str:
        return "".join(json.dumps({"text": next(docs), **extra}) + "\n" for _ in range(n))

    (root / "a.jsonl").write_text(lines(40) + "\n  \n{not json\n" + json.dumps({"title": "no text"}) + "\n" + lines(30))
    with gzip.open(root / "b.jsonl.gz", "wt") as f:
        f.write(lines(25))
    (root / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines(25).encode()))
    pq.write_table(pa.Table.from_pylist([{"text": next(docs), "n": i} for i in range(30)]), root / "d.parquet",
                   row_group_size=7)
    headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
    for name, gz, n in (("e.warc.gz", True, 20), ("f.warc", False, 8)):
        with open(root / name, "wb") as fh:
            writer = WARCWriter(fh, gzip=gz)
            for i in range(n):
                url = f"http://example.com/{name}/{i}"
                writer.write_record(writer.create_warc_record(url, "response", http_headers=headers,
                                                              payload=BytesIO(_page(f"p{i}", next(docs)).encode())))
                if i % 6 == 0:
                    writer.write_record(writer.create_warc_record(url, "request",
                                                                  payload=BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
    pages = root / "pages"
    pages.mkdir()
    for i in range(12):
        (pages / f"p{i:02d}.html").write_text(_page(f"page {i}", next(docs)))
    (pages / "p99.html.gz").write_bytes(gzip.compress(_page("last", next(docs)).encode()))
    whole = gzip.compress(lines(20).encode())
    (root / "z_cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])


def outputs(out: Path, fmt: str = "jsonl") -> tuple[list[dict], list[dict], dict]:
    """unique, duplicates and summary of a run, one machine's (files) or Spark's (part files)."""
    def rows(name: str) -> list[dict]:
        if (out / f"{name}.jsonl").exists():
            return [json.loads(x) for x in (out / f"{name}.jsonl").read_text().splitlines()]
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return [r for part in sorted((out / name).glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
        return [json.loads(x) for part in sorted((out / name).glob("part-*")) for x in part.read_text().splitlines()]
    return rows("unique"), rows("duplicates"), json.loads((out / "summary.json").read_text())


def _no_nulls(value):
    """A Parquet row as the JSON line it came from: the columns a record did not have are null."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    return value


def test_every_input_kind_gives_the_one_machine_output(spark, tmp_path):  # (the command uses the session)
    # JSON lines (plain, .gz, .zst), Parquet, WARC (.warc.gz, .warc), HTML files (.html, .html.gz): the
    # same kept records, lines, drops, twins, default ids (FILE:LINE, FILE:ROW, WARC ids, paths) and
    # counts; written as Parquet (the JSON lines part files are compared in the tests above)
    for mod in ("pyarrow", "zstandard", "warcio"):
        pytest.importorskip(mod)
    from scrapy_neardup.dedup.cli import main

    root = tmp_path / "corpus"
    write_every_kind(root)
    local, on_spark = tmp_path / "local", tmp_path / "spark"
    # (1: the corpus plants a truncated .gz, which both name in file_errors)
    assert main(["dedup", str(root), "-o", str(local), "--workers", "1", "--quiet"]) == 1
    assert main(["dedup", str(root), "-o", str(on_spark), "--engine", "spark", "--format", "parquet", "--quiet"]) == 1
    unique_local, dups_local, summary_local = outputs(local)
    unique_spark, dups_spark, summary_spark = outputs(on_spark, "parquet")
    assert [_no_nulls(u) for u in unique_spark] == [_no_nulls(u) for u in unique_local]
    assert [_no_nulls(d) for d in dups_spark] == [_no_nulls(d) for d in dups_local]
    for key in SAME_SUMMARY:
        assert summary_spark[key] == summary_local[key], key
    assert summary_spark["format"] == "parquet"
    # every kind is there, and the cases the corpus plants
    assert {d["source"]["file"].rsplit(".", 1)[-1] for d in dups_local} >= {"jsonl", "parquet"}
    # default ids: FILE:LINE counts the blank and bad lines, FILE:ROW, a WARC record's id, an HTML file's path
    assert any(d["id"].startswith(f"{root}/a.jsonl:") and int(d["id"].rsplit(":", 1)[1]) > 44 for d in dups_local)
    assert any(u.get("url", "").startswith("http://example.com/f.warc/") for u in unique_local)
    assert any(u.get("id") == f"{root}/pages/p99.html.gz" for u in unique_local)
    assert summary_spark["skipped"] == {"warc request record": 6}
    assert summary_spark["bad"] == {"malformed JSON": 1, "no text in field 'text'": 1}
    assert [e["file"] for e in summary_spark["file_errors"]] == [f"{root}/z_cut.jsonl.gz"]


def test_a_uri_is_listed_and_fetched_through_hadoop_with_the_same_output(spark, tmp_path):
    # file:// goes the way of hdfs:// and s3a:// (Hadoop's listing; binaryFiles for what is read whole)
    import gzip

    root = tmp_path / "c"
    root.mkdir()
    docs = make_docs(3, 24)
    (root / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[:20]))
    with gzip.open(root / "b.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps({"text": d}) + "\n" for d in docs[20:30]))
    for i, d in enumerate(docs[30:36]):
        (root / f"p{i}.html").write_text(_page("t", d))
    from scrapy_neardup.dedup.cli import main

    by_uri = job.run([f"file://{root}"], str(tmp_path / "uri"), spark=spark)
    assert main(["dedup", str(root), "-o", str(tmp_path / "local"), "--workers", "1", "--quiet"]) == 0
    local = outputs(tmp_path / "local")
    assert by_uri["inputs"] == local[2]["inputs"] and len(by_uri["inputs"]) == 8
    assert outputs(tmp_path / "uri")[:2] == local[:2]
    assert by_uri["dropped"] == local[2]["dropped"] > 0
