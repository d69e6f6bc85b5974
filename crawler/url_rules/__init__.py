"""Learned URL rules: which URLs of a site serve the same content as others,
learned from the filter's own verdicts, so that the crawl stops requesting them
(``rules``: what a rule is and how a pair of URLs suggests one; ``book``: the
evidence, the states, and the decision to avoid a request)."""

from .book import RuleBook
from .rules import UrlRule, derive

__all__ = ["RuleBook", "UrlRule", "derive"]
