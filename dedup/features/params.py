"""The parameters of the features (``FeatureParams``): which blocks count and
how much, how terms weigh, the share cap. Their ``tag`` is part of the scheme
string a store records. The defaults were chosen by ``bench/quality.py``
(see BENCHMARKS.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FeatureParams:
    furniture_weight: float = 0.2
    link_density_cutoff: float = 0.5  # blocks with more link text than this are furniture
    number_weight: float = 0.2
    tf_power: float = 1.0
    bigrams: bool = False
    title_weight: float = 1.0
    short_block_tokens: int = 20  # blocks with fewer (estimated) tokens count as furniture; 0: off
    max_share: float = 0.05  # cap on one feature's share of the page's total weight; 0: off
    #: listings (blocks mostly inside <pre>/<code>/<kbd>/<samp>) count as furniture on a page with at
    #: least this many tokens of prose; 0: listings are content
    listing_prose_tokens: int = 40
    #: the prose's language is part of the fingerprint (see ``language``); the term weights read
    #: the language either way
    language: bool = True
    #: the zipf value (log10 of occurrences per billion words) above which a token's weight falls
    #: as 1 / its frequency in general text of the prose's language (``term_table``)
    zipf_knee: float = 5.0

    @property
    def tag(self) -> str:
        """Short text naming these parameters, part of the scheme identity."""
        return (f"fw{self.furniture_weight:g}ld{self.link_density_cutoff:g}zk{self.zipf_knee:g}"
                f"nw{self.number_weight:g}tf{self.tf_power:g}{'bi' if self.bigrams else 'uni'}"
                f"tw{self.title_weight:g}sb{self.short_block_tokens}ms{self.max_share:g}"
                f"lp{self.listing_prose_tokens}{'lang' if self.language else ''}")
