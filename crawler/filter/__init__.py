"""The near-duplicate filter's parts, in the order a response meets them.

``crawler.middleware.NearDupMiddleware`` is the filter's face to Scrapy (a
spider middleware); it hands each response through these stages:

1. ``unchecked``: whether the response passes through unchecked (not HTML,
   too large, an error page, ``neardup_skip``), and why;
2. ``workers``: its fingerprint, from a worker process or the crawl's thread,
   with the compiled kernels warmed off the crawl's thread;
3. ``verdict``: the store's verdict (kept, dropped, unchanged, skipped) and
   what of the page's output it lets through; ``store_faults`` rides out a
   shared store's outage meanwhile;
4. ``duplicates_log``: every drop explained, in the duplicates file and the log;
5. ``learned_rules``: the verdicts taught to the URL rule book, and the
   requests it says need not be made left out;
6. ``items``: the page's items filled in with its fingerprint, title and text.

The counts the stages keep are defined in ``crawler.counts``; ``long_lived`` keeps the
objects the filter loads at start out of Python's full garbage collections.
"""
