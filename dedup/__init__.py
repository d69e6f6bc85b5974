"""scrapy-neardup's library: visible text, features, simhash and the permuted-table store.

The stages, each a subpackage or module: ``text`` (HTML bytes -> visible
text), ``features`` (text -> weighted feature hashes), ``simhash``
(features -> 64-bit fingerprint), ``fingerprint`` (the pipeline of the three,
and its worker jobs), ``store`` (fingerprints within k bits). ``jit`` says
which compiled kernels a process may call; each group of kernels warms up
in its own package (``fingerprint.warmup``, ``store.warmup``).

It never imports scrapy or twisted.
"""

from .features import feature_hash
from .fingerprint import SCHEME_VERSION, Fingerprint, Fingerprinter, read_document
from .simhash import from_hex, hamming, simhash, simhash_features, to_hex
from .store import Match, SimhashStore, StoreError, StoreMismatchError
from .text import Page, extract

__all__ = [
    "SCHEME_VERSION", "Fingerprint", "Match", "SimhashStore", "StoreError", "StoreMismatchError", "Fingerprinter",
    "Page", "extract", "feature_hash", "from_hex", "hamming", "read_document", "simhash", "simhash_features",
    "to_hex",
]
