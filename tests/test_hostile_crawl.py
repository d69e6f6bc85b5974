"""A real crawl of the generated hostile corpus: every page is fingerprinted or
skipped with a counted reason, nothing raises, the crawl finishes (issue 14).
The time and memory each page costs are measured in bench/hostile.py."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fixtures.hostile import hostile_pages
from tests.test_crawl import scrapy_crawl, stat


def test_hostile_pages_are_fingerprinted_or_skipped_with_a_reason(tmp_path):
    pages = hostile_pages()
    links = "".join(f'<a href="{p}">{p}</a> ' for p in pages)
    index = (f"<html><body><p>An index of hostile pages for the near-duplicate filter, with enough words to "
             f"be fingerprinted itself.</p>{links}</body></html>").encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            ctype, body, _ = pages.get(self.path, ("text/html", index, ""))
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
        r = scrapy_crawl(url, tmp_path, "DOWNLOAD_WARNSIZE=0", "LOG_LEVEL=INFO")
    finally:
        httpd.shutdown()
        httpd.server_close()
    log = r.stderr
    assert r.returncode == 0 and "'finish_reason': 'finished'" in log, log[-3000:]
    want = Counter(exp for _, _, exp in pages.values())
    for reason, n in want.items():
        if reason == "fingerprinted":
            continue
        assert (stat(log, f"neardup/skipped/{reason}") or 0) == n, (reason, log[-4000:])
    assert stat(log, "neardup/skipped/unparsable") is None
    checked = stat(log, "neardup/checked") or 0
    assert checked == want["fingerprinted"] + 1  # (+ the index page)
    skipped = sum(stat(log, f"neardup/skipped/{r}") or 0 for r in ("binary", "empty", "too_short", "too_large"))
    assert checked + skipped == len(pages) + 1
    assert "Traceback" not in log
