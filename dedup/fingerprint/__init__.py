"""The fingerprint pipeline: HTML bytes -> visible text -> features -> simhash.

``pipeline`` holds ``Fingerprinter`` (the stages in order, under a named
scheme); ``jobs`` runs it in worker processes for the crawler; ``warmup``
compiles the kernels of every stage it calls (``jit`` group ``fingerprint``).
"""

from .pipeline import DEFAULT_MIN_TOKENS, SCHEME_VERSION, Fingerprint, Fingerprinter, read_document

__all__ = ["DEFAULT_MIN_TOKENS", "SCHEME_VERSION", "Fingerprint", "Fingerprinter", "read_document"]
