"""What the filter says about a page it could not fingerprint."""

from __future__ import annotations

import logging

from scrapy.http import HtmlResponse, Request
from scrapy.utils.test import get_crawler

from scrapy_neardup.crawler.filter.verdict import SKIPPED
from scrapy_neardup.crawler.middleware import NearDupMiddleware
from scrapy_neardup.dedup.fingerprint.jobs import JobResult


def _middleware() -> NearDupMiddleware:
    crawler = get_crawler(settings_dict={"NEARDUP_WORKERS": 0})
    crawler.stats.open_spider()
    return NearDupMiddleware.from_crawler(crawler)


def test_an_error_caught_by_the_library_is_a_warning_and_counted(caplog):
    mw = _middleware()
    response = HtmlResponse("http://127.0.0.1/a.html", body=b"<p>x</p>", request=Request("http://127.0.0.1/a.html"))
    with caplog.at_level(logging.DEBUG, logger="scrapy_neardup.crawler.filter.verdict"):
        assert mw.verdicts.decide(response, JobResult(None, "unparsable: ValueError", "", "")) == SKIPPED
        assert mw.verdicts.decide(response, JobResult(None, "binary: pdf", "", "")) == SKIPPED
        assert mw.verdicts.decide(response, JobResult(None, "too_short", "", "x")) == SKIPPED
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["could not fingerprint http://127.0.0.1/a.html (unparsable: ValueError)"]
    stats = mw.stats.get_stats()
    assert (stats["neardup/skipped/unparsable"], stats["neardup/skipped/binary"], stats["neardup/skipped/too_short"]) == (1, 1, 1)
    assert stats["neardup/skipped"] == 3  # passed through unchecked, whatever the reason
    mw.spider_closed("finished")


def test_error_pages_pass_unchecked_unless_asked():
    body = ("<html><body><p>" + "this page could not be found on the server, sorry " * 10 + "</p></body></html>").encode()

    def page(i: int, status: int) -> HtmlResponse:
        url = f"http://127.0.0.1/{i}.html"
        return HtmlResponse(url, status=status, body=body, request=Request(url))

    mw = _middleware()
    for i, status in enumerate((404, 410, 500)):
        response = page(i, status)
        mw.process_spider_input(response)
        assert mw._pending[response] == "error_status"
    assert mw.stats.get_value("neardup/skipped/error_status") == 3
    assert mw.stats.get_value("neardup/fetched") == mw.stats.get_value("neardup/skipped") == 3
    mw.spider_closed("finished")

    crawler = get_crawler(settings_dict={"NEARDUP_WORKERS": 0, "NEARDUP_CHECK_ERROR_PAGES": True})
    crawler.stats.open_spider()
    mw = NearDupMiddleware.from_crawler(crawler)
    response = page(9, 404)
    mw.process_spider_input(response)
    assert isinstance(mw._pending[response], JobResult) and mw._pending[response].value is not None
    mw.spider_closed("finished")
