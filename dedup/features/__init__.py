"""Stage 2: a page's visible text -> weighted features (hashes and weights for simhash).

``tokens`` cuts language-aware tokens (jieba's dictionary for Han),
``params`` holds ``FeatureParams``, ``blocks`` decides which blocks are
content, furniture and prose, ``term_table`` reads how common a token is in
the prose's language (a table derived from wordfreq), ``weights`` weighs
tokens by block and term and caps each one's share; ``word_kernel`` (with
``han_segmenter`` and ``murmur``) does the same tokenising, hashing and
counting in one compiled pass. ``language`` reads the language of the prose,
which the fingerprint carries as a mask.
"""

from .language import UNDETERMINED, language_mask, page_language
from .murmur import feature_hash, feature_hashes
from .weights import FeatureParams, feature_vector, hashed_features, page_features, page_plan, page_texts, split_title

__all__ = ["FeatureParams", "UNDETERMINED", "feature_hash", "feature_hashes", "feature_vector", "hashed_features",
           "language_mask", "page_features", "page_language", "page_plan", "page_texts", "split_title"]
