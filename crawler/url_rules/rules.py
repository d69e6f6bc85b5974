"""What a URL rule says, and which rules a pair of URLs suggests.

A rule claims that, on one host, URLs that differ only in one way serve the
same content. It is a canonical form: two URLs with the same form under a rule
are claimed to be near-duplicates. Three kinds, each learned from a dropped
page's URL and the URL it duplicated:

* ``param``: the values of these query parameters do not matter (session ids,
  sort orders, tracking parameters, ``?print=1``): the form drops them.
* ``prefix``: one path prefix mirrors another (``/mirror/`` and ``/``, ``/fr/``
  and ``/en/`` for untranslated pages): the form maps the first onto the second.
* ``suffix``: a trailing path part does not change the page (``/index.html``
  and ``/``, ``/print`` and nothing): the form maps the first onto the second.

A rule is written as a line: ``param example.com sid``, ``prefix example.com
/mirror/ /``, ``suffix example.com /index.html /``, ``suffix example.com /print
''``; host ``*`` (in settings) means every host.

>>> [r.spec for r in derive("http://h/doc/1.html?sid=x7&lang=en", "http://h/doc/1.html?lang=en")]
['param h sid']
>>> [r.spec for r in derive("http://h/mirror/doc/1.html", "http://h/doc/1.html")]
['prefix h /mirror/ /']
>>> UrlRule.parse("suffix h /index.html /").canonical("http://h/a/index.html?x=1")
'http://h/a/?x=1'
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import cached_property, lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit

from w3lib.url import canonicalize_url

KINDS = ("param", "prefix", "suffix")
MAX_PARAMS = 3  # a pair differing in more parameters suggests no rule
MAX_SEGMENTS = 3  # nor one whose mirrored prefixes are deeper than this


class RuleSyntaxError(ValueError):
    """A rule line that cannot be read."""


Parts = tuple[str, str, str, tuple[tuple[str, str], ...]]


@lru_cache(maxsize=8192)
def parts_of(url: str) -> Parts:
    """(scheme, host, path, sorted query pairs) of a URL, canonicalized as
    Scrapy's request fingerprints do (w3lib), without its fragment. Cached:
    w3lib's canonicalisation is most of the cost of a form, and a page's
    outlinks come again on other pages."""
    p = urlsplit(canonicalize_url(url))
    return p.scheme, p.netloc, p.path or "/", tuple(sorted(parse_qsl(p.query, keep_blank_values=True)))


def url_of(parts: Parts) -> str:
    scheme, host, path, query = parts
    return f"{scheme}://{host}{path}" + (f"?{urlencode(query)}" if query else "")


def host_of(url: str) -> str:
    """The host rules are filed under: as ``parts_of`` (and ``derive``) have it
    (lower case, an international name in its ASCII form)."""
    return parts_of(url)[1]


@dataclass(frozen=True)
class UrlRule:
    """``kind`` (``KINDS``), ``host`` (or ``*``), and what it maps: for ``param``
    ``a`` is the comma-separated parameter names; for ``prefix`` and ``suffix``
    ``a`` is mapped onto ``b``."""

    kind: str
    host: str
    a: str
    b: str = ""

    @cached_property
    def spec(self) -> str:
        """The rule as a line (``parse`` reads it back). Made once per rule (it names
        the rule in every storage call, per page and per outlink)."""
        return shlex.join([self.kind, self.host, self.a] + ([self.b] if self.kind != "param" else []))

    @classmethod
    def parse(cls, line: str) -> UrlRule:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise RuleSyntaxError(f"{line!r}: {exc}") from None
        if not words or words[0] not in KINDS:
            raise RuleSyntaxError(f"{line!r}: a rule starts with one of {', '.join(KINDS)}")
        kind = words[0]
        if kind == "param" and len(words) == 3 and words[2]:
            return cls(kind, words[1].lower(), ",".join(sorted(words[2].split(","))))
        if kind == "prefix" and len(words) == 4 and all(w.startswith("/") and w.endswith("/") for w in words[2:]):
            return cls(kind, words[1].lower(), words[2], words[3])
        if kind == "suffix" and len(words) == 4 and words[2].startswith("/") and words[3][:1] in ("", "/"):
            return cls(kind, words[1].lower(), words[2], words[3])
        forms = {"param": "param HOST NAME[,NAME...]", "prefix": "prefix HOST /FROM/ /TO/",
                 "suffix": "suffix HOST /FROM /TO (or '')"}
        raise RuleSyntaxError(f"{line!r}: write {forms[kind]}")

    @property
    def sub_tree(self) -> bool:
        """A prefix rule whose two sides end in the same directory (``/de/api/`` ->
        ``/en/api/``): ``derive`` never suggests one (it maps the widest prefixes in
        which a pair differs), only ``narrower`` does, once the wider rule met a
        counter-example. Read from the rule itself, so a resumed crawl and every
        process of a shared book know it alike.

        >>> UrlRule("prefix", "h", "/de/api/", "/en/api/").sub_tree, UrlRule("prefix", "h", "/de/", "/en/").sub_tree
        (True, False)
        """
        if self.kind != "prefix":
            return False
        a, b = self.a.rstrip("/").split("/"), self.b.rstrip("/").split("/")
        return len(a) > 1 and len(b) > 1 and a[-1] == b[-1] and a[-1] != ""

    def covers(self, other: UrlRule) -> bool:
        """This rule is ``other``, or the same for every host."""
        return (self.kind, self.a, self.b) == (other.kind, other.a, other.b) and self.host in ("*", other.host)

    def canonical(self, url: str) -> str:
        """The URL's form under this rule (URLs with one form are claimed to be
        near-duplicates); a URL the rule does not touch is its own form."""
        return url_of(self.apply(parts_of(url)))

    def apply(self, parts: Parts) -> Parts:
        """``canonical`` on a URL's ``parts_of`` (canonicalised once, however
        many rules look at it)."""
        scheme, host, path, query = parts
        if self.kind == "param":
            names = set(self.a.split(","))
            query = tuple((k, v) for k, v in query if k not in names)
        elif self.kind == "prefix":
            if path.startswith(self.a):
                path = self.b + path[len(self.a):]
        elif path.endswith(self.a):
            path = path[: len(path) - len(self.a)] + self.b or "/"
        return scheme, host, path, query


MAX_NARROW_SEGMENTS = 4  # a narrower prefix rule has at most this many segments on a side


def narrower(rule: UrlRule, url: str) -> UrlRule | None:
    """The prefix rule one directory deeper than ``rule``, as ``url`` (a URL of the
    pair that suggested ``rule``) goes on: ``prefix h /de/ /en/`` and ``/de/mod/x.html``
    give ``prefix h /de/mod/ /en/mod/``. None for another kind of rule, a URL under
    neither side, one with no directory left below the prefix, or a prefix that
    would be deeper than ``MAX_NARROW_SEGMENTS``. For a mirror whose prefix rule a
    translated page retired: its untranslated sub-trees may still mirror.

    >>> narrower(UrlRule("prefix", "h", "/fr/", "/en/"), "http://h/en/mod/x.html").spec
    'prefix h /fr/mod/ /en/mod/'
    >>> narrower(UrlRule("prefix", "h", "/fr/", "/en/"), "http://h/en/x.html") is None
    True
    """
    if rule.kind != "prefix":
        return None
    path = parts_of(url)[2]
    side = rule.a if path.startswith(rule.a) else rule.b if path.startswith(rule.b) else None
    if side is None:
        return None
    rest = path[len(side):].split("/")
    if len(rest) < 2 or not rest[0] or max(rule.a.count("/"), rule.b.count("/")) > MAX_NARROW_SEGMENTS:
        return None
    return UrlRule("prefix", rule.host, rule.a + rest[0] + "/", rule.b + rest[0] + "/")


def touches(rule: UrlRule, path: str) -> bool:
    """Whether a URL of this path can share a form with another URL under ``rule``:
    a prefix rule touches only paths under one of its sides, a suffix rule only
    paths that end in one of its sides (any other path is its own form, and no
    other URL's form can be it: a mapped path ends in the rule's second side); a
    parameter rule, any path. So a page is judged, and its form kept, only under
    the rules that can pair it: a site whose near-duplicates are numbered pages
    (``/p/5.html`` = ``/p/4.html``) suggests a suffix rule per pair, and each page
    would otherwise be one form row under each of them (up to ``MAX_RULES_PER_HOST``).

    >>> touches(UrlRule("suffix", "h", "/5.html", "/4.html"), "/p/7.html")
    False
    >>> touches(UrlRule("suffix", "h", "/print", ""), "/p/7.html")
    True
    """
    if rule.kind == "prefix":
        return path.startswith(rule.a) or path.startswith(rule.b)
    if rule.kind == "suffix":
        return path.endswith(rule.a) or path.endswith(rule.b)
    return True


def scope_of(path: str) -> str:
    """Where a parameter rule's evidence counts (``RuleBook``): the path's first two directories (a site's
    section, under a language or mobile prefix too: ``/en/articles/``), a directory of digits standing for
    any (``/doc/#/``: numbered documents, dates), or ``/`` for a page at the root. Pairs of
    ``/articles/a7.html?page=2`` = ``a7.html`` say nothing of ``/cat/c10?page=2`` (a category's second page).

    >>> scope_of("/articles/a7.html"), scope_of("/en/cat/c1"), scope_of("/doc/5/"), scope_of("/a.html")
    ('/articles/', '/en/cat/', '/doc/#/', '/')
    """
    dirs = path.split("/")[1:-1][:2]  # (the last part is the page's own name)
    return "/" + "".join(("#" if d.isdigit() else d) + "/" for d in dirs)


def section_of(rule: UrlRule, path: str) -> str:
    """The part of a site where a pair for ``rule`` says something: for a prefix rule, the side of it
    ``path`` lies under and the directory below it (``/fr/api/``; the side itself for a page directly
    under it; digits standing for any, as ``scope_of``), else ``scope_of(path)``. A prefix rule
    learned from copies in one language's ``api/`` says nothing of its ``intro/``, which may be
    translated. O(len(path)).

    >>> r = UrlRule("prefix", "h", "/fr/", "/en/")
    >>> section_of(r, "/fr/api/p0.html"), section_of(r, "/en/index.html"), section_of(r, "/fr/2024/a.html")
    ('/fr/api/', '/en/', '/fr/#/')
    >>> section_of(UrlRule("prefix", "h", "/mirror/", "/"), "/doc/3/")
    '/doc/'
    """
    if rule.kind == "prefix":
        for side in sorted((rule.a, rule.b), key=len, reverse=True):  # (the longer first: "/" holds every path)
            if path.startswith(side):
                head, sep, _ = path[len(side):].partition("/")
                return side + ("#" if head.isdigit() else head) + "/" if sep else side
    return scope_of(path)


def _ordered(kind: str, host: str, x: str, y: str) -> UrlRule:
    """The rule mapping the longer of two sides onto the shorter (ties: the
    greater onto the smaller), so a pair suggests one rule whichever came first."""
    a, b = sorted((x, y), key=lambda s: (len(s), s), reverse=True)
    return UrlRule(kind, host, a, b)


def derive(dup: str, orig: str) -> list[UrlRule]:
    """The rules that would make ``dup`` and ``orig`` (two URLs found to be
    near-duplicates) one form: none unless they are on one host and differ in
    their query only (``param``) or in their path only (``suffix`` when each
    differs in at most its last segment, else ``prefix`` when they share at
    least their last segment and differ in at most ``MAX_SEGMENTS`` leading ones)."""
    s1, h1, p1, q1 = parts_of(dup)
    s2, h2, p2, q2 = parts_of(orig)
    if (s1, h1) != (s2, h2) or (p1, q1) == (p2, q2):
        return []
    if p1 == p2:
        values: dict[str, list[list[str]]] = {}
        for side, query in enumerate((q1, q2)):
            for k, v in query:
                values.setdefault(k, [[], []])[side].append(v)
        differ = sorted(k for k, (x, y) in values.items() if x != y)
        return [UrlRule("param", h1, ",".join(differ))] if len(differ) <= MAX_PARAMS else []
    if q1 != q2:
        return []
    seg1, seg2 = p1.split("/"), p2.split("/")
    lead = 0
    while lead < min(len(seg1), len(seg2)) and seg1[lead] == seg2[lead]:
        lead += 1
    t1, t2 = seg1[lead:], seg2[lead:]
    if len(t1) <= 1 and len(t2) <= 1 and lead >= 1:
        return [_ordered("suffix", h1, "".join("/" + s for s in t1), "".join("/" + s for s in t2))]
    trail = 0
    while trail < min(len(seg1), len(seg2)) - 1 and seg1[-1 - trail] == seg2[-1 - trail]:
        trail += 1
    if trail == 0:
        return []
    head1, head2 = seg1[: len(seg1) - trail], seg2[: len(seg2) - trail]
    if max(len(head1), len(head2)) - 1 > MAX_SEGMENTS:
        return []
    return [_ordered("prefix", h1, "/".join(head1) + "/", "/".join(head2) + "/")]
