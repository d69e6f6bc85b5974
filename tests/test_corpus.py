"""``neardup dedup`` (``dedup.corpus``): the crawl's rule over a corpus, checked
against a brute-force oracle; resume after a kill; bad input; every input format."""

from __future__ import annotations

import base64
import datetime
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scrapy_neardup.dedup.cli import main as dedup_main
from scrapy_neardup.dedup.corpus import CorpusError, CorpusRun, DedupOptions, FieldOptions, StrictStop
from scrapy_neardup.dedup.fingerprint import Fingerprinter
from scrapy_neardup.dedup.simhash import hamming
from scrapy_neardup.dedup.store import SimhashStore
from tests.fixtures.memory import tree_pss_kib

WORDS = ("time year people way day man thing woman life child world school state family student group country "
         "problem hand part place case week company system program question work government number night point "
         "home water room mother area money story fact month lot right study book eye job word business issue "
         "side kind head house service friend father power hour game line end member law car city community name "
         "president team minute idea kid body information back parent face others level office door health person "
         "art war history party result change morning reason research girl guy moment air teacher force education "
         "river mountain bridge garden window market letter music paper table chair light train station village").split()


def make_corpus(n: int, seed: int, *, copies: float = 0.5) -> list[dict]:
    """``n`` records: fresh random documents and edited copies of earlier ones (1-6 words changed)."""
    rnd = random.Random(seed)
    docs: list[list[str]] = []
    out = []
    for i in range(n):
        if docs and rnd.random() < copies:
            words = list(rnd.choice(docs))
            for _ in range(rnd.randint(1, 6)):
                words[rnd.randrange(len(words))] = rnd.choice(WORDS)
        else:
            words = rnd.choices(WORDS, k=rnd.randint(40, 90))
        docs.append(words)
        out.append({"id": f"r{seed}-{i}", "text": " ".join(words)})
    return out


def write_jsonl(path: Path, records: list[dict], opener=open) -> Path:
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return path


def run(tmp_path: Path, inputs: list, out: str = "out", **kw) -> tuple[dict, Path]:
    fields = kw.pop("fields", FieldOptions(id_field="id"))
    options = DedupOptions(inputs=[str(p) for p in inputs], out=str(tmp_path / out), fields=fields,
                           workers=kw.pop("workers", 1), **kw)
    summary = CorpusRun(options).run()
    return summary, tmp_path / out


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def oracle(records: list[dict], k: int = 3) -> tuple[list[str], dict[str, tuple[str, int]]]:
    """Brute force: kept ids in order, and each dropped id's (nearest earlier kept id, distance)."""
    fper = Fingerprinter()
    kept: list[tuple[str, int]] = []
    dropped: dict[str, tuple[str, int]] = {}
    for r in records:
        fp = fper.fingerprint_text(r["text"]).value
        assert fp is not None
        best = min(((hamming(fp, v), j) for j, (_, v) in enumerate(kept)), default=(99, -1))
        if best[0] <= k:
            dropped[r["id"]] = (kept[best[1]][0], best[0])
        else:
            kept.append((r["id"], fp))
    return [i for i, _ in kept], dropped


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_rule_is_the_brute_force_oracles(tmp_path, seed):
    records = make_corpus(500, seed)
    summary, out = run(tmp_path, [write_jsonl(tmp_path / "in.jsonl", records)])
    kept_ids, dropped = oracle(records)
    unique = read_lines(out / "unique.jsonl")
    dups = read_lines(out / "duplicates.jsonl")
    assert [u["id"] for u in unique] == kept_ids  # drop iff within k of an earlier kept record
    assert {d["id"]: (d["duplicate_of"], d["distance"]) for d in dups} == dropped  # the nearest kept twin
    assert dropped and summary["dropped"] == len(dropped) and summary["kept"] == len(kept_ids)
    # no two kept records within k; every drop names a kept twin within k, with both fingerprints
    fps = {d["id"]: d["fingerprint"] for d in dups}
    kept_set = set(kept_ids)
    for d in dups:
        assert d["duplicate_of"] in kept_set and d["distance"] <= 3
        assert hamming(int(d["fingerprint"], 16), int(d["duplicate_of_fingerprint"], 16)) == d["distance"]
        assert d["source"]["file"].endswith("in.jsonl") and d["source"]["line"] >= 1
    assert len(fps) == len(dups)
    # byte for byte: the kept input lines as they came
    lines = (tmp_path / "in.jsonl").read_bytes().splitlines(keepends=True)
    assert (out / "unique.jsonl").read_bytes() == b"".join(
        line for line, r in zip(lines, records) if r["id"] in kept_set)


def test_workers_give_the_same_output_as_one_process(tmp_path):
    records = make_corpus(1200, 7)
    src = write_jsonl(tmp_path / "in.jsonl", records)
    _, one = run(tmp_path, [src], out="one", batch=64)
    _, two = run(tmp_path, [src], out="two", workers=2, batch=64)
    for name in ("unique.jsonl", "duplicates.jsonl"):
        assert (one / name).read_bytes() == (two / name).read_bytes()


def _outputs(out: Path) -> tuple[bytes, bytes]:
    return (out / "unique.jsonl").read_bytes(), (out / "duplicates.jsonl").read_bytes()


class Crash(Exception):
    pass


@pytest.mark.parametrize("where", ["_checkpoint", "_sync_store", "_decide"])
def test_a_run_crashing_anywhere_resumes_to_the_uninterrupted_output(tmp_path, monkeypatch, where):
    records = make_corpus(900, 11)
    src = write_jsonl(tmp_path / "in.jsonl", records)
    ref_summary, ref = run(tmp_path, [src], out="ref", store=str(tmp_path / "ref-store"), batch=50)
    calls = {"n": 0}
    original = getattr(CorpusRun, where)

    def crashing(self, *a, **kw):
        calls["n"] += 1
        if where == "_checkpoint":  # the outputs of the batch are written, its checkpoint is not
            if calls["n"] in (3, 9, 14):
                raise Crash
        elif where == "_decide":  # the first batch's outputs written, before any checkpoint but the start's
            if calls["n"] == 1:
                original(self, *a, **kw)
                raise Crash
        elif calls["n"] in (4, 10):  # checkpointed, not yet in the store
            raise Crash
        return original(self, *a, **kw)

    monkeypatch.setattr(CorpusRun, where, crashing)
    monkeypatch.setattr("scrapy_neardup.dedup.corpus.run.CHECKPOINT_EVERY", 0.0)  # a checkpoint every batch
    store = str(tmp_path / "store")
    for _ in range(3):
        try:
            summary, out = run(tmp_path, [src], store=store, batch=50)
            break
        except Crash:
            continue
    else:
        summary, out = run(tmp_path, [src], store=store, batch=50)
    monkeypatch.setattr(CorpusRun, where, original)
    summary, out = run(tmp_path, [src], store=store, batch=50)  # a finished run answers its summary again
    assert _outputs(out) == _outputs(ref)
    assert {k: summary[k] for k in ("records", "kept", "dropped")} == {k: ref_summary[k] for k in ("records", "kept", "dropped")}
    with SimhashStore.open(store, readonly=True) as s:  # each kept record stored once
        assert len(s) == summary["kept"]


def _position(checkpoint: Path) -> tuple[int, int]:
    """(file, byte) where a run's checkpoint says it is; (-1, -1) before its first."""
    if not checkpoint.exists():
        return (-1, -1)
    p = json.loads(checkpoint.read_text())["position"]
    return (p["file"], p["pos"])


