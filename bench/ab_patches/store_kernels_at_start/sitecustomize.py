"""For ``bench/crawl_ab.py --patch``: the crawl's process loads the store's kernels at the
start, as before ``STORE_KERNELS_FROM`` (as soon as a worker has cached them)."""
import scrapy_neardup.crawler.filter.workers as workers

workers.STORE_KERNELS_FROM = 0
