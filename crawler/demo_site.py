"""A generated news site with planted near-duplicates, served on 127.0.0.1.

Used by ``bash run.sh`` with no URL, and by the crawl tests. Distinct
articles share one template (nav, ad box, footer); the planted duplicates:

* ``/mirror/a0.html``: an exact copy of article 0 under another URL;
* ``/articles/a1.html?sid=...``: a session-id URL variant (the page shows the id);
* ``/print/a2.html``: article 2 in a print template (no nav, other footer);
* ``/articles/a3-v2.html``: article 3 with another ad, timestamp and view counter;
* ``/list?sort=desc``: the article list in reverse order of ``/list?sort=asc``.

Each duplicate links to a page nothing else links to (``/only-from-*.html``),
which a correct filter never requests, and ``/print/a2.html`` also links to
an article that kept pages link to (still crawled once).

>>> site = DemoSite(n_articles=6)
>>> sorted(site.expected_dropped())[:2]
['/articles/a1.html?sid=8f3a9c', '/articles/a3-v2.html']
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "po", "ba", "ge", "shi", "tan", "mor",
              "len", "dra", "qui", "zen", "fal", "bor", "nix", "cal", "vor", "pel", "sen", "tri", "gal"]
_COMMON = ("the of and to in is that for on with as by was it from at this are be an which".split())


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(n)]


class DemoSite:
    """The site's pages in memory; ``serve()`` starts a real HTTP server for it."""

    def __init__(self, n_articles: int = 12, seed: int = 7) -> None:
        if n_articles < 6:
            raise ValueError("the demo site needs at least 6 articles")
        self.n = n_articles
        rng = random.Random(seed)
        vocab = _words(rng, 3000)
        self.titles = [" ".join(rng.sample(vocab, 4)).title() for _ in range(n_articles)]
        self.bodies = []
        for _ in range(n_articles):
            topic = rng.sample(vocab, 60)
            paras = []
            for _ in range(rng.randint(4, 6)):
                words = [rng.choice(topic) if rng.random() < 0.6 else rng.choice(_COMMON) for _ in range(60)]
                paras.append(" ".join(words).capitalize() + ".")
            self.bodies.append(paras)

    # -- pages ------------------------------------------------------------------

    @staticmethod
    def _template(title: str, body: str, *, nav: bool = True, ad: str = "Buy the new Zenphone today",
                  footer: str = "© 2026 Demo News. All rights reserved.", extra: str = "") -> bytes:
        navhtml = ('<nav><a href="/">Home</a> <a href="/about.html">About</a> '
                   '<a href="/list?sort=asc">All articles</a></nav>') if nav else ""
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
                f"{navhtml}<aside class='ad'>{ad}</aside><main>{body}</main>{extra}"
                f"<footer>{footer}</footer></body></html>").encode()

    def article_body(self, i: int, links: str = "") -> str:
        paras = "".join(f"<p>{p}</p>" for p in self.bodies[i])
        return f"<article><h1>{self.titles[i]}</h1>{paras}</article>{links}"

    def _article_links(self, i: int) -> str:
        nxt = (i + 1) % self.n
        links = [f'<a href="/articles/a{nxt}.html">Next: {self.titles[nxt]}</a>']
        variant = {0: "/mirror/a0.html", 1: "/articles/a1.html?sid=8f3a9c", 2: "/print/a2.html",
                   3: "/articles/a3-v2.html"}.get(i)
        if variant:
            links.append(f'<a href="{variant}">Other version</a>')
        return "<div class='related'>" + " ".join(links) + "</div>"

    def page(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request path and its query."""
        html = "text/html; charset=utf-8"
        if path == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nAllow: /\n"
        if path == "/":
            items = "".join(f'<li><a href="/articles/a{i}.html">{t}</a></li>' for i, t in enumerate(self.titles))
            body = (f"<h1>Demo News</h1><p>Welcome to the demo news site of scrapy-neardup, where every article "
                    f"is generated and some are planted near-duplicates.</p><ul>{items}</ul>"
                    f'<p><a href="/notes.txt">Notes</a> <a href="/short.html">Soon</a></p>')
            return 200, html, self._template("Demo News", body)
        if path == "/about.html":
            body = ("<h1>About</h1><p>This site exists to show a crawler that drops near-duplicate pages and "
                    "their outlinks before they reach the index. It is served on the loopback interface only, "
                    "and every run of the demo generates the same pages from a fixed seed.</p>")
            return 200, html, self._template("About", body)
        if path == "/notes.txt":
            return 200, "text/plain", b"plain text notes, not HTML"
        if path == "/short.html":
            return 200, html, b"<html><body><p>Coming soon</p></body></html>"
        if path == "/list":
            order = list(range(self.n))
            if query.get("sort", ["asc"])[0] == "desc":
                order.reverse()
            items = "".join(f'<li><a href="/articles/a{i}.html">{self.titles[i]}</a> {" ".join(self.bodies[i][0].split()[:25])}</li>'
                            for i in order)
            other = "desc" if query.get("sort", ["asc"])[0] != "desc" else "asc"
            body = f'<h1>All articles</h1><ol>{items}</ol><p><a href="/list?sort={other}">Reverse order</a></p>'
            if other == "asc":  # the desc page: a link only it has
                body += '<p><a href="/only-from-list-desc.html">x</a></p>'
            return 200, html, self._template("All articles", body)
        if path.startswith("/only-from-"):
            return 200, html, self._template("Orphan", "<p>" + " ".join(_words(random.Random(path), 80)) + "</p>")
        if path == "/mirror/a0.html":
            return 200, html, self._template(self.titles[0], self.article_body(
                0, self._article_links(0).replace("/mirror/a0.html", "/only-from-mirror.html")))
        if path == "/print/a2.html":
            links = '<p><a href="/only-from-print.html">x</a> <a href="/articles/a5.html">y</a></p>'
            return 200, html, self._template(self.titles[2], self.article_body(2, links), nav=False, ad="",
                                             footer="Printed from Demo News")
        if path == "/articles/a3-v2.html":
            extra = "<p class='meta'>Updated 2026-11-22 09:14 · 48213 views</p>"
            links = self._article_links(3).replace("/articles/a3-v2.html", "/only-from-v2.html")
            return 200, html, self._template(self.titles[3], self.article_body(3, links),
                                             ad="Holiday sale: flights to Lisbon from 49 euros", extra=extra)
        if path.startswith("/articles/a") and path.endswith(".html"):
            try:
                i = int(path[len("/articles/a") : -len(".html")])
            except ValueError:
                return 404, html, b"<p>not found</p>"
            if not 0 <= i < self.n:
                return 404, html, b"<p>not found</p>"
            links = self._article_links(i)
            extra = ""
            if "sid" in query:
                extra = f"<p class='session'>session {query['sid'][0]}</p>"
                links = links.replace("/articles/a1.html?sid=8f3a9c", "/only-from-sid.html")
            return 200, html, self._template(self.titles[i], self.article_body(i, links), extra=extra)
        return 404, html, b"<p>not found</p>"

    # -- what a correct crawl does -------------------------------------------

    def expected_dropped(self) -> dict[str, str]:
        """Dropped path -> the path it duplicates."""
        return {"/mirror/a0.html": "/articles/a0.html", "/articles/a1.html?sid=8f3a9c": "/articles/a1.html",
                "/print/a2.html": "/articles/a2.html", "/articles/a3-v2.html": "/articles/a3.html",
                "/list?sort=desc": "/list?sort=asc"}

    def expected_kept(self) -> set[str]:
        return {"/", "/about.html", "/list?sort=asc"} | {f"/articles/a{i}.html" for i in range(self.n)}

    def never_requested(self) -> set[str]:
        return {"/only-from-mirror.html", "/only-from-sid.html", "/only-from-print.html",
                "/only-from-v2.html", "/only-from-list-desc.html"}

    # -- serving ----------------------------------------------------------------

    def serve(self, port: int = 0) -> DemoServer:
        return DemoServer(self, port)


def byte_range(header: str, length: int) -> tuple[int, int] | None:
    """The one byte range ``header`` (a ``Range`` value) asks of a body of ``length`` bytes, as
    (first, last) inclusive; None for a header this server answers with the whole body (not bytes,
    several ranges, malformed: RFC 9110 lets a server ignore ``Range``); (length, length) when it is
    unsatisfiable (answered 416).

    >>> byte_range("bytes=10-19", 100), byte_range("bytes=90-", 100), byte_range("bytes=-5", 100)
    ((10, 19), (90, 99), (95, 99))
    >>> byte_range("bytes=100-", 100), byte_range("bytes=0-1,5-6", 100), byte_range("items=1-2", 100)
    ((100, 100), None, None)
    >>> byte_range("bytes=5-3", 100), byte_range("bytes=-", 100)  # (invalid: ignored)
    (None, None)
    """
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)-(\d*)\s*", header, re.ASCII | re.IGNORECASE)
    if m is None or not (m[1] or m[2]) or (m[1] and m[2] and int(m[1]) > int(m[2])):
        return None
    if not m[1]:  # (the last N bytes)
        return (max(0, length - int(m[2])), length - 1) if int(m[2]) and length else (length, length)
    if int(m[1]) >= length:
        return length, length
    return int(m[1]), min(int(m[2]), length - 1) if m[2] else length - 1


class LocalServer:
    """A real threaded HTTP server on 127.0.0.1 (the demo's, and the tests' sites).

    ``respond(target) -> (status, headers, body)`` answers each GET, after
    ``delay(target)`` seconds if given. Every request's target is logged in
    order (``requests``), with its time (``times``) and a count per target (``hits``).
    A ``Range`` of one span of a 200's body is answered with it (206), as a static
    file server does (``If-Range`` honoured against the answer's ``ETag``); the targets
    so answered are counted apart (``partial``), their bodies never sent.
    """

    def __init__(self, respond: Callable[[str], tuple[int, dict[str, str], bytes]],
                 delay: Callable[[str], float] | None = None, *, port: int = 0) -> None:
        self.requests: list[str] = []
        self.times: list[float] = []
        self.hits: Counter[str] = Counter()
        self.partial: Counter[str] = Counter()
        server, lock = self, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with lock:
                    server.requests.append(self.path)
                    server.times.append(time.monotonic())
                    server.hits[self.path] += 1
                status, headers, body = respond(self.path)
                if delay is not None:
                    time.sleep(delay(self.path))
                asked = self.headers.get("Range")
                if_range = self.headers.get("If-Range")
                span = byte_range(asked, len(body)) if asked and status == 200 else None
                etag = headers.get("ETag", "")
                # (If-Range compares strongly: a weak validator never matches)
                if span is not None and (if_range is None or (if_range == etag and not etag.startswith("W/"))):
                    first, last = span
                    if first >= len(body):
                        status, headers, body = 416, {**headers, "Content-Range": f"bytes */{len(body)}"}, b""
                    else:
                        status, body, headers = 206, body[first : last + 1], {
                            **headers, "Content-Range": f"bytes {first}-{last}/{len(body)}"}
                    with lock:
                        server.partial[self.path] += 1
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def whole(self) -> list[str]:
        """The targets answered whole, in order: ``requests`` less one per ranged answer (``partial``: a
        predicted copy's ranged GET comes before its whole request, if it is made whole after it)."""
        ranged, out = self.partial.copy(), []
        for target in self.requests:
            if ranged[target] > 0:
                ranged[target] -= 1
            else:
                out.append(target)
        return out

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DemoServer(LocalServer):
    """The demo site, served on 127.0.0.1; ``url`` is its front page."""

    def __init__(self, site: DemoSite, port: int = 0) -> None:
        def respond(target: str) -> tuple[int, dict[str, str], bytes]:
            parts = urlsplit(target)
            status, ctype, body = site.page(parts.path, parse_qs(parts.query))
            return status, {"Content-Type": ctype}, body

        super().__init__(respond, port=port)
        self.url += "/"
