"""``CorpusRun``: deduplicate a corpus, online in input order, resumably.

The rule is the crawl's: a record is dropped if and only if it is within
``max_distance`` bits of a record kept before it in input order (or of a
record of ``--store``). Records are fingerprinted in batches by worker
processes (``jobs``) and decided in input order by the kept set's
``check_and_add`` (``kept.KeptSet``, the permuted tables): each record is compared with the
kept records only, never with the dropped ones, so a template shared by
100,000 records costs one kept record and 100,000 look-ups, not 5x10^9 pairs.
Records that get no fingerprint (too short, empty) are kept and counted.

Outputs in ``OUT``: ``unique.jsonl``, ``duplicates.jsonl``, ``summary.json``
(docs/corpus.md). State in ``OUT/.neardup/``: ``kept.fp`` (the kept
fingerprints, 8 bytes each), ``kept.ids`` (their ids, a JSON string a line)
and ``checkpoint.json``, rewritten (atomically, by rename) after a batch
at most every ``CHECKPOINT_EVERY`` seconds and at the end of every file, with the input position and the length of every output file. A run
killed at any moment and started again with the same arguments truncates
every file to its checkpoint, rebuilds the kept set from ``kept.fp`` and
goes on from the input position: its outputs equal an uninterrupted run's.
Records go to ``--store`` only after the checkpoint that holds them (and
are added again after a kill, idempotently by id: a record the store holds
under its id with its fingerprint is itself, never its duplicate), so the
store never holds a record that a resumed run has still to decide.

Costs: O(records x T log kept) for the decisions (T tables); memory
``layout.bytes_per_fingerprint()`` plus 8 bytes a kept record (its id stays on disk,
in ``kept.ids``), and the batches in flight: ``2 x workers`` batches of ``DedupOptions.batch`` records.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..fingerprint import Fingerprinter
from ..simhash import to_hex
from ..store import Match, SimhashStore
from ..store.backends import check_keys
from .inputs import (InputError, InputFile, RawRecord, Reader, default_id, expand_inputs, json_line, positional_id,
                     source_of)
from .jobs import FieldOptions, Outcome, fingerprint_batch, warm
from .kept import KeptSet

logger = logging.getLogger(__name__)

STATE_DIR = ".neardup"
#: how many named bad records the summary lists (all are counted)
MAX_NAMED = 1000
#: Bad records logged one by one; past them, one line says the rest are counted
MAX_LOGGED = 20
CHECKPOINT_VERSION = 3  # 2: the identity as its digest; 3: records past MAX_TEXT_CHARS kept unchecked
#: seconds between checkpoints (and at the end of every file): a kill repeats at most this much work
CHECKPOINT_EVERY = 1.0


class CorpusError(Exception):
    """The run cannot start or go on (its message says why); the command exits 2."""


class RunStopped(CorpusError):
    """The run started and could not go on (a fingerprinting worker died); what its last checkpoint holds
    is kept, and the same command resumes it. The command exits 1."""


class StrictStop(Exception):
    """``--strict``: the first bad record (its message names it); the command exits 1."""


@dataclass
class DedupOptions:
    inputs: list[str]
    out: str
    fields: FieldOptions = field(default_factory=FieldOptions)
    workers: int = 0  # 0: every core
    max_distance: int = 3
    store: str | None = None
    strict: bool = False
    progress: bool = False
    batch: int = 1024
    #: and at most this many bytes of payload a batch (HTML pages are ~40 KB: 256 of them in each of the
    #: 2 x workers batches in flight, and their copies on the way to and in the workers, were ~100 MB)
    batch_bytes: int = 1 << 21
    #: ``jsonl`` (``unique.jsonl``, ``duplicates.jsonl``) or ``parquet`` (``unique.parquet``, ``duplicates.parquet``)
    format: str = "jsonl"


@dataclass
class _Position:
    file: int = 0
    pos: int = 0
    line: int = 0


@dataclass
class _Counts:
    records: int = 0
    kept: int = 0
    dropped: int = 0
    dropped_against_store: int = 0
    unfingerprinted: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)  # not records (non-HTML WARC records)
    bad: Counter = field(default_factory=Counter)
    distance_count: Counter = field(default_factory=Counter)
    bad_records: list = field(default_factory=list)
    file_errors: list = field(default_factory=list)
    #: drops whose kept twin has the same id (an id given twice in the inputs: the duplicates file names
    #: the record after its own id, which a reader takes for a record dropped against itself)
    same_id: int = 0


def _storable(rid: str) -> bool:
    """Whether ``--store`` can hold id ``rid`` (the store's own rule, ``check_keys``: not an id with a lone
    surrogate, which a JSON id may escape). Such a record is kept, and not stored, with a warning."""
    try:
        check_keys((rid,))
        return True
    except ValueError as exc:
        logger.warning("record %r is kept, not stored: %s", rid, exc)
        return False


def _worker_start(lock_fds: list[int], run_pid: int) -> None:
    """In each fingerprinting worker, first: die with the run (a run killed with SIGKILL left its workers
    waiting for batches under PID 1, holding the run's lock, so a resume was refused as "another run"),
    and let go of the descriptors of the run's locks (``OUT``'s, the store's), which the fork copied: they
    are the run's alone (without PR_SET_PDEATHSIG, as on macOS, an orphaned worker then holds neither)."""
    for fd in lock_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle: it stops its workers
    try:  # Linux: SIGKILL this process when the run's process ends
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != run_pid:  # the run ended before the line above took effect
        os._exit(1)


class CorpusRun:
    """One run of ``neardup dedup`` over ``options`` (started or resumed by ``run``)."""

    def __init__(self, options: DedupOptions) -> None:
        self.options = options
        self.out = Path(options.out)
        self.state_dir = self.out / STATE_DIR
        self.fingerprinter = Fingerprinter(min_tokens=options.fields.min_tokens)
        try:
            self.files = expand_inputs(options.inputs, out=options.out)
        except InputError as exc:
            raise CorpusError(str(exc)) from None
        self.counts = _Counts()
        self.position = _Position()
        self.elapsed = 0.0
        self.ext_synced = 0
        self.kept: KeptSet | None = None  # (opened at the first batch decided: see _finish)
        self.store: SimhashStore | None = None
        self._files: dict[str, IO[bytes]] = {}
        self._lock_fd: int | None = None
        self._started = self._checkpointed = time.monotonic()
        if options.format not in ("jsonl", "parquet"):
            raise CorpusError(f"--format {options.format}: jsonl or parquet")
        self.parquet = options.format == "parquet"
        self._digest: str | None = None
        # --format parquet: the kept rows with their own columns when every input is Parquet
        self.rows_of_inputs = self.parquet and all(f.kind == "parquet" for f in self.files)

    # -- the identity of a run: what a resumed one must repeat ---------------

    def _identity(self) -> dict[str, Any]:
        identity = {"inputs": [[f.path, f.size] for f in self.files], "fields": asdict(self.options.fields),
                    "max_distance": self.options.max_distance, "store": self.options.store,
                    "scheme": self.fingerprinter.scheme}
        if self.parquet:
            identity["format"] = self.options.format
        return identity

    def _identity_digest(self) -> str:
        """The identity's SHA-256, computed once: a checkpoint holds this rather than the identity, whose
        list of inputs made a run over a directory of n HTML files write O(n) bytes at each of its n
        checkpoints (one at the end of every file)."""
        if self._digest is None:
            self._digest = hashlib.sha256(json.dumps(self._identity(), sort_keys=True).encode()).hexdigest()
        return self._digest

    # -- state ------------------------------------------------------------------

    def _checkpoint_path(self) -> Path:
        return self.state_dir / "checkpoint.json"

    def _open_outputs(self) -> dict[str, Any] | None:
        """Open (or create) the output and state files; on a resume, truncate
        each to the checkpoint. Returns the checkpoint. (The kept set is rebuilt
        from them by ``_open_kept``.)"""
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            self.state_dir.mkdir(exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise CorpusError(f"-o {self.out}: not a directory") from None
        except OSError as exc:  # (read-only, /proc, no permission)
            raise CorpusError(f"-o {self.out}: cannot be made ({exc.strerror or exc})") from None
        self._lock()
        # (--format parquet: the JSON lines are the run's own, converted when it is done)
        lines = self.state_dir if self.parquet else self.out
        names = {"unique": lines / ("unique.part.jsonl" if self.parquet else "unique.jsonl"),
                 "duplicates": lines / "duplicates.jsonl",
                 "kept_fp": self.state_dir / "kept.fp", "kept_ids": self.state_dir / "kept.ids"}
        ck = None
        if self._checkpoint_path().exists():
            try:  # (written whole and renamed into place: damaged only from outside)
                ck = json.loads(self._checkpoint_path().read_text())
                if not isinstance(ck, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                raise CorpusError(f"{self._checkpoint_path()} is damaged ({exc}): the run cannot be resumed; "
                                  "start it again in another OUT") from None
            if ck.get("version") != CHECKPOINT_VERSION:
                raise CorpusError(f"{self.out} holds a run checkpointed by another version of neardup "
                                  f"(checkpoint version {ck.get('version')}, this one writes {CHECKPOINT_VERSION}): "
                                  "start it again in another OUT")
            if ck.get("identity") != self._identity_digest():
                raise CorpusError(f"{self.out} holds a run with other inputs or options; "
                                  "give the same arguments to resume it, or another OUT")
        elif any(p.exists() and p.stat().st_size for p in names.values()):
            raise CorpusError(f"{self.out} holds outputs of another run (no checkpoint): choose another OUT")
        offsets = ck["offsets"] if ck else {}
        for key, path in names.items():
            size = path.stat().st_size if path.exists() else 0
            if size < offsets.get(key, 0):  # (truncate would pad it with NUL bytes up to the checkpoint)
                raise CorpusError(f"{path} holds {size} bytes, fewer than the {offsets[key]} this run had written "
                                  "(removed or cut since): the run cannot be resumed; start it again in another OUT")
            fh = open(path, "r+b" if path.exists() else "w+b")  # noqa: SIM115 (closed by close())
            fh.truncate(offsets.get(key, 0))
            fh.seek(0, os.SEEK_END)
            self._files[key] = fh
        if ck:
            self.position = _Position(**ck["position"])
            c = ck["counts"]
            self.counts = _Counts(c["records"], c["kept"], c["dropped"], c["dropped_against_store"],
                                  Counter(c["unfingerprinted"]), Counter(c["skipped"]), Counter(c["bad"]),
                                  Counter({int(k): v for k, v in c["distance_count"].items()}),
                                  c["bad_records"], c["file_errors"], c.get("same_id", 0))
            self.elapsed = ck["elapsed"]
            self.ext_synced = ck["ext_synced"]
        return ck

    def _lock(self) -> None:
        """Hold ``OUT/.neardup/lock`` (an exclusive ``flock``) until ``close``: a second run on the same
        OUT, started while this one runs (a run taken for dead and started again), would cut the files
        this one writes back to its checkpoint and interleave its own."""
        self._lock_fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise CorpusError(f"another neardup dedup is running on {self.out} (it holds {self.state_dir / 'lock'}): "
                              "wait for it to end (it resumes where it stops), or give this one another OUT") from None
        except OSError as exc:  # a file system without flock (some network and FUSE mounts): run unguarded
            logger.warning("cannot lock %s (%s): a second run on %s would not be refused", self.state_dir / "lock",
                           exc.strerror or exc, self.out)

    def _lock_fds(self) -> list[int]:
        """The descriptors of the locks this run holds: ``OUT/.neardup/lock``, and a local ``--store``'s."""
        fds = [self._lock_fd] if self._lock_fd is not None else []
        store_fd = getattr(getattr(self.store, "backend", None), "lock_fd", None)  # (a local store's)
        return fds + ([store_fd] if isinstance(store_fd, int) else [])

    def _open_kept(self) -> None:
        """The kept set, from ``kept.fp`` and ``kept.ids`` (as truncated to the checkpoint)."""
        try:
            self.kept = KeptSet(self.options.max_distance, self._files["kept_fp"], self._files["kept_ids"])
        except ValueError as exc:
            raise CorpusError(f"{self.state_dir}: {exc}; the state is damaged: start again in another OUT") from None
        if self.counts.records:  # (kept as the summary counts them: the records kept unfingerprinted too)
            logger.info("resuming %s: %d records done, %d kept, %d dropped", self.out, self.counts.records,
                        self.counts.kept, self.counts.dropped)

    def _checkpoint(self, complete: bool = False) -> None:
        for fh in self._files.values():
            fh.flush()
        c = self.counts
        state = {
            "version": CHECKPOINT_VERSION, "identity": self._identity_digest(), "complete": complete,
            "position": asdict(self.position),
            "offsets": {key: fh.tell() for key, fh in self._files.items()},
            "counts": {"records": c.records, "kept": c.kept, "dropped": c.dropped,
                       "dropped_against_store": c.dropped_against_store, "unfingerprinted": c.unfingerprinted,
                       "skipped": c.skipped, "bad": c.bad, "distance_count": c.distance_count,
                       "bad_records": c.bad_records, "file_errors": c.file_errors, "same_id": c.same_id},
            "elapsed": self.elapsed + time.monotonic() - self._started,
            "ext_synced": self.ext_synced,
        }
        tmp = self._checkpoint_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self._checkpoint_path())

    # -- the external store ------------------------------------------------------

    def _open_store(self) -> None:
        if not self.options.store:
            return
        from ..store import StoreError, StoreMismatchError

        try:
            self.store = SimhashStore.open(self.options.store, max_distance=self.options.max_distance,
                                           scheme=self.fingerprinter.scheme)
        except (StoreError, StoreMismatchError, OSError) as exc:
            raise CorpusError(f"--store {self.options.store}: {exc}") from None
        if self.options.fields.id_field is None and any(f.kind in ("jsonl", "parquet") for f in self.files):
            logger.warning("records without --id-field are named FILE:LINE (FILE:ROW) in --store: a position, not an "
                           "identity; a later run over a file of the same name finds these records there as "
                           "duplicates, never as themselves")

    def _store_match(self, fp: int, rid: str | None, also: set[tuple[str, int]] | None = None) -> Match | None:
        """The nearest record of ``--store`` within k (the oldest of equally near ones), not the record
        itself (same id and fingerprint; ``rid`` None: an id that is a position, ``FILE:LINE``, which names
        another record in another run's file of that name) nor one of this run's kept records (those of the
        kept set, and ``also``: (id, fingerprint) of records kept in the batch being decided): the store is
        given those once a checkpoint has passed them (``_sync_store``), and whether it holds one yet must not
        change an answer (a resumed run gives an uninterrupted one's, and a record's verdict does not depend on
        where the batches end); the kept set answers for them."""
        assert self.store is not None and self.kept is not None
        for m in self.store.query(fp):
            if not (m.key == rid and m.fingerprint == fp) and not self.kept.holds(m.key, m.fingerprint) \
                    and (also is None or (m.key, m.fingerprint) not in also):
                return m
        return None

    def _sync_store(self) -> None:
        """Add the kept records past ``ext_synced`` to ``--store``, but those it
        already holds under their id with their fingerprint (added by a run
        killed before its checkpoint said so, or by an earlier run over the
        same records): adds are idempotent by id. O(T log n) a record."""
        assert self.kept is not None
        if self.store is None or self.ext_synced >= len(self.kept):
            return
        fps = self.kept.fingerprints(self.ext_synced, len(self.kept))
        ids = self.kept.keys(self.ext_synced, len(self.kept))
        todo = [(f, i) for f, i in zip(fps.tolist(), ids)
                if _storable(i) and not any(m.key == i and m.fingerprint == f for m in self.store.query(f))]
        if todo:
            self.store.add_many(np.array([f for f, _ in todo], dtype=np.uint64), [i for _, i in todo])
            self.store.flush()
        self.ext_synced = len(self.kept)

    # -- reading -----------------------------------------------------------------

    def _batches(self) -> Iterator[tuple[int, list[RawRecord], str | None, int]]:
        """(file index, records, error, read mark) in input order; an empty batch
        marks the end of a file (its error, or None). The read mark: the input
        bytes on disk read so far, for the progress bar."""
        size = self.options.batch
        done = sum(f.size for f in self.files[: self.position.file])
        for fi in range(self.position.file, len(self.files)):
            file = self.files[fi]
            start, line = (self.position.pos, self.position.line) if fi == self.position.file else (0, 0)
            reader = Reader(file)
            batch: list[RawRecord] = []
            error = None
            try:
                nbytes = 0
                for rec in reader.records(start, line):
                    batch.append(rec)
                    nbytes += len(rec.payload) if isinstance(rec.payload, bytes) else 0
                    if len(batch) >= size or nbytes >= self.options.batch_bytes:
                        yield fi, batch, None, done + reader.raw_position
                        batch = []
                        nbytes = 0
            except InputError as exc:
                error = str(exc)
            if batch:
                yield fi, batch, None, done + reader.raw_position
            done += file.size
            yield fi, [], error, done

    # -- deciding ----------------------------------------------------------------

    def _decide(self, fi: int, records: list[RawRecord], outcomes: list[Outcome]) -> None:
        file = self.files[fi]
        c = self.counts
        kind = file.kind
        ids: list[str] = []
        fps: list[int] = []
        slots: list[int] = []
        verdicts: list[Match | None | str] = [None] * len(records)
        in_store: dict[int, Match] = {}  # record -> the nearest --store record within k
        store_ids: dict[int, str | None] = {}  # record -> its id as --store knows it (``_store_match``'s rid)
        for i, (rec, oc) in enumerate(zip(records, outcomes)):
            if rec.skip is not None:
                c.skipped[rec.skip] += 1
                verdicts[i] = "skip"
                continue
            if rec.bad is not None:
                self._bad(file, rec, rec.bad)
                verdicts[i] = "skip"
                continue
            if oc.error is not None:
                self._bad(file, rec, oc.error)
                verdicts[i] = "skip"
                continue
            c.records += 1
            if oc.value is None:
                c.unfingerprinted[oc.reason or "none"] += 1
                continue
            rid = oc.record_id or default_id(file, rec)
            if self.store is not None:
                store_ids[i] = rid if oc.record_id or not positional_id(file, rec) else None
                found = self._store_match(oc.value, store_ids[i])
                if found is not None:
                    in_store[i] = found  # (dropped: which twin it names is decided below)
                    continue
            ids.append(rid)
            fps.append(oc.value)
            slots.append(i)
        assert self.kept is not None
        first = len(self.kept)
        was_kept = np.zeros(0, dtype=bool)
        if fps:
            was_kept = self.kept.check_and_add(np.array(fps, dtype=np.uint64), ids)
            # the twin of a drop: among the records kept before it (those of this batch before it too)
            limits = first + np.cumsum(was_kept)
            for j in np.flatnonzero(~was_kept).tolist():
                twin = self.kept.twin(fps[j], int(limits[j]))
                assert twin is not None  # (check_and_add found one within k)
                verdicts[slots[j]] = twin
        if in_store:
            # a record --store matched names the nearer of the store's record and this run's kept twin; the
            # store's on a tie (kept before this run: the older)
            kept_before = first + np.concatenate([[0], np.cumsum(was_kept)])
            kept_at = {(ids[j], fps[j]): j for j in np.flatnonzero(was_kept).tolist()}  # (this batch's, by place)
            for i, found in in_store.items():
                fp = outcomes[i].value
                assert fp is not None
                before = int(np.searchsorted(slots, i))
                ours = self.kept.twin(fp, int(kept_before[before]))
                if kept_at.get((found.key, found.fingerprint), before) < before:  # (one this batch kept before it)
                    batch_kept = {pair for pair, j in kept_at.items() if j < before}
                    again = self._store_match(fp, store_ids[i], batch_kept)
                    if again is None:
                        verdicts[i] = ours
                        continue
                    found = again
                if ours is not None and ours.distance < found.distance:
                    verdicts[i] = ours
                else:
                    verdicts[i] = found
                    c.dropped_against_store += 1
        unique, dups = self._files["unique"], self._files["duplicates"]
        for i, (rec, oc) in enumerate(zip(records, outcomes)):
            v = verdicts[i]
            if v == "skip":
                continue
            if v is None:
                c.kept += 1
                if self.parquet:
                    if self.rows_of_inputs:
                        unique.write(json_line({"f": fi, "r": rec.locator}))
                    else:
                        unique.write(json_line({"id": oc.record_id or default_id(file, rec), "url": rec.url or oc.url,
                                                "title": oc.title, "text": oc.text}))
                elif kind == "jsonl":
                    unique.write(rec.payload if rec.payload.endswith(b"\n") else rec.payload + b"\n")
                elif kind == "parquet":
                    unique.write(json_line(rec.payload))
                else:
                    unique.write(json_line({"id": oc.record_id or default_id(file, rec),
                                            "url": rec.url or oc.url, "title": oc.title, "text": oc.text}))
                continue
            assert isinstance(v, Match) and oc.value is not None
            c.dropped += 1
            c.distance_count[v.distance] += 1
            line: dict[str, Any] = {"id": oc.record_id or default_id(file, rec), "duplicate_of": v.key,
                                    "distance": v.distance, "fingerprint": to_hex(oc.value),
                                    "duplicate_of_fingerprint": to_hex(v.fingerprint)}
            url = rec.url or oc.url
            if url:
                line["url"] = url
            line["source"] = source_of(file, rec)
            dups.write(json_line(line))
            if line["id"] == v.key:
                c.same_id += 1
                if c.same_id == 1:  # (once: an id field that holds a site's name would say it of every drop)
                    logger.warning("%s:%s has the id %r of the record it duplicates: an id given to two records "
                                   "(summary.json counts such drops, dropped_with_own_id)", file.path, rec.locator,
                                   v.key)

    def _bad(self, file: InputFile, rec: RawRecord, reason: str) -> None:
        c = self.counts
        category = reason.split(":")[0]
        c.bad[category] += 1
        named = {**source_of(file, rec), "reason": reason}
        where = f"{file.path}:{rec.locator}"
        if self.options.strict:
            raise StrictStop(f"{where}: {reason}")
        if len(c.bad_records) < MAX_NAMED:
            c.bad_records.append(named)
        n = sum(c.bad.values())
        if n <= MAX_LOGGED:
            logger.warning("bad record %s: %s (skipped)", where, reason)
        elif n == MAX_LOGGED + 1:  # (a wrong --text-field made a warning of every record)
            logger.warning("more bad records, not logged: summary.json counts them (bad) and names the first %d "
                           "(bad_records)", MAX_NAMED)

    # -- the run -----------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run (or resume) to the end; returns the summary (also ``OUT/summary.json``)."""
        self._started = time.monotonic()
        try:
            ck = self._open_outputs()  # (in the try: a refusal there lets go of the lock too)
            if ck and ck.get("complete"):
                return json.loads((self.out / "summary.json").read_text())
            if any(f.kind == "parquet" for f in self.files):
                from .parquet_out import check_fields, check_same_columns

                fields = self.options.fields
                try:
                    check_fields(self.files, fields.html_field or fields.text_field)
                    if self.rows_of_inputs:
                        check_same_columns(self.files)
                except InputError as exc:
                    raise CorpusError(str(exc)) from None
            self._open_store()
            if not ck:
                # before any output, once the run is not refused: a run killed from here on is resumed (from its
                # start), not taken for the outputs of another run; one refused before leaves no checkpoint, so
                # that the command put right runs in the same OUT
                self._checkpoint()
            if self.store is not None:
                self._open_kept()
                self._sync_store()
            self._loop()
            self._checkpoint(complete=False)
            if self.parquet:
                self._write_parquet()
            summary = self._summary()
            tmp = self.out / "summary.json.tmp"
            tmp.write_text(json.dumps(summary, indent=2) + "\n")
            os.replace(tmp, self.out / "summary.json")
            self._checkpoint(complete=True)
            return summary
        finally:
            self.close()

    def _write_parquet(self) -> None:
        from .parquet_out import write_duplicates, write_unique

        for fh in self._files.values():
            fh.flush()
        try:
            write_unique(self.state_dir / "unique.part.jsonl", self.files, self.out / "unique.parquet",
                         self.rows_of_inputs)
            write_duplicates(self.state_dir / "duplicates.jsonl", self.out / "duplicates.parquet")
        except InputError as exc:
            raise CorpusError(str(exc)) from None

    def _workers(self) -> int:
        return self.options.workers or os.cpu_count() or 1

    def _loop(self) -> None:
        workers = self._workers()
        fields = self.options.fields
        pool = None
        if workers > 1:
            warm(fields.min_tokens)  # before the fork: the workers share what it loads
            # (and the collector leaves the objects loaded so far alone: its passes would write to their
            # pages, and each worker would get its own copy of them)
            gc.freeze()
            # an executor, not multiprocessing.Pool: a worker that dies (the kernel's OOM killer, a kill) breaks
            # it, and every batch waited for then raises; Pool forks a new worker and the batch the dead one
            # held is never answered, so the run waited for ever
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                       initializer=_worker_start, initargs=(self._lock_fds(), os.getpid()))
        bar = self._progress_bar()
        logs = contextlib.ExitStack()
        if bar is not None:  # (a log line is written above the bar, not on its line)
            from tqdm.contrib.logging import logging_redirect_tqdm

            logs.enter_context(logging_redirect_tqdm())
        # (file, records, error, job, its outcomes lo:hi, read mark): a job can serve several batches in a row
        pending: deque[tuple[int, list[RawRecord], str | None, Any, int, int, int]] = deque()
        # HTML files are a record each: consecutive ones go to a worker as one job, not a job a page
        group: list[tuple[int, list[RawRecord], str | None, int, int]] = []
        group_payloads: list[Any] = []

        def submit(kind: str, payloads: list[Any]) -> Any:
            if pool is not None and payloads:
                try:
                    return pool.submit(fingerprint_batch, kind, fields, payloads, self.parquet)
                except BrokenProcessPool:  # (a worker died between two batches)
                    raise self._worker_died(None) from None
            return fingerprint_batch(kind, fields, payloads, self.parquet) if payloads else []

        def drain() -> None:
            while len(pending) > (2 * workers if pool is not None else 0):
                self._finish(*pending.popleft(), bar=bar)

        def send_group() -> None:
            job = submit("html", list(group_payloads))  # (a copy: the pool pickles its arguments later)
            lo = 0
            for gfi, grecords, gerror, n, gmark in group:
                pending.append((gfi, grecords, gerror, job, lo, lo + n, gmark))
                lo += n
            group.clear()
            group_payloads.clear()
            drain()

        failed = True
        try:
            group_bytes = 0
            for fi, records, error, mark in self._batches():
                kind = self.files[fi].kind
                payloads = [r.payload for r in records if r.sent]
                if kind == "html" and pool is not None:
                    group.append((fi, records, error, len(payloads), mark))
                    group_payloads.extend(payloads)
                    group_bytes += sum(len(p) for p in payloads)
                    if len(group_payloads) >= self.options.batch or group_bytes >= self.options.batch_bytes:
                        send_group()
                        group_bytes = 0
                    continue
                if group:
                    send_group()
                    group_bytes = 0
                pending.append((fi, records, error, submit(kind, payloads), 0, len(payloads), mark))
                drain()
            if group:
                send_group()
            while pending:
                self._finish(*pending.popleft(), bar=bar)
            failed = False
        finally:
            if pool is not None:
                # (failed: batches not started are cancelled, and each worker ends the one it has, at most
                # a batch's time: they ignore Ctrl-C. Killing them instead could cut a result half sent, and
                # the executor's thread then waited for its rest for ever, holding the run's lock)
                pool.shutdown(wait=True, cancel_futures=failed)
            logs.close()
            if bar is not None:
                bar.close()

    def _finish(self, fi: int, records: list[RawRecord], error: str | None, job: Any, lo: int, hi: int,
                mark: int, bar: Any) -> None:
        if self.kept is None:
            # here, at the first batch decided, not before the workers are forked: the kept set (and the
            # store's kernels it loads, which only this process uses) is loaded while the workers
            # fingerprint the first batches (at start-up they waited for it, ~1 s)
            self._open_kept()
        try:
            got: list[Outcome] = job.result() if isinstance(job, Future) else job
        except BrokenProcessPool:
            raise self._worker_died(source_of(self.files[fi], records[0]) if records else
                                    {"file": self.files[fi].path}) from None
        outcomes = iter(got[lo:hi])
        filled = [next(outcomes) if r.sent else Outcome(None, None, None, None, None) for r in records]
        self._decide(fi, records, filled)
        if records:
            last = records[-1]
            self.position = _Position(fi, last.end, last.locator if self.files[fi].kind == "jsonl" else 0)
        else:  # the end of a file (or the fault that ended it)
            if error is not None:
                self.counts.file_errors.append({"file": self.files[fi].path, "error": error})
                logger.error("%s; going on with the next file", error)
            self.position = _Position(fi + 1, 0, 0)
        now = time.monotonic()
        # a checkpoint at the end of every file, but of an HTML file (a record each: a directory of them
        # would checkpoint every record), and at most every CHECKPOINT_EVERY seconds within files
        file_end = not records and self.files[fi].kind != "html"
        if file_end or now - self._checkpointed >= CHECKPOINT_EVERY:
            self._checkpoint()
            self._checkpointed = now
            self._sync_store()  # (only what a checkpoint holds goes to the store)
        if bar is not None:
            # (the bytes read up to this batch: the reading runs a few batches ahead of what is decided,
            # a directory of HTML files hundreds of files ahead)
            done = min(mark, bar.total or 0)
            bar.update(max(0, done - bar.n))
            rate = self.counts.records / max(1e-9, time.monotonic() - self._started)
            bar.set_postfix_str(f"{self.counts.records} docs, {rate:,.0f} docs/s, {self.counts.dropped} dropped",
                                refresh=False)

    @staticmethod
    def _worker_died(where: dict[str, Any] | None) -> RunStopped:
        batch = f" (the run was at {', '.join(f'{k} {v}' for k, v in where.items())})" if where else ""
        return RunStopped(f"a fingerprinting worker died (killed, or out of memory: see the system log){batch}; "
                          "run the same command again to resume from the last checkpoint (with fewer --workers "
                          "if memory ran out)")

    def _progress_bar(self) -> Any:
        if not self.options.progress or not sys.stderr.isatty():
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        return tqdm(total=sum(f.size for f in self.files), unit="B", unit_scale=True, desc="neardup dedup",
                    file=sys.stderr)

    def _summary(self) -> dict[str, Any]:
        c = self.counts
        seconds = self.elapsed + time.monotonic() - self._started
        return {
            "records": c.records, "kept": c.kept, "dropped": c.dropped,
            "dropped_against_store": c.dropped_against_store, "dropped_with_own_id": c.same_id,
            "unfingerprinted": dict(c.unfingerprinted), "bad": dict(c.bad), "skipped": dict(c.skipped),
            "distance_count": {str(k): v for k, v in sorted(c.distance_count.items())},
            "bad_records": c.bad_records, "file_errors": c.file_errors,
            "seconds": round(seconds, 3), "docs_per_s": round(c.records / seconds, 1) if seconds else None,
            "inputs": [f.path for f in self.files], "max_distance": self.options.max_distance,
            "scheme": self.fingerprinter.scheme, "store": self.options.store, "workers": self._workers(),
        }

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files = {}
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # (releases the flock)
            self._lock_fd = None
        if self.store is not None:
            self.store.close()
            self.store = None
