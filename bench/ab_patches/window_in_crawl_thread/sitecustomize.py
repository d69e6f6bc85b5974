"""For ``bench/crawl_ab.py --patch``: a page's head for ranged GETs (``window.page_head``) made on the crawl's
thread as each response comes, as before it moved into the worker process with the fingerprint."""
import sys

if "scrapy_neardup.dedup.fingerprint.worker" not in sys.orig_argv:  # (the crawl's process, not a worker)
    import scrapy_neardup.crawler.filter.learned_rules as learned_rules
    import scrapy_neardup.crawler.filter.workers as workers

    _init, _downloaded, _learn = (workers.FingerprintWorkers.__init__, learned_rules.LearnedRules._downloaded,
                                  learned_rules.LearnedRules.learn)

    def __init__(self, *args, **kwargs):
        _init(self, *args, **kwargs)
        self.window = 0  # (the worker makes no head)

    def _downloaded_then(self, response, request):
        if self.confirm_bytes and response.status == 200:
            self._keep_head(learned_rules._defragged(request.url), response)
        _downloaded(self, response, request)

    def learn(self, url, fp, duplicate_of=None, response=None, head=None):
        _learn(self, url, fp, duplicate_of)  # (its head was kept as it came)

    workers.FingerprintWorkers.__init__ = __init__
    learned_rules.LearnedRules._downloaded = _downloaded_then
    learned_rules.LearnedRules.learn = learn
