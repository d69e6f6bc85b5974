"""A user-style spider for ``crawl_bench.py``: it follows links with its own
``LinkExtractor`` (lxml, in the crawl's thread) and yields ``{url, title}``,
as Scrapy's tutorial spiders do; the near-duplicate filter fills nothing in
that the spider does not yield.

    scrapy runspider bench/link_spider.py -a start_url=URL
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor


class LinkSpider(scrapy.Spider):
    name = "links"

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start_url]
        self.allowed_domains = [urlsplit(start_url).hostname or ""]
        self.links = LinkExtractor()

    def parse(self, response: Response) -> Iterator[Any]:
        if not isinstance(response, TextResponse):
            return
        yield {"url": response.url, "title": response.css("title::text").get()}
        for link in self.links.extract_links(response):
            yield response.follow(link, callback=self.parse)
