"""scrapy-neardup's library: visible text, features, simhash and the permuted-table store.

It never imports scrapy or twisted.
"""

from .fingerprint import SCHEME_VERSION, Fingerprint, Fingerprinter, read_document
from .simhash import feature_hash, from_hex, hamming, simhash, simhash_features, to_hex
from .store import Match, SimhashStore, StoreError, StoreMismatchError
from .text import Page, extract

__all__ = [
    "SCHEME_VERSION", "Fingerprint", "Match", "SimhashStore", "StoreError", "StoreMismatchError", "Fingerprinter", "Page", "extract", "feature_hash",
    "from_hex", "hamming", "read_document", "simhash", "simhash_features", "to_hex",
]
