"""The ready spider's arguments (``SiteArguments``): parsed once, each bad
value refused with an error that names the argument."""

from __future__ import annotations

import pytest

from scrapy_neardup.crawler.spiders.site import SiteArguments, SiteSpider, SpiderArgumentError


def test_arguments_as_the_command_line_gives_them():
    args = SiteArguments.parse("http://a.test/, https://b.test/x", allow="/docs/", deny=r"\?print=",
                               max_depth="3", max_pages="500", stay_on_host="No")
    assert args == SiteArguments(("http://a.test/", "https://b.test/x"), "/docs/", r"\?print=", 3, 500, False)
    assert SiteArguments.parse("http://a.test/") == SiteArguments(("http://a.test/",))
    assert SiteArguments.parse("http://a.test/", max_depth="0").max_depth == 0
    # a comma separates URLs only before a scheme: one inside a URL is the URL's (it was split there)
    assert SiteArguments.parse("http://a.test/n/1.html?a=1,2,HTTPS://b.test/?c=3,4").start_urls == \
        ("http://a.test/n/1.html?a=1,2", "HTTPS://b.test/?c=3,4")
    assert SiteArguments.parse(["http://a.test/?a=1,2", "http://b.test/?u=a,https://c.test/"]).start_urls == \
        ("http://a.test/?a=1,2", "http://b.test/?u=a,https://c.test/")  # (a list is not split again)


@pytest.mark.parametrize("word,value", [("true", True), ("YES", True), ("on", True), ("1", True),
                                        ("False", False), ("no", False), ("off", False), ("0", False)])
def test_stay_on_host_takes_the_usual_spellings(word, value):
    assert SiteArguments.parse("http://a.test/", stay_on_host=word).stay_on_host is value


@pytest.mark.parametrize("kwargs,message", [
    ({"start_url": ""}, "start_url: give at least one start URL"),
    ({"start_url": "127.0.0.1:8701"}, "start_url '127.0.0.1:8701': a URL needs http:// or https://"),
    ({"start_url": "ftp://a.test/"}, "a URL needs http:// or https://"),
    ({"start_url": "http:///path"}, "a URL needs a host"),
    ({"max_depth": "abc"}, "max_depth must be a whole number >= 0, got 'abc'"),
    ({"max_depth": "-1"}, "max_depth must be a whole number >= 0"),
    ({"max_pages": "-1"}, "max_pages must be a whole number >= 1, got '-1'"),
    ({"max_pages": "0"}, "max_pages must be a whole number >= 1"),
    ({"max_pages": "2.5"}, "max_pages must be a whole number"),
    ({"stay_on_host": "maybe"}, "stay_on_host must be true or false"),
    ({"allow": "("}, "allow must be a regular expression"),
    ({"deny": "[a-"}, "deny must be a regular expression"),
])
def test_bad_arguments_are_named(kwargs, message):
    kwargs = {"start_url": "http://a.test/", **kwargs}
    with pytest.raises(SpiderArgumentError, match=message.replace("?", r"\?")):
        SiteArguments.parse(**kwargs)
    with pytest.raises(SpiderArgumentError):
        SiteSpider(**kwargs)


def test_the_spider_installs_its_page_limit_over_the_crawler_process_settings():
    """(A crawler process merges its settings over a crawler's of the same
    priority: the page limit must survive that, as ``scrapy crawl`` makes it.)"""
    from scrapy.crawler import CrawlerProcess

    from scrapy_neardup.crawler.spiders.page_limit import PageLimitMiddleware

    theirs = {"scrapy_neardup.crawler.avoid_middleware.AvoidMiddleware": 7}
    process = CrawlerProcess({"DOWNLOADER_MIDDLEWARES": theirs, "LOG_INSTALL_ROOT_HANDLER": False})
    crawler = process.create_crawler(process.create_crawler(SiteSpider))
    assert crawler.settings.getdict("DOWNLOADER_MIDDLEWARES") == {**theirs, PageLimitMiddleware: 80}
