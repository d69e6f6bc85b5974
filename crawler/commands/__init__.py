"""The ``neardup`` commands of the Scrapy side, one module each: ``crawl``,
``search`` (the index of kept pages) and ``rules`` (the learned URL rules).
``scrapy_neardup.crawler.cli`` dispatches to them; the library's commands
(``fingerprint``, ``distance``, ``scheme``, ``warmup``) are ``scrapy_neardup.dedup.cli``."""