def _a_run_of_files(tmp_path: Path, records: list[dict], files: int) -> tuple[Path, Path, list[str]]:
    """``records`` dealt into ``files`` JSON lines files (a checkpoint at the end of each): the output
    of an uninterrupted run of them, the OUT of another, and the command of that other (2 workers)."""
    srcs = [write_jsonl(tmp_path / f"in{i}.jsonl", records[i::files]) for i in range(files)]
    _, ref = run(tmp_path, srcs, out="ref")
    out = tmp_path / "out"
    return ref, out, [sys.executable, "-m", "scrapy_neardup.dedup", "dedup", *map(str, srcs), "-o", str(out),
                      "--id-field", "id", "--workers", "2", "--quiet"]


def test_a_run_killed_with_sigkill_resumes_to_the_uninterrupted_output(tmp_path):
    # 8 files: a checkpoint at the end of each (and at most every second), so that a kill always finds
    # the run between two checkpoints, however fast the machine runs it
    ref, out, cmd = _a_run_of_files(tmp_path, make_corpus(12000, 5), 8)
    checkpoint = out / ".neardup" / "checkpoint.json"
    kills = 0
    for _ in range(2):
        before = _position(checkpoint)
        proc = subprocess.Popen(cmd)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if _position(checkpoint) > before:
                time.sleep(random.Random(kills).uniform(0, 0.3))
                break
            time.sleep(0.02)
        if proc.poll() is None:
            workers = _children(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
            proc.wait()
            # its workers end with it: left waiting for batches, they held the run's lock, and the
            # resume below was refused as "another neardup dedup is running"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(_alive(w) for w in workers):
                time.sleep(0.05)
            assert not [w for w in workers if _alive(w)], "workers outlived their run"
        proc.wait()
    assert subprocess.run(cmd, timeout=300).returncode == 0
    assert kills >= 1
    assert _outputs(out) == _outputs(ref)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    kids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry.name))
    return kids


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which its parent has yet to reap, has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_worker_that_dies_stops_the_run_with_a_clear_error_and_a_resume_finishes_it(tmp_path):
    """A fingerprinting worker killed (as the kernel kills one when memory runs out) used to leave the run
    waiting for ever for the batch it held, silent. Now the run stops: exit 1, a line that says why and
    names where, and the same command resumes it to the output of an uninterrupted run."""
    ref, out, cmd = _a_run_of_files(tmp_path, make_corpus(40000, 8), 4)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and len(_children(proc.pid)) < 2:
        time.sleep(0.01)
    killed = proc.poll() is None
    if killed:
        os.kill(_children(proc.pid)[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    if killed and proc.returncode == 0:  # (the run was in its last batch: nothing left to wait for)
        pytest.skip("the run ended before its worker was killed")
    assert proc.returncode == 1, err[-2000:]
    assert "a fingerprinting worker died" in err and "the same command again to resume" in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert subprocess.run(cmd, timeout=300).returncode == 0
    assert _outputs(out) == _outputs(ref)


def test_a_truncated_zst_is_named_as_one_and_the_command_exits_1(tmp_path):
    """zstandard's stream reader ends quietly where a truncated file ends: the run read a shorter file
    and exited 0. Now a .zst that ends inside a frame is named in file_errors, as a .gz is, and a run
    that could not read an input to its end exits 1."""
    zstandard = pytest.importorskip("zstandard")
    data = b"".join(json.dumps(r).encode() + b"\n" for r in make_corpus(3000, 9))
    whole = zstandard.ZstdCompressor().compress(data[: len(data) // 2]) + zstandard.ZstdCompressor().compress(
        data[len(data) // 2:])  # two frames: a complete file reads across them
    (tmp_path / "whole.jsonl.zst").write_bytes(whole)
    (tmp_path / "cut.jsonl.zst").write_bytes(whole[: len(whole) * 3 // 4])
    summary, _ = run(tmp_path, [tmp_path / "whole.jsonl.zst"], out="whole")
    assert summary["records"] == 3000 and not summary["file_errors"] and not summary["bad"]
    summary, _ = run(tmp_path, [tmp_path / "cut.jsonl.zst"], out="cut")
    assert [e["file"] for e in summary["file_errors"]] == [str(tmp_path / "cut.jsonl.zst")]
    assert "ends early" in summary["file_errors"][0]["error"] and not summary["bad"]
    assert 1500 < summary["records"] < 3000
    assert dedup_main(["dedup", str(tmp_path / "cut.jsonl.zst"), "-o", str(tmp_path / "cli"), "--quiet",
                       "--workers", "1"]) == 1


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc/PID/smaps_rollup")
def test_100000_near_identical_records_are_one_kept_record_within_memory(tmp_path):
    template = " ".join(make_corpus(1, 3)[0]["text"].split()[:40])
    src = tmp_path / "in.jsonl"
    with open(src, "w") as fh:
        for i in range(100_000):
            fh.write(json.dumps({"text": template + (" extra" if i % 2 else "")}) + "\n")
    # the command in a process of its own, its tree's summed PSS sampled (the target is the whole tree's)
    out = tmp_path / "out"
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "scrapy_neardup.dedup", "dedup", str(src), "-o", str(out),
                                 "--workers", "2", "--quiet"], stderr=err)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_pss_kib(proc.pid))
            time.sleep(0.05)
    assert proc.returncode == 0, log.read_text()[-2000:]
    print(f"tree PSS peak {peak // 1024} MB")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 100_000 and summary["kept"] <= 2 and summary["dropped"] >= 99_998
    # the whole tree under 500 MB (here: ~290 MB, the run's imports and kernels, shared with the workers)
    assert 0 < peak < 500 * 1024, f"the tree's summed PSS peaked at {peak // 1024} MB"


def test_bad_records_are_counted_named_and_skipped_or_stop_the_strict_run(tmp_path, caplog):
    records = make_corpus(30, 4)
    src = tmp_path / "in.jsonl"
    lines = [json.dumps(r) for r in records]
    lines[5] = '{"id": "x", "text": '  # cut short
    lines[9] = json.dumps({"id": "y"})  # no text field
    lines[12] = "[1, 2]"
    src.write_text("\n".join(lines) + "\n")
    summary, out = run(tmp_path, [src])
    assert summary["bad"] == {"malformed JSON": 1, "no text in field 'text'": 1, "not a JSON object": 1}
    assert [(b["line"], b["file"]) for b in summary["bad_records"]] == [(6, str(src)), (10, str(src)), (13, str(src))]
    assert summary["records"] == 27 and summary["kept"] + summary["dropped"] == 27
    assert f"{src}:6" in caplog.text
    assert json.loads((out / "summary.json").read_text())["bad_records"] == summary["bad_records"]
    with pytest.raises(StrictStop, match=":6: malformed JSON"):
        run(tmp_path, [src], out="strict", strict=True)
    assert dedup_main(["dedup", str(src), "-o", str(tmp_path / "strict2"), "--strict", "--quiet",
                       "--workers", "1"]) == 1


def test_a_truncated_file_is_named_and_the_rest_goes_on(tmp_path):
    a = make_corpus(200, 8)
    b = make_corpus(50, 9)
    good = write_jsonl(tmp_path / "a.jsonl.gz", a, gzip.open)
    data = good.read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    last = write_jsonl(tmp_path / "b.jsonl", b)
    summary, out = run(tmp_path, [cut, last])
    assert [e["file"] for e in summary["file_errors"]] == [str(cut)]
    ids = [u["id"] for u in read_lines(out / "unique.jsonl")]
    assert any(i.startswith("r9-") for i in ids) and any(i.startswith("r8-") for i in ids)


def test_a_second_run_on_the_same_output_directory_is_refused_while_the_first_runs(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", make_corpus(50, 2))
    options = DedupOptions(inputs=[str(src)], out=str(tmp_path / "out"), fields=FieldOptions(id_field="id"), workers=1)
    first = CorpusRun(options)
    first._open_outputs()  # (what a running run holds)
    try:
        with pytest.raises(CorpusError, match="another neardup dedup is running"):
            CorpusRun(options).run()
    finally:
        first.close()
    summary, _ = run(tmp_path, [src])  # once the first is gone, the OUT is this one's to resume
    assert summary["records"] == 50


def test_records_no_utf8_can_hold_or_nested_past_the_parser_are_not_the_runs_end(tmp_path):
    """A lone surrogate (JSON may escape one) in an id, in HTML, in a title; JSON nested 100,000 deep."""
    records = make_corpus(40, 6)
    lines = [json.dumps(r) for r in records]
    lines[3] = json.dumps({"id": "s\ud800", "text": records[2]["text"]})  # a copy of a kept record: written as a drop
    lines[7] = json.dumps({"id": "t\udc00", "text": records[7]["text"], "title": "x\udc00"})
    lines[9] = "[" * 100_000 + "]" * 100_000
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    summary, out = run(tmp_path, [src])
    assert summary["bad"] == {"malformed JSON": 1} and summary["records"] == 39
    assert "s\ud800" in [d["id"] for d in read_lines(out / "duplicates.jsonl")]
    assert "t\udc00" in [u["id"] for u in read_lines(out / "unique.jsonl")]
    try:
        import pyarrow  # noqa: F401
    except ImportError:  # (--format parquet needs the corpus extra)
        pass
    else:
        parquet_summary, parquet_out = run(tmp_path, [src], out="parquet", format="parquet")
        assert parquet_summary["kept"] == summary["kept"] and (parquet_out / "unique.parquet").exists()
    html = tmp_path / "html.jsonl"
    html.write_text(json.dumps({"id": "h", "html": "<p>" + records[0]["text"] + "\ud800</p>"}) + "\n")
    summary, _ = run(tmp_path, [html], out="html", fields=FieldOptions(id_field="id", html_field="html", text_field=None))
    assert summary["records"] == 1 and summary["kept"] == 1 and not summary["bad"]


def test_an_output_directory_inside_an_input_directory_is_not_read(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_jsonl(corpus / "in.jsonl", make_corpus(60, 12))
    first, out = run(tmp_path, [corpus], out="corpus/out")
    again, _ = run(tmp_path, [corpus], out="corpus/out")  # the same inputs: the finished run's summary
    assert again == first and first["inputs"] == [str(corpus / "in.jsonl")]
    with pytest.raises(CorpusError, match="inside the output directory"):
        run(tmp_path, [out / "unique.jsonl"], out="corpus/out")
    with pytest.raises(CorpusError, match="the output directory .*, or inside it"):  # (not "no file this reads")
        run(tmp_path, [out], out="corpus/out")
    with pytest.raises(CorpusError, match="given twice"):
        run(tmp_path, [corpus / "in.jsonl", corpus / "in.jsonl"], out="twice")
    # a file a directory lists and that is named as well, in either order: read once, where it comes first
    (tmp_path / "only").mkdir()
    alone = write_jsonl(tmp_path / "only" / "in.jsonl", make_corpus(60, 12))
    for n, args in enumerate(([alone.parent, alone], [alone, alone.parent])):
        once, _ = run(tmp_path, args, out=f"once{n}")
        assert once["inputs"] == [str(alone)] and once["records"] == first["records"]


def test_a_store_answers_the_same_whenever_it_is_given_this_runs_kept_records(tmp_path, monkeypatch):
    """With an empty --store, every drop is against this run's kept records, and names the twin a run
    without a store names, whether or not the store was given them yet (it is given them after each
    checkpoint: here after every batch, or never)."""
    src = write_jsonl(tmp_path / "in.jsonl", make_corpus(600, 14))
    _, ref = run(tmp_path, [src], out="ref", batch=50)
    monkeypatch.setattr("scrapy_neardup.dedup.corpus.run.CHECKPOINT_EVERY", 0.0)
    summary, out = run(tmp_path, [src], out="every", store=str(tmp_path / "store"), batch=50)
    assert summary["dropped_against_store"] == 0 and _outputs(out) == _outputs(ref)


def test_a_run_refused_at_its_start_leaves_its_output_directory_to_the_command_put_right(tmp_path):
    """A --store that cannot be opened refused the run after its first checkpoint, and the same command
    without it was then refused as "other inputs or options"; and the refused run kept OUT's lock."""
    src = write_jsonl(tmp_path / "in.jsonl", make_corpus(30, 27))
    (tmp_path / "notastore").write_text("a file")
    with pytest.raises(CorpusError, match="--store"):
        run(tmp_path, [src], store=str(tmp_path / "notastore"))
    with pytest.raises(CorpusError, match="other inputs or options"):
        run(tmp_path, [src], out="o2")
        run(tmp_path, [src], out="o2", max_distance=2)  # (refused in _open_outputs, holding the lock)
    summary, _ = run(tmp_path, [src])  # the command put right, in the same OUT and the same process
    assert summary["records"] == 30
    summary, _ = run(tmp_path, [src], out="o2")  # the lock of the refused run was let go
    assert summary["records"] == 30


def test_a_file_named_another_way_is_the_same_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "a.jsonl", make_corpus(30, 3))
    first, out = run(tmp_path, ["./in/a.jsonl"], fields=FieldOptions())
    # (`./in/a.jsonl` then `in/a.jsonl`: "holds a run with other inputs", and ids that differed by "./")
    again, _ = run(tmp_path, ["in//a.jsonl"], fields=FieldOptions())
    assert again["records"] == first["records"] == 30 and again["inputs"] == ["in/a.jsonl"]
    assert read_lines(out / "duplicates.jsonl")[0]["duplicate_of"].startswith("in/a.jsonl:")


def test_another_runs_output_directory_or_other_arguments_are_refused(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", make_corpus(20, 1))
    run(tmp_path, [src])
    with pytest.raises(CorpusError, match="other inputs or options"):
        run(tmp_path, [src], max_distance=2)
    assert dedup_main(["dedup", str(tmp_path / "nothing.jsonl"), "-o", str(tmp_path / "o")]) == 2


def test_against_a_store_and_adds_idempotent_by_id(tmp_path):
    first = make_corpus(300, 21)
    src = write_jsonl(tmp_path / "first.jsonl", first)
    store = str(tmp_path / "store")
    s1, out1 = run(tmp_path, [src], out="o1", store=store)
    # the same records again, into a new OUT: each is itself in the store, not a duplicate of itself
    s2, out2 = run(tmp_path, [src], out="o2", store=store)
    assert _outputs(out1)[0] == _outputs(out2)[0] and s2["kept"] == s1["kept"]
    # (the dropped are dropped again: against the store's nearest record, or this run's kept twin when it is
    # nearer; the store holds records kept after them in the first run)
    assert s2["dropped"] == s1["dropped"]
    assert [d["id"] for d in read_lines(out1 / "duplicates.jsonl")] == [d["id"] for d in read_lines(out2 / "duplicates.jsonl")]
    with SimhashStore.open(store, readonly=True) as s:
        assert len(s) == s1["kept"]
    # copies of stored records under other ids are dropped against the store, naming the stored twin
    copies = [{"id": f"copy-{r['id']}", "text": r["text"]} for r in first[:40]]
    s3, out3 = run(tmp_path, [write_jsonl(tmp_path / "copies.jsonl", copies)], out="o3", store=store)
    assert s3["kept"] == 0 and s3["dropped_against_store"] == 40
    kept1 = {u["id"] for u in read_lines(out1 / "unique.jsonl")}
    assert all(d["duplicate_of"] in kept1 for d in read_lines(out3 / "duplicates.jsonl"))


def test_a_default_file_line_id_is_a_position_and_never_the_stored_record_itself(tmp_path):
    """Without --id-field a record is named FILE:LINE. Yesterday's export and today's, each written as
    dump.jsonl, hold other records on the same lines: today's copy of yesterday's line 1 was taken for
    that record itself and kept (81 of 100 such copies in a user's trial), and two lines that traded places
    were each dropped naming the other's position. A position is never taken for a record's identity."""
    texts = [r["text"] for r in make_corpus(60, 31, copies=0)]
    day1, day2 = tmp_path / "day1", tmp_path / "day2"
    day1.mkdir(), day2.mkdir()
    (day1 / "dump.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:30]))
    # today: yesterday's first 10 on the same lines, then 20 new ones
    (day2 / "dump.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:10] + texts[30:50]))
    store = str(tmp_path / "store")
    fields = FieldOptions(id_field=None)
    cwd = os.getcwd()
    try:
        os.chdir(day1)
        s1, _ = run(tmp_path, ["dump.jsonl"], out="o1", store=store, fields=fields)
        os.chdir(day2)
        s2, out2 = run(tmp_path, ["dump.jsonl"], out="o2", store=store, fields=fields)
    finally:
        os.chdir(cwd)
    assert s1["kept"] == 30
    assert (s2["kept"], s2["dropped_against_store"]) == (20, 10)
    assert {d["id"]: d["duplicate_of"] for d in read_lines(out2 / "duplicates.jsonl")} == \
        {f"dump.jsonl:{i}": f"dump.jsonl:{i}" for i in range(1, 11)}


def test_compressed_json_lines_read_as_plain_ones(tmp_path):
    records = make_corpus(200, 13)
    plain = write_jsonl(tmp_path / "in.jsonl", records)
    gz = write_jsonl(tmp_path / "in.jsonl.gz", records, gzip.open)
    _, o1 = run(tmp_path, [plain], out="plain")
    _, o2 = run(tmp_path, [gz], out="gz")
    assert _outputs(o1)[0] == _outputs(o2)[0]
    zstd = pytest.importorskip("zstandard")
    zst = tmp_path / "in.jsonl.zst"
    zst.write_bytes(zstd.ZstdCompressor().compress(plain.read_bytes()))
    _, o3 = run(tmp_path, [zst], out="zst")
    assert _outputs(o1)[0] == _outputs(o3)[0]


def _page(title: str, text: str) -> str:
    return f"<html><head><title>{title}</title></head><body><nav><a href='/'>Home</a></nav><p>{text}</p></body></html>"


class _Bar:
    """A progress bar that notes, at each update, how far it says the run is and how many records it decided."""

    def __init__(self, total: int, run: CorpusRun) -> None:
        self.total, self.n, self.run, self.seen = total, 0, run, []

    def update(self, step: int) -> None:
        self.n += step
        self.seen.append((self.n, self.run.counts.records))

    def set_postfix_str(self, *_a, **_k) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("workers", [1, 2])
def test_the_progress_bar_follows_the_records_decided_not_the_reading_ahead(tmp_path, monkeypatch, workers):
    records = make_corpus(700, 43, copies=0.3)
    site = tmp_path / "site"
    site.mkdir()
    for i, r in enumerate(records):
        (site / f"p{i:03d}.html").write_text(_page(f"page {i}", r["text"]))
    sizes = [p.stat().st_size for p in sorted(site.iterdir())]
    bars: list[_Bar] = []

    def bar(self):
        bars.append(_Bar(sum(f.size for f in self.files), self))
        return bars[-1]

    monkeypatch.setattr(CorpusRun, "_progress_bar", bar)
    run(tmp_path, [site], fields=FieldOptions(), workers=workers, batch=64)
    seen = bars[0].seen
    # (the reading runs up to 2 x workers jobs of 64 files ahead: the bar said 100% with a third decided)
    assert seen and all(n == sum(sizes[:decided]) for n, decided in seen), seen[:5]
    assert seen[-1] == (sum(sizes), len(records))


def test_html_files_of_a_directory_in_path_order(tmp_path):
    records = make_corpus(60, 17, copies=0.3)
    site = tmp_path / "site" / "sub"
    site.mkdir(parents=True)
    for i, r in enumerate(records):
        (site / f"p{i:03d}.html").write_text(_page(f"page {i}", r["text"]))
    summary, out = run(tmp_path, [tmp_path / "site"], fields=FieldOptions())
    unique = read_lines(out / "unique.jsonl")
    assert [u["id"] for u in unique] == sorted(u["id"] for u in unique)
    assert all(set(u) == {"id", "url", "title", "text"} for u in unique)
    assert summary["dropped"] and summary["kept"] + summary["dropped"] == 60
    # workers get consecutive files as one job (a job a page cost more than the page): the same output
    _, two = run(tmp_path, [tmp_path / "site"], out="two", fields=FieldOptions(), workers=2, batch=7)
    assert _outputs(two) == _outputs(out)


def test_parquet_rows(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = make_corpus(300, 19)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "in.parquet", row_group_size=70)
    s1, o1 = run(tmp_path, [tmp_path / "in.parquet"])
    s2, o2 = run(tmp_path, [write_jsonl(tmp_path / "in.jsonl", records)], out="json")
    assert [u["id"] for u in read_lines(o1 / "unique.jsonl")] == [u["id"] for u in read_lines(o2 / "unique.jsonl")]
    assert read_lines(o1 / "duplicates.jsonl")[0]["source"]["row"] >= 0
    # a row's NaN, which JSON cannot hold, is written as null (the lines stay JSON for a strict reader)
    rows = [{**r, "score": float("nan") if i % 2 else 1.5} for i, r in enumerate(records[:20])]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "nan.parquet")
    _, o3 = run(tmp_path, [tmp_path / "nan.parquet"], out="nan")

    def strict(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    scores = [json.loads(line, parse_constant=strict)["score"] for line in (o3 / "unique.jsonl").read_text().splitlines()]
    assert None in scores and 1.5 in scores
    # values JSON has no type for, as Spark's JSON writer gives them: bytes in base64, times in ISO 8601
    when = datetime.datetime(2024, 5, 6, 7, 8, 9)
    rows = [{**r, "raw": b"\x00\xffab", "when": when, "day": when.date()} for r in records[:3]]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "typed.parquet")
    _, o4 = run(tmp_path, [tmp_path / "typed.parquet"], out="typed")
    first = read_lines(o4 / "unique.jsonl")[0]
    assert base64.b64decode(first["raw"]) == b"\x00\xffab"
    assert (first["when"], first["day"]) == ("2024-05-06T07:08:09", "2024-05-06")


def test_warc_response_records_and_skipped_others(tmp_path):
    pytest.importorskip("warcio")
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    records = make_corpus(40, 23)
    path = tmp_path / "in.warc.gz"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i, r in enumerate(records):
            body = _page(f"p{i}", r["text"]).encode()
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(f"http://example.com/{i}", "response",
                                                          payload=BytesIO(body), http_headers=headers))
            if i % 10 == 0:
                writer.write_record(writer.create_warc_record(f"http://example.com/{i}", "request",
                                                              payload=BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
        # error pages and a redirect's body are not pages (a real page was dropped as a duplicate of a 404)
        for status, n in (("404 Not Found", 2), ("301 Moved Permanently", 1)):
            for j in range(n):
                headers = StatusAndHeaders(status, [("Content-Type", "text/html")], protocol="HTTP/1.1")
                writer.write_record(writer.create_warc_record(
                    f"http://example.com/gone{j}", "response", http_headers=headers,
                    payload=BytesIO(_page("Not here", records[j]["text"]).encode())))
    summary, out = run(tmp_path, [path], fields=FieldOptions())
    assert summary["skipped"] == {"warc request record": 4, "warc response status 404": 2,
                                  "warc response status 301": 1}
    assert summary["kept"] + summary["dropped"] == 40 and summary["dropped"]
    unique = read_lines(out / "unique.jsonl")
    assert unique[0]["url"] == "http://example.com/0" and unique[0]["id"].startswith("<urn:uuid:")
    assert all(d["url"].startswith("http://example.com/") for d in read_lines(out / "duplicates.jsonl"))


@pytest.mark.parametrize("gz", [False, True])
def test_a_run_crashing_inside_a_warc_file_resumes_to_the_uninterrupted_output(tmp_path, monkeypatch, gz):
    """warcio's offsets are the file's own: a resumed run added its start to them again (a record past the
    file's end), and a plain WARC record's end left out the blank lines after it (an empty record read
    from there): the rest of the file was lost."""
    pytest.importorskip("warcio")
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    records = make_corpus(60, 26)
    path = tmp_path / f"in.warc{'.gz' if gz else ''}"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=gz)
        for i, r in enumerate(records):
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(f"http://example.com/{i}", "response",
                                                          payload=BytesIO(_page(f"p{i}", r["text"]).encode()),
                                                          http_headers=headers))
            if i % 7 == 0:
                writer.write_record(writer.create_warc_record(f"http://example.com/{i}", "request",
                                                              payload=BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
    ref_summary, ref = run(tmp_path, [path], out="ref", fields=FieldOptions(), batch=4)
    calls = {"n": 0}
    original = CorpusRun._checkpoint

    def crashing(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] in (3, 6, 9):
            raise Crash
        return original(self, *a, **kw)

    monkeypatch.setattr(CorpusRun, "_checkpoint", crashing)
    monkeypatch.setattr("scrapy_neardup.dedup.corpus.run.CHECKPOINT_EVERY", 0.0)
    for _ in range(4):
        try:
            summary, out = run(tmp_path, [path], fields=FieldOptions(), batch=4)
            break
        except Crash:
            continue
    assert calls["n"] > 9
    assert _outputs(out) == _outputs(ref)
    assert {k: summary[k] for k in ("records", "kept", "dropped", "skipped")} == \
        {k: ref_summary[k] for k in ("records", "kept", "dropped", "skipped")}


def test_a_truncated_warc_file_is_named(tmp_path):
    pytest.importorskip("warcio")
    from io import BytesIO

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    records = make_corpus(6, 24, copies=0)
    for gz in (False, True):
        path = tmp_path / f"in{gz}.warc{'.gz' if gz else ''}"
        with open(path, "wb") as fh:
            writer = WARCWriter(fh, gzip=gz)
            for i, r in enumerate(records):
                body = _page(f"p{i}", r["text"] + " " + os.urandom(3000).hex()).encode()
                headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
                writer.write_record(writer.create_warc_record(f"http://example.com/{i}", "response",
                                                              payload=BytesIO(body), http_headers=headers))
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 3000])  # the last record cut in the middle of its body
        summary, _ = run(tmp_path, [path], out=f"out{gz}", fields=FieldOptions())
        assert [e["file"] for e in summary["file_errors"]] == [str(path)], gz
        assert "ends early" in summary["file_errors"][0]["error"]
        assert summary["records"] == 5, gz
        if gz:
            continue
        # cut inside the third record's header: warcio ended there without a word (2 records, no error) or
        # failed inside its parser (an AttributeError named as the file's fault)
        third = data.index(b"WARC/1.0", data.index(b"WARC/1.0", 1) + 1)
        for cut in (30, 60, 200):
            path.write_bytes(data[: third + cut])
            summary, _ = run(tmp_path, [path], out=f"header{cut}", fields=FieldOptions())
            assert summary["records"] == 2 and [e["file"] for e in summary["file_errors"]] == [str(path)], cut
            assert "ends early (truncated?) or is damaged" in summary["file_errors"][0]["error"], cut


def test_query_and_stats_of_a_store(tmp_path, capsys):
    records = make_corpus(100, 29)
    store = str(tmp_path / "store")
    run(tmp_path, [write_jsonl(tmp_path / "in.jsonl", records)], store=store)
    fp = Fingerprinter().fingerprint_text(records[0]["text"]).hex
    capsys.readouterr()
    assert dedup_main(["query", store, "--fingerprint", fp]) == 0
    assert capsys.readouterr().out.startswith(f"0\t{fp}\tr29-0")
    text = tmp_path / "doc.txt"
    text.write_text(records[0]["text"])
    assert dedup_main(["query", store, str(text)]) == 0
    assert "r29-0" in capsys.readouterr().out
    assert dedup_main(["query", store, "--fingerprint", "xyz"]) == 2
    capsys.readouterr()
    far = f"{int(fp, 16) ^ 0xFFFFFFFF:016x}"  # (32 bits away: nothing within k)
    assert dedup_main(["query", store, "--fingerprint", far]) == 1
    got = capsys.readouterr()
    assert not got.out and f"no stored record within 3 bits of {far}" in got.err
    _, out = run(tmp_path, [tmp_path / "in.jsonl"], out="o2")
    capsys.readouterr()
    assert dedup_main(["stats", store, "--duplicates", str(tmp_path / "out" / "duplicates.jsonl")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["records"] > 0 and info["max_distance"] == 3 and info["drops_by_distance"]
    # a duplicates file that is not there, or is not one: one line, exit 2 (a traceback; exit 0 with nothing)
    assert dedup_main(["stats", store, "--duplicates", str(tmp_path / "missing.jsonl")]) == 2
    assert dedup_main(["stats", store, "--duplicates", str(tmp_path / "in.jsonl")]) == 2
    assert "not a duplicates file" in capsys.readouterr().err


def test_text_lands_close_to_its_html():
    fper = Fingerprinter()
    text = make_corpus(1, 31)[0]["text"]
    html = fper.fingerprint_html(_page("A title", text).encode())
    plain = fper.fingerprint_text(html.text, html.title)
    assert plain.ok and hamming(html.value, plain.value) <= 3
    assert fper.fingerprint_text(text, language="en").language == "en"
    assert fper.fingerprint_text("too short").reason == "too_short"


def test_parquet_format_keeps_a_parquet_inputs_columns_and_writes_the_shared_duplicates_schema(tmp_path, monkeypatch,
                                                                                                capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = [{**r, "n": i, "score": i / 7} for i, r in enumerate(make_corpus(400, 37))]
    table = pa.Table.from_pylist(records)
    pq.write_table(table.slice(0, 250), tmp_path / "a.parquet", row_group_size=60)
    pq.write_table(table.slice(250), tmp_path / "b.parquet", row_group_size=60)
    inputs = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    s1, o1 = run(tmp_path, inputs, out="json")
    # a crash while converting: the run started again converts again
    from scrapy_neardup.dedup.corpus import parquet_out

    original = parquet_out.write_duplicates
    monkeypatch.setattr(parquet_out, "write_duplicates", lambda *a: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        run(tmp_path, inputs, out="pq", format="parquet")
    monkeypatch.setattr(parquet_out, "write_duplicates", original)
    s2, o2 = run(tmp_path, inputs, out="pq", format="parquet")
    assert not (o2 / "unique.jsonl").exists() and sorted(p.name for p in o2.iterdir()) == [
        ".neardup", "duplicates.parquet", "summary.json", "unique.parquet"]
    unique = pq.read_table(o2 / "unique.parquet")
    assert unique.schema.equals(table.schema)  # the input's own columns and types
    kept = [u["id"] for u in read_lines(o1 / "unique.jsonl")]
    assert unique.column("id").to_pylist() == kept and s2["kept"] == len(kept) == s1["kept"]
    assert unique.to_pylist() == [r for r in records if r["id"] in set(kept)]
    dups = pq.read_table(o2 / "duplicates.parquet").to_pylist()
    expected = read_lines(o1 / "duplicates.jsonl")
    assert len(dups) == len(expected) == s1["dropped"] > 0
    for got, want in zip(dups, expected):
        assert {k: got[k] for k in want if k != "source"} == {k: want[k] for k in want if k != "source"}
        assert got["source"]["file"] == want["source"]["file"] and got["source"]["row"] == want["source"]["row"]
    # what reads a duplicates file reads the Parquet one as the JSON lines: `neardup stats`, the report
    from scrapy_neardup.crawler.report import locate, read

    by_form = []
    for path in (o1, o2):
        data = read(locate(path))
        assert data.inputs.kind == "dedup" and data.dropped == s1["dropped"] and not data.skipped_lines
        by_form.append((dict(data.distances), dict(data.hosts), [(c.twin, c.size, c.pairs) for c in data.clusters]))
    assert by_form[0] == by_form[1] and set(by_form[1][1]) <= {str(p) for p in inputs}  # (hosts: the input files)
    assert read(locate(o2 / "duplicates.parquet")).dropped == s1["dropped"]
    store = str(tmp_path / "store")
    run(tmp_path, inputs, out="st", store=store)
    counts = []
    for path in (o1 / "duplicates.jsonl", o2 / "duplicates.parquet"):
        assert dedup_main(["stats", store, "--duplicates", str(path)]) == 0
        counts.append(json.loads(capsys.readouterr().out)["drops_by_distance"])
    assert counts[0] == counts[1] and sum(counts[0].values()) == s1["dropped"]
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 truncated")
    assert dedup_main(["stats", store, "--duplicates", str(tmp_path / "bad.parquet")]) == 2
    assert "cannot be read as Parquet" in capsys.readouterr().err
    # and a corpus file given to `query` (one document) is refused, not read as one HTML page
    assert dedup_main(["query", store, str(inputs[0])]) == 2
    assert "is a corpus file" in capsys.readouterr().err


def test_parquet_format_refuses_inputs_of_other_columns_before_the_run(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = make_corpus(40, 25)
    pq.write_table(pa.Table.from_pylist(records[:20]), tmp_path / "a.parquet")
    pq.write_table(pa.Table.from_pylist([{**r, "extra": 1} for r in records[20:]]), tmp_path / "b.parquet")
    (tmp_path / "c.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(CorpusError, match="other columns"):
        run(tmp_path, [tmp_path / "a.parquet", tmp_path / "c.parquet", tmp_path / "b.parquet"], format="parquet")
    assert not (tmp_path / "out" / "unique.parquet").exists() and not (tmp_path / "out" / "unique.parquet.tmp").exists()


def test_parquet_format_of_json_lines_is_id_url_title_text(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = [{**r, "title": f"t{i}", "link": f"http://example.com/{i}"} for i, r in enumerate(make_corpus(300, 41))]
    src = write_jsonl(tmp_path / "in.jsonl", records)
    fields = FieldOptions(id_field="id", title_field="title", url_field="link")
    _, o1 = run(tmp_path, [src], out="json", fields=fields)
    assert dedup_main(["dedup", str(src), "-o", str(tmp_path / "pq"), "--id-field", "id", "--title-field", "title",
                       "--url-field", "link", "--format", "parquet", "--workers", "2", "--quiet"]) == 0
    unique = pq.read_table(tmp_path / "pq" / "unique.parquet")
    assert unique.column_names == ["id", "url", "title", "text"]
    by_id = {r["id"]: r for r in records}
    assert [u["id"] for u in unique.to_pylist()] == [u["id"] for u in read_lines(o1 / "unique.jsonl")]
    assert all(u["text"] == by_id[u["id"]]["text"] and u["url"] == by_id[u["id"]]["link"]
               and u["title"] == by_id[u["id"]]["title"] for u in unique.to_pylist())
    dups = pq.read_table(tmp_path / "pq" / "duplicates.parquet").to_pylist()
    assert [d["id"] for d in dups] == [d["id"] for d in read_lines(o1 / "duplicates.jsonl")]
    assert all(d["source"]["line"] >= 1 and d["url"].startswith("http://example.com/") for d in dups)


def test_exact_copies_are_fingerprinted_once_per_process(monkeypatch):
    from scrapy_neardup.dedup.corpus import jobs

    monkeypatch.setattr(jobs, "_MEMO", jobs._Memo(entries=4, text_chars=10_000))
    calls = {"text": 0, "html": 0}
    fper = jobs.fingerprinter(15)
    for name in calls:
        real = getattr(fper, f"fingerprint_{name}")

        def counted(*a, _real=real, _name=name, **kw):
            calls[_name] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(fper, f"fingerprint_{name}", counted)
    text = " ".join(WORDS[:40])
    lines = [json.dumps({"id": str(i), "text": text}).encode() for i in range(50)]
    lines += [json.dumps({"id": "t", "text": text, "title": "T"}).encode(),  # another title: another fingerprint
              json.dumps({"id": "x", "text": text + " river"}).encode()]
    options = FieldOptions(title_field="title", id_field="id")
    got = jobs.fingerprint_batch("jsonl", options, lines)
    assert calls["text"] == 3 and jobs._MEMO.hits == 49
    expect = Fingerprinter().fingerprint_text(text).value
    assert {o.value for o in got[:50]} == {expect} and [o.record_id for o in got[:3]] == ["0", "1", "2"]
    assert got[50].value == Fingerprinter().fingerprint_text(text, "T").value
    html = f"<html><title>A</title><body><p>{text}</p></body></html>".encode()
    outs = jobs.fingerprint_batch("html", options, [html] * 20 + [html.replace(b"A", b"B")])
    assert calls["html"] == 2 and len({(o.value, o.title, o.text) for o in outs[:20]}) == 1
    assert outs[0].title == "A" and outs[20].title == "B" and text in outs[0].text
    for i in range(6):  # bounded: the oldest results go first
        jobs.fingerprint_batch("jsonl", options, [json.dumps({"id": "y", "text": f"{text} {i}"}).encode()])
    assert len(jobs._MEMO._items) == 4
    jobs.fingerprint_batch("jsonl", options, lines[:1])
    assert calls["text"] == 3 + 6 + 1  # the first text was pushed out, so fingerprinted again


def test_html_given_as_a_json_string_is_read_as_the_text_it_is_whatever_charset_its_meta_names(tmp_path):
    """A corpus that stores decoded HTML keeps its ``<meta charset>``: the string is text already, so
    the meta says nothing of it. It used to be encoded to UTF-8 and decoded again in the charset the
    meta named (GB2312, windows-1251), which garbled the title and text and kept exact copies apart."""
    body = "<p>" + "北京时间今天上午，国家统计局发布了最新的经济数据，显示全国居民消费价格同比上涨，工业生产保持稳定增长。" * 3 + "</p>"
    decls = ["", '<meta charset="gb2312">', '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">']
    records = [{"id": f"p{i}", "html": f"<html><head>{d}<title>经济数据发布</title></head><body>{body}</body></html>"}
               for i, d in enumerate(decls)]
    src = write_jsonl(tmp_path / "in.jsonl", records)
    fields = FieldOptions(id_field="id", html_field="html", text_field=None)
    summary, out = run(tmp_path, [src], fields=fields)
    assert (summary["kept"], summary["dropped"]) == (1, 2)
    assert {d["duplicate_of"] for d in read_lines(out / "duplicates.jsonl")} == {"p0"}
    try:
        import pyarrow.parquet as pq
    except ImportError:  # (--format parquet needs the corpus extra)
        return
    run(tmp_path, [src], out="pq", fields=fields, format="parquet")
    row = pq.read_table(tmp_path / "pq" / "unique.parquet").to_pylist()[0]
    assert row["title"] == "经济数据发布" and "国家统计局" in row["text"]


def test_spellings_of_one_language_in_the_language_field_give_one_fingerprint(tmp_path, caplog):
    """Five copies of one text labelled en, EN, en_US, english and ENGLISH were five fingerprints, all kept;
    an unknown value (xx) was taken silently. Spellings of one language now give CLD2's code, and a value
    that names none is said and read from the text."""
    text = make_corpus(1, 41)[0]["text"]
    labels = ["en", "EN", "en_US", "english", "ENGLISH", "xx", ""]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", "text": text, "lang": v} for i, v in enumerate(labels)])
    summary, out = run(tmp_path, [src], fields=FieldOptions(id_field="id", language_field="lang"))
    assert (summary["kept"], summary["dropped"]) == (1, 6)
    assert {d["distance"] for d in read_lines(out / "duplicates.jsonl")} == {0}
    assert "'xx' names no language CLD2 knows" in caplog.text


def test_a_byte_order_mark_opening_an_input_is_not_copied_into_the_output(tmp_path):
    """unique.jsonl holds the input lines as they came, but for a UTF-8 byte order mark opening a file:
    copied, it sat mid-output when that file was not the first input, and a JSON reader refused that line."""
    a, b = make_corpus(3, 51, copies=0), make_corpus(3, 52, copies=0)
    first = write_jsonl(tmp_path / "a.jsonl", a)
    second = tmp_path / "b.jsonl"
    second.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\n" for r in b))
    summary, out = run(tmp_path, [first, second])
    assert summary["kept"] == 6 and not summary["bad"]
    assert b"\xef\xbb\xbf" not in (out / "unique.jsonl").read_bytes()
    assert [u["id"] for u in read_lines(out / "unique.jsonl")] == [r["id"] for r in a + b]


def test_a_link_to_nothing_in_an_input_directory_is_named(tmp_path):
    """A dangling symlink in a directory of inputs was left out without a word (exit 0): a file of the
    corpus gone missing. It is now read, and named in file_errors (exit 1 from the command)."""
    site = tmp_path / "in"
    site.mkdir()
    write_jsonl(site / "a.jsonl", make_corpus(10, 44))
    (site / "b.jsonl").symlink_to(tmp_path / "gone.jsonl")
    summary, _ = run(tmp_path, [site], fields=FieldOptions())
    assert summary["records"] == 10 and [e["file"] for e in summary["file_errors"]] == [str(site / "b.jsonl")]


def test_a_resume_refuses_an_output_removed_or_cut_and_a_damaged_checkpoint(tmp_path):
    """An output file shorter than the checkpoint says (removed, cut) was padded with NUL bytes up to it, and
    the run said it was done; a checkpoint damaged from outside gave a traceback. Both refused, by name."""
    src = write_jsonl(tmp_path / "in.jsonl", make_corpus(40, 5))
    summary, out = run(tmp_path, [src])
    (out / "unique.jsonl").unlink()
    with pytest.raises(CorpusError, match="unique.jsonl holds 0 bytes, fewer than the"):
        run(tmp_path, [src])
    assert not (out / "unique.jsonl").exists() or (out / "unique.jsonl").stat().st_size == 0
    (out / ".neardup" / "checkpoint.json").write_text('{"version": 2, "ident')
    with pytest.raises(CorpusError, match="checkpoint.json is damaged"):
        run(tmp_path, [src])
    with pytest.raises(CorpusError, match="cannot be made"):
        run(tmp_path, [src], out="/proc/no-such-out")


def test_every_record_bad_is_a_failure_and_a_parquet_without_the_column_is_refused(tmp_path, capsys, caplog):
    """A wrong --text-field made every record bad, a WARNING each, and the command said it was done (exit
    0); in a Parquet file the missing column is known before any row is read."""
    src = write_jsonl(tmp_path / "in.jsonl", make_corpus(60, 6))
    assert dedup_main(["dedup", str(src), "-o", str(tmp_path / "o"), "--text-field", "txt", "--quiet"]) == 1
    assert "every record was bad (60" in capsys.readouterr().err
    assert caplog.text.count("bad record /") == 20 and "more bad records, not logged" in caplog.text
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a"], "body": ["some text"]}), tmp_path / "p.parquet")
    with pytest.raises(CorpusError, match="p.parquet: no column 'text'"):
        run(tmp_path, [tmp_path / "p.parquet"], out="p")


def test_a_parquet_row_a_datetime_cannot_hold_loses_nothing_else(tmp_path):
    """One nanosecond timestamp (what pandas writes) made ``to_pylist`` refuse its whole batch of 1,024 rows,
    and the rest of the file, where pandas is not installed (the corpus extra alone): the value is its
    ISO 8601 string with nine digits, the others as in every batch, the same bytes as where pandas is."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    records = make_corpus(450, 7, copies=0)
    stamps = [i * 1_000_000_000 + (1 if i == 400 else 0) for i in range(450)]
    pq.write_table(pa.table({"id": [r["id"] for r in records], "text": [r["text"] for r in records],
                             "at": pa.array(stamps, type=pa.timestamp("ns", tz="Europe/Paris"))}),
                   tmp_path / "ns.parquet")
    got = []
    for pandas in (True, False):
        out = tmp_path / f"out-{pandas}"
        env = dict(os.environ)
        if not pandas:  # (a pandas whose import fails comes first on the path: as if it were not installed)
            (tmp_path / "no" / "pandas").mkdir(parents=True)
            (tmp_path / "no" / "pandas" / "__init__.py").write_text("raise ImportError('not installed')\n")
            env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "no"), env.get("PYTHONPATH", "")])
        subprocess.run([sys.executable, "-m", "scrapy_neardup.dedup", "dedup", str(tmp_path / "ns.parquet"), "-o",
                        str(out), "--id-field", "id", "--workers", "1", "--quiet"], check=True, timeout=300, env=env)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["records"] == 450 and not summary["bad"] and not summary["file_errors"]
        got.append((out / "unique.jsonl").read_bytes())
    rows = [json.loads(line) for line in got[1].splitlines()]
    assert rows[400]["at"] == "1970-01-01T01:06:40.000000001+01:00" and rows[3]["at"] == "1970-01-01T01:00:03+01:00"
    assert got[0] == got[1]


def test_a_record_too_large_is_kept_unchecked_with_its_text(tmp_path, monkeypatch):
    """A record whose text is past ``MAX_TEXT_CHARS`` is kept unchecked (``too_large``), as the crawl passes a
    page past NEARDUP_MAX_PAGE_BYTES: fingerprinting a 50 MB text held 2.4 GB, and a worker killed for it
    stopped every resume at the same record. An HTML record's title and text are still written."""
    from scrapy_neardup.dedup.corpus import jobs

    monkeypatch.setattr(jobs, "MAX_TEXT_CHARS", 2000)  # (the workers are forked: they see it too)
    monkeypatch.setattr(jobs, "_STATE", {})  # (a Fingerprinter made before has the bound it was made with)
    big = " ".join(["river"] * 500)
    records = make_corpus(20, 8, copies=0) + [{"id": "big", "text": big}]
    summary, out = run(tmp_path, [write_jsonl(tmp_path / "in.jsonl", records)])
    assert summary["unfingerprinted"] == {"too_large": 1} and "big" in [r["id"] for r in read_lines(out / "unique.jsonl")]
    (tmp_path / "hd").mkdir()
    (tmp_path / "hd" / "big.html").write_text(f"<html><head><title>Big</title></head><body><p>{big}</p></body></html>")
    summary, out = run(tmp_path, [tmp_path / "hd"], out="html", fields=FieldOptions())
    assert summary["unfingerprinted"] == {"too_large": 1}
    [line] = read_lines(out / "unique.jsonl")
    assert line["title"] == "Big" and line["text"].strip() == big


def test_dropped_against_the_store_does_not_depend_on_where_batches_end(tmp_path):
    """A record that copies one kept earlier in this run, which an earlier run stored too: dropped against
    this run's kept record whether the two are in one batch or not (it counted as dropped against the
    store when they were)."""
    first, copy = {"id": "a", "text": " ".join(WORDS[:60])}, {"id": "x", "text": " ".join(WORDS[:60])}
    filler = make_corpus(6, 9, copies=0)
    near = write_jsonl(tmp_path / "near.jsonl", [first, copy] + filler)
    far = write_jsonl(tmp_path / "far.jsonl", [first] + filler + [copy])
    got = []
    for name, src in (("near", near), ("far", far)):
        store = str(tmp_path / f"{name}-store")
        run(tmp_path, [src], out=f"{name}-1", store=store, batch=4)
        again, out = run(tmp_path, [src], out=f"{name}-2", store=store, batch=4)
        got.append((again["dropped"], again["dropped_against_store"],
                     [(d["id"], d["duplicate_of"]) for d in read_lines(out / "duplicates.jsonl")]))
    assert got[0] == got[1] == (1, 0, [("x", "a")])


def test_a_link_in_an_input_directory_to_a_file_read_already_is_read_once(tmp_path, caplog):
    """A link inside an input tree to another of its files stopped the whole run ("given twice"): it is read
    once, and said so. A file named twice on the command line is still refused."""
    (tmp_path / "hd" / "a").mkdir(parents=True)
    (tmp_path / "hd" / "sub").mkdir()
    (tmp_path / "hd" / "sub" / "i.html").write_text("<html><body><p>" + " ".join(WORDS[:50]) + "</p></body></html>")
    (tmp_path / "hd" / "a" / "link.html").symlink_to("../sub/i.html")
    summary, _ = run(tmp_path, [tmp_path / "hd"], fields=FieldOptions())
    assert summary["records"] == 1 and summary["inputs"] == [str(tmp_path / "hd" / "sub" / "i.html")]
    assert f"{tmp_path / 'hd' / 'a' / 'link.html'} is a link to {tmp_path / 'hd' / 'sub' / 'i.html'}" in caplog.text
    with pytest.raises(CorpusError, match="given twice"):
        run(tmp_path, [tmp_path / "hd" / "sub" / "i.html", tmp_path / "hd" / "a" / "link.html"], out="twice",
            fields=FieldOptions())


def test_ids_that_are_not_strings_are_named_by_their_json_and_huge_integers_cost_no_line(tmp_path):
    """An ``--id-field`` value that is a JSON object, array or boolean names its record by its JSON text, as
    the input has it (Python's ``repr`` gave ``True`` and ``{'k': 1}``); a number as JSON writes it. A line
    holding an integer past the 4,300 digits Python converts by default is read, not malformed."""
    text = " ".join(WORDS[:60])
    lines = [json.dumps({"id": {"k": 1}, "text": text}), json.dumps({"id": True, "text": text}),
             json.dumps({"id": 7, "text": text}), json.dumps({"id": [1, "a"], "text": text}),
             '{"id": ' + "9" * 5000 + ', "text": ' + json.dumps(text) + "}",
             '{"id": "big", "n": ' + "1" * 5000 + ', "text": ' + json.dumps(" ".join(WORDS[100:160])) + "}"]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    summary, out = run(tmp_path, [src])
    assert summary["bad"] == {} and summary["records"] == 6
    assert [d["id"] for d in read_lines(out / "duplicates.jsonl")] == ["true", "7", '[1, "a"]', "9" * 5000]
    assert {d["duplicate_of"] for d in read_lines(out / "duplicates.jsonl")} == {'{"k": 1}'}
    assert (out / "unique.jsonl").read_text().splitlines() == [lines[0], lines[5]]  # (as they came)


def test_a_drop_whose_twin_has_its_id_is_counted_and_said_once(tmp_path, caplog):
    """An id given to two records (a URL crawled twice): the second, a copy, names the first by the id they
    share, which reads as a record dropped against itself; the summary counts such drops
    (``dropped_with_own_id``) and the log says so once, naming the file and line."""
    records = make_corpus(6, 29, copies=0.0)
    records += [dict(records[1]), dict(records[2], id="other"), dict(records[3])]  # (two given their twin's id)
    src = write_jsonl(tmp_path / "in.jsonl", records)
    with caplog.at_level("WARNING"):
        summary, out = run(tmp_path, [src])
    assert summary["dropped"] == 3 and summary["dropped_with_own_id"] == 2
    said = [r.getMessage() for r in caplog.records if "of the record it duplicates" in r.getMessage()]
    assert len(said) == 1 and f"{src}:7" in said[0], said
