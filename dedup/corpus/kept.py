"""The kept set of a corpus run: the permuted tables over the kept fingerprints, and their ids on disk.

A run decides each record against the records kept before it. ``KeptSet``
holds the kept fingerprints in ``PermutedTables`` (about
``layout.bytes_per_fingerprint()`` a record) and writes each kept record to
``OUT/.neardup/kept.fp`` (8 bytes) and ``kept.ids`` (its id, a JSON string a
line) as it is decided. The ids stay on disk: in memory there is only the
offset of each id's line (8 bytes a record), and an id is read back (one
``pread``) only when a drop names it as its twin. At 1,000,000 kept records
of short ids that is 8 MB rather than the ~60 MB of a Python list of strings;
with URLs for ids, still 8 MB.

Costs: ``check_and_add`` O(m T log n) for m fingerprints against n kept;
``key`` O(1) plus one read; ``open`` (a resumed run) O(n T log n) to rebuild
the tables and one pass over ``kept.ids``.
"""

from __future__ import annotations

import json
import os
from typing import IO

import numpy as np

from ..store import Match, choose_layout
from ..store.tables import PermutedTables

#: the kept set's table layout is chosen for this many records (more only make probes longer)
CAPACITY = 1 << 20


class KeptSet:
    """The records kept so far, in input order (row = order kept)."""

    def __init__(self, max_distance: int, fp_file: IO[bytes], ids_file: IO[bytes]) -> None:
        """``fp_file``/``ids_file``: ``kept.fp`` and ``kept.ids``, open for reading and
        appending, already truncated to the checkpoint (their records are loaded here)."""
        self.tables = PermutedTables(choose_layout(max_distance, CAPACITY))
        self._fp_file, self._ids_file = fp_file, ids_file
        self._offsets = np.zeros(1024, dtype=np.uint64)  # line start of each kept id, then its end
        self._n = 0
        self._load()

    def __len__(self) -> int:
        return self._n

    def _load(self) -> None:
        fp_file, ids_file = self._fp_file, self._ids_file
        fp_file.seek(0)
        fps = np.frombuffer(fp_file.read(), dtype=np.uint64)
        fp_file.seek(0, os.SEEK_END)
        ids_file.seek(0)
        starts: list[np.ndarray] = []
        pos = 0
        while chunk := ids_file.read(1 << 24):
            starts.append(np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10).astype(np.uint64) + np.uint64(pos + 1))
            pos += len(chunk)
        ids_file.seek(0, os.SEEK_END)
        ends = np.concatenate(starts) if starts else np.empty(0, dtype=np.uint64)
        if len(ends) != len(fps):
            raise ValueError(f"{len(fps)} kept fingerprints but {len(ends)} ids")
        if len(fps):
            self.tables.add_many(fps)
            self._grow(len(fps))
            self._offsets[1 : len(fps) + 1] = ends
            self._n = len(fps)

    def _grow(self, n: int) -> None:
        if self._n + n + 1 > len(self._offsets):
            grown = np.zeros(max(2 * len(self._offsets), self._n + n + 1), dtype=np.uint64)
            grown[: self._n + 1] = self._offsets[: self._n + 1]
            self._offsets = grown

    def check_and_add(self, fps: np.ndarray, ids: list[str]) -> np.ndarray:
        """Decide ``fps`` in order, each against the kept records and the ones of
        this batch kept before it; keep (store and write) those with no match.
        Returns a bool array: True where the record was kept."""
        dist, _ = self.tables.check_and_add_many(fps)
        kept = dist < 0
        new = np.flatnonzero(kept)
        if len(new):
            lines = [(json.dumps(ids[j]) + "\n").encode() for j in new.tolist()]
            self._fp_file.write(fps[new].tobytes())
            self._ids_file.write(b"".join(lines))
            self._grow(len(new))
            base = self._offsets[self._n]
            self._offsets[self._n + 1 : self._n + 1 + len(new)] = base + np.cumsum([len(x) for x in lines], dtype=np.uint64)
            self._n += len(new)
        return kept

    def key(self, row: int) -> str:
        """The id of kept record ``row``. O(1) and one read."""
        self._ids_file.flush()
        start, end = int(self._offsets[row]), int(self._offsets[row + 1])
        return str(json.loads(os.pread(self._ids_file.fileno(), end - start, start)))

    def keys(self, first: int, end: int) -> list[str]:
        """The ids of kept records ``first`` to ``end - 1``."""
        if first >= end:
            return []
        self._ids_file.flush()
        start, stop = int(self._offsets[first]), int(self._offsets[end])
        return [str(json.loads(line)) for line in os.pread(self._ids_file.fileno(), stop - start, start).splitlines()]

    def fingerprints(self, first: int, end: int) -> np.ndarray:
        """The fingerprints of kept records ``first`` to ``end - 1`` (uint64)."""
        if first >= end:
            return np.empty(0, dtype=np.uint64)
        self._fp_file.flush()
        data = os.pread(self._fp_file.fileno(), 8 * (end - first), 8 * first)
        return np.frombuffer(data, dtype=np.uint64)

    def holds(self, key: str, fp: int) -> bool:
        """Whether a kept record has id ``key`` and fingerprint ``fp``. O(T log n + copies of ``fp``)."""
        return any(self.key(row) == key for row in self.tables.rows_of(fp))

    def twin(self, fp: int, limit: int) -> Match | None:
        """The kept twin a drop names: the nearest of the records kept before it
        (rows below ``limit``) within k, the oldest of equally near ones, whatever the
        state of the tables (so that a resumed run names the same twin as an
        uninterrupted one); None if there is none. O(T log n + matches)."""
        tables = self.tables
        best = min(((bin(fp ^ v).count("1"), row, v) for v in tables.matches(fp).tolist()
                    for row in tables.rows_of(v) if row < limit), default=None)
        if best is None:
            return None
        d, row, v = best
        return Match(self.key(row), v, d)
