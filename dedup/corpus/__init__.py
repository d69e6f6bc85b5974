"""Corpus deduplication (``neardup dedup``): the crawl's rule over files of records.

``inputs`` expands the command's arguments into files and reads their records
in order (JSON lines, also gzip or zstd compressed; HTML files; Parquet;
WARC); ``jobs`` parses and fingerprints batches of them in worker processes;
``run`` holds ``CorpusRun``, which decides each record online in input order
against the records kept before it and writes ``unique.jsonl``,
``duplicates.jsonl`` and ``summary.json``, resumably. docs/corpus.md tells
the whole of it.
"""

from .inputs import InputError, expand_inputs
from .jobs import FieldOptions
from .run import CorpusError, CorpusRun, DedupOptions, RunStopped, StrictStop

__all__ = ["CorpusError", "CorpusRun", "DedupOptions", "FieldOptions", "InputError", "RunStopped", "StrictStop", "expand_inputs"]
