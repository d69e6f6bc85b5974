"""The rule book: evidence for and against URL rules, and the decision to
avoid a request. Kept in SQLite (a file beside the store, or in memory), or
on Redis beside a shared store, where every process adds to the same
evidence and acts on the same rules (``storage``).

For every page the filter checks, ``observe`` records its URL and fingerprint
and compares it with the first page seen of the same form under each live
rule of its host: within k bits is evidence for the rule, farther is a
counter-example, which retires the rule for good (a parameter rule's, in a
section where none of its pairs agreed, keeps it out of that section instead:
it never acted there). A counter-example is
against a path rule only when the rule is what makes the pair one form:
``p/1.html?sid=7`` != ``p/1.html`` differs in a parameter alone and says
nothing of ``prefix /p/ /m/``, so it retires exactly the rules it contradicts. A dropped page's URL and
the URL it duplicated suggest new rules (``rules.derive``); a new rule is
first tried on the host's pages already seen, so that a counter-example from
the past (a translated page under a mirrored language prefix, say) retires it
at once. With ``narrow`` (the crawl confirms predicted copies by content), a
pair whose prefix rule is retired suggests the rule one directory deeper instead (``rules.narrower``: ``/de/mod/`` -> ``/en/mod/`` when ``/de/`` ->
``/en/`` met a translated page), learned and retired on its own evidence, so
the untranslated sub-trees of a partly translated mirror are still learned; such a
rule acts only through confirmation, so a miss that costs no request more than a
plain crawl (``came_whole``: a translated page comes whole in the answer to its ranged
GET) is not a counter-example to it. A rule with ``min_evidence`` agreeing pairs and no counter-example
is *active*: ``avoid`` then tells the crawl not to request a URL whose form
under it already has a fetched page (that page's outlinks stand for it),
except a share ``explore`` of them, fetched to keep testing the rule. A parameter rule
acts only in the sections where its pairs agreed, and there on the values they showed until
they showed ``VALUES_ANY``, through confirmation by content while ``narrow`` (``confirmed_only``). When a
rule is retired, the requests it avoided are handed back (``release``) to be
made after all: a rule that stops holding delays pages, it does not lose them.

Costs: ``observe`` is one page row and, per live rule of the host that
touches the page's path (``rules.touches``, found with a look-up per slash of
the path, not a pass over the host's rules), one lookup and at most one form
row (and a new rule, a pass over those of the latest ``BACKFILL`` pages of the
host it touches, which SQLite picks out by their path); ``avoid`` one lookup
per active rule of the host that touches the URL's path (found the same way). Rules per host are
capped (``MAX_RULES_PER_HOST``); a retired rule's forms are deleted. SQLite
writes are committed at least every second and at ``close``, and a
retirement at once: a kill loses at most the last second of evidence, never
a retirement. A shared book reads the others' rules every ``REFRESH_EVERY``.

>>> book = RuleBook(None, max_distance=3, min_evidence=2, explore=0.0)
>>> for i in range(3):
...     book.observe(f"http://h/a{i}.html", 1000 + i)
...     book.observe(f"http://h/a{i}.html?sid={i}", 1000 + i, duplicate_of=f"http://h/a{i}.html")
>>> book.avoid("http://h/a1.html?sid=zz")
('param h sid', 'http://h/a1.html', False)
>>> book.avoid("http://h/a9.html?sid=zz") is None  # nothing of that form fetched yet
True
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote_plus, urlencode

import mmh3

from .etags import MAX_CHANGES, Change, Changes, predicted
from .rules import Parts, UrlRule, derive, host_of, narrower, parts_of, scope_of, section_of, touches, url_of
from .storage import Avoided, Storage, open_storage, read_book

logger = logging.getLogger(__name__)

CANDIDATE, ACTIVE, RETIRED, PINNED = "candidate", "active", "retired", "pinned"
PIN, FORBID = "pin", "forbid"  # the book's settings that name rules (JSON lists of rule lines)
SCOPE = "scope "  # + a parameter rule's line, a tab and one of its scopes: a setting of the book, valued "v"
# (its values are kept, ``VALUE``) or "1" (a book written before values were kept: any value)
AGAINST = "against "  # + a parameter rule's line, a tab and a scope where a pair disagreed before any agreed
#: Sections a parameter rule may be kept out of (``AGAINST``): one more retires it, wrong in so many places
MAX_AGAINST = 16
VALUE = "value "  # + the rule's line, a tab, the scope, a tab and a parameter's value seen agree there
# (``_tokens``): a setting each, so that processes sharing a book only ever add to what the others wrote
#: A parameter rule acts in a section on any value of a parameter once pairs there agreed with this many
#: distinct values of it (its absence not counted): before, only on values seen agree. One-page categories
#: whose ``?page=2`` (and ``?page=1``) give page 1 back teach ``param page`` with two values, which say
#: nothing of ``page=2`` or ``page=3`` elsewhere; session ids show three in two or three pairs.
VALUES_ANY = 3
NARROW = "narrow"  # the book's setting: "1" when the crawl that wrote it last confirmed predicted copies by content
CONFIRM = "confirm "  # + a prefix rule's line: "1" when its first pair whose bytes were known was a byte-for-byte
# copy (it acts only through confirmation by content, ``RuleState.confirm``), "0" when not
WHERE = "where "  # + a prefix rule's line, a tab and a section where one of its pairs agreed (either side's,
# ``rules.section_of``): it acts there (``_acts_in``); a setting each, as ``SCOPE``
ETAG = "etag "  # + the rule's line, a tab, an ETag part's index, a tab and its value in a fetched page: its value
# in a copy (``etags.change_of``; a setting each, so that processes sharing a book only ever add to it)
MAX_RULES_PER_HOST = 256  # (a site of 12 language trees of a few sections each: ~200 prefix rules)
BACKFILL = 20_000  # a new rule is tried on at most this many of the host's latest pages
REFRESH_EVERY = 5.0  # seconds: rules another process learned or retired (a shared book)
#: Agreeing pairs a sub-tree rule (``UrlRule.sub_tree``) needs to act (or ``min_evidence``, if fewer).
#: It acts only through confirmation by content (each predicted copy is a ranged GET checked against
#: the fetched page's bytes), so a wrong prediction costs at most the full GET after the ranged one (a
#: page with its copy's ETag but other bytes; with another ETag it comes whole at the cost of a plain
#: crawl's request), never a page, and one of other content retires it (a page of other bytes but
#: near-duplicate content counts for it, at a request more each: the host's ranged GETs stop past a
#: fifth of misses, ``learned_rules._ranges_pay``): the pair that suggests it is enough. Its scope (a
#: sub-directory of a tree where a translated page was met) is small: each pair waited for is a body
#: downloaded. On the generated mirrors, 1 pair against 3 (two runs each, one session): 86.2-86.6% of
#: plain's duplicate bodies never downloaded against 72.8-78.1%, and 80.9-85.1% against 67.1-75.3% where
#: copies have ETags of their own; requests 1.004 of plain's against 1.003; nothing lost either way.
SUB_TREE_MIN_EVIDENCE = 1
#: sub-tree rules a retired prefix rule suggests at once, of the sections where it acted (``RuleBook._narrow``)
MAX_NARROWED = 8


def _raw_path(url: str) -> str:
    """``url``'s path as written (from the third slash), for a cheap look before ``parts_of``. O(len(url))."""
    rest = url.split("/", 3)
    return "/" + rest[3] if len(rest) > 3 else "/"


def _in_scope(st: RuleState, scope: str) -> bool:
    """Whether parameter rule ``st`` acts on URLs of ``scope`` (``rules.scope_of``): pinned, anywhere; else
    only where a pair of its own agreed. Learned from ``/articles/a7.html?page=2`` = ``a7.html``, ``param
    page`` left out the second pages of every category (``/cat/c10?page=2``: other products): a helper's
    breadth-first crawl of a shop never fetched 46% of its distinct pages. O(1)."""
    return st.rule.kind != "param" or st.pinned or (scope in st.scopes and scope not in st.against)


def _acts_in(st: RuleState, path: str) -> bool:
    """Whether rule ``st`` acts on a URL of ``path``: a parameter rule in the scopes of ``_in_scope``; a prefix
    rule only in the sections (``rules.section_of``) where a pair of its own agreed, on either side, unless it
    is pinned or a sub-tree rule (confirmed by content); a suffix rule anywhere it touches. Learned from ten
    copies under ``/fr/api/``, ``prefix /fr/ /en/`` left out the translated front page and ``intro/`` of a
    mirror that a shared crawl met in another order than its start pages' (61 distinct pages never
    fetched). O(len(path))."""
    if st.rule.kind == "param":
        return _in_scope(st, scope_of(path))
    if st.rule.kind != "prefix" or st.pinned or st.confirmed:
        return True
    return section_of(st.rule, path) in st.scopes


def _tokens(rule: UrlRule, parts: Parts) -> dict[str, str]:
    """Per parameter of a parameter rule, what a URL's query holds of it, encoded: ``page=2``, or the bare
    name when it is absent (``page``). O(query)."""
    return {name: urlencode([(k, v) for k, v in parts[3] if k == name]) or quote_plus(name)
            for name in rule.a.split(",")}


def _any_token(name: str) -> str:
    """The token that stands for any value of parameter ``name`` (no value encodes as ``*``)."""
    return quote_plus(name) + "=*"


def _any(seen: set[str], name: str) -> bool:
    """Whether any value of parameter ``name`` is taken among the tokens ``seen`` (``_collapsed``). O(1)."""
    return _any_token(name) in seen


def _collapsed(seen: set[str], names: Iterable[str]) -> set[str]:
    """``seen`` with the values of each parameter of which ``VALUES_ANY`` were seen replaced by the token for
    any (``_any_token``): a section's values stay a handful whatever the session ids met. O(len(seen))."""
    out = set(seen)
    for name in names:
        mark, prefix = _any_token(name), quote_plus(name) + "="
        values = {t for t in out if t.startswith(prefix) and t != mark}
        if mark in out or len(values) >= VALUES_ANY:
            out -= values
            out.add(mark)
    return out


def _any_value(st: RuleState, scope: str) -> bool:
    """Whether parameter rule ``st`` acts on any value of its parameters in ``scope`` (where it acts at all):
    pinned, ``VALUES_ANY`` values of each seen agree there, or a book written before values were kept. O(1)."""
    seen = st.values.get(scope)
    return st.pinned or seen is None or all(_any(seen, name) for name in st.rule.a.split(","))


def _acts_on_values(st: RuleState, scope: str, parts: Parts, target: Parts) -> bool:
    """Whether parameter rule ``st`` acts on a URL of ``scope`` as a copy of fetched page ``target`` (of the
    same path: the same scope): each of its parameters, in both, has a value seen agree there, or had
    ``VALUES_ANY`` of them (``/cat/c9?page=3`` fetched first must not stand for ``/cat/c9``); any other
    rule, always. O(query)."""
    seen = st.values.get(scope)
    if st.rule.kind != "param" or st.pinned or seen is None:
        return True
    mine, its = _tokens(st.rule, parts), _tokens(st.rule, target)
    return all((mine[n] in seen and its[n] in seen) or _any(seen, n) for n in mine)


def forbidden_by(rule: UrlRule, forbids: Iterable[UrlRule]) -> bool:
    """Whether a forbidden rule line (``NEARDUP_URL_RULES_FORBID``) covers ``rule``."""
    return any(f.covers(rule) for f in forbids)


@lru_cache(maxsize=1024)
def _parsed(spec: str) -> UrlRule:
    """``UrlRule.parse``, once per rule line (asked for each request a rule avoids)."""
    return UrlRule.parse(spec)


@lru_cache(maxsize=8192)
def _draw(url: str) -> int:
    """A URL's stable draw for exploration: the hash of its canonical path and query (two spellings of one
    URL, one draw; the same URLs on every run, whatever the host or port)."""
    return mmh3.hash(url_of(parts_of(url)).split("/", 3)[-1], signed=False)


def only_confirmed(rule: UrlRule, confirm: bool | None, pinned: bool) -> bool:
    """Whether ``rule`` acts only through confirmation by content: a sub-tree rule, or a prefix rule of
    byte-for-byte copies (``confirm``), unless the user pinned it. O(1)."""
    return not pinned and (rule.sub_tree or bool(confirm))


def min_evidence_of(rule: UrlRule, min_evidence: int, confirm: bool | None = None) -> int:
    """The agreeing pairs ``rule`` needs to act: ``min_evidence``, and for a
    rule confirmed by content (a sub-tree rule, or a prefix rule of byte-for-byte
    copies, ``confirm``) at most ``SUB_TREE_MIN_EVIDENCE``."""
    return min(min_evidence, SUB_TREE_MIN_EVIDENCE) if rule.sub_tree or confirm else min_evidence


def state_of(evidence: int, counter: int, min_evidence: int, *, pinned: bool = False,
             forbidden: bool = False) -> str:
    """A rule's state from its counts: pinned by the user, retired by a
    counter-example (or forbidden), active with enough evidence (``min_evidence_of``
    the rule), else a candidate."""
    if pinned:
        return PINNED
    if counter or forbidden:
        return RETIRED
    return ACTIVE if evidence >= min_evidence else CANDIDATE


@dataclass
class RuleState:
    rule: UrlRule
    state: str
    evidence: int = 0
    counter: int = 0
    avoided: int = 0
    example: str | None = None
    counter_example: str | None = None
    pinned: bool = False
    if_range_off: bool = False  # (``RuleBook.turn_if_range_off``)
    #: how a copy's ETag differs from its page's under the rule (``RuleBook.learn_etag_change``)
    etag_changes: Changes = field(default_factory=dict)
    #: a prefix rule whose copies are byte-for-byte ones acts only through confirmation by content, as a
    #: sub-tree rule does (``RuleBook._judge``, ``CONFIRM``); None: not known yet
    confirm: bool | None = None

    @property
    def confirmed(self) -> bool:
        """Whether it acts only through confirmation by content (a sub-tree rule, or a prefix rule of
        byte-for-byte copies), unless pinned. O(1)."""
        return only_confirmed(self.rule, self.confirm, self.pinned)
    #: a parameter rule's scopes (``rules.scope_of``) where a pair agreed: it acts there only (kept in the
    #: book's settings, ``SCOPE``, read again with the rules)
    scopes: set[str] = field(default_factory=set)
    #: a parameter rule's scopes where a pair disagreed before any agreed: the parameter matters there, and
    #: the rule, which never acted there, is not retired for it (``RuleBook._judge``); never acts there
    against: set[str] = field(default_factory=set)
    #: per scope, the values of its parameters seen agree there (``_tokens``); None, or no entry: any
    #: (a book written before values were kept; else ``VALUES_ANY`` of a parameter)
    values: dict[str, set[str] | None] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.state != RETIRED

    @property
    def acting(self) -> bool:
        return self.state in (ACTIVE, PINNED)


class RuleBook:
    """See the module docstring. ``location``: a SQLite file, a ``redis://``
    URL (``storage``), or None (in memory). ``pin``/``forbid``: rule lines the
    user fixed (``UrlRule.parse``). ``narrow``: a pair whose prefix rule is retired
    suggests the rule one directory deeper (only when each prediction is confirmed
    by content before it counts: a sub-tree rule cannot foresee a translated page
    it has not seen). ``came_whole(rule, url, copy)``: whether the confirmation of ``url``
    as a copy of fetched page ``copy`` under ``rule`` comes (or came) whole in the answer to its
    ranged GET, at the cost of the one request a plain crawl makes (their ETags
    differ, ``If-Range``): such a counter-example does not retire a rule that acts
    only through confirmation (``_judge``)."""

    def __init__(self, location: str | Path | None, *, max_distance: int = 3, min_evidence: int = 10,
                 explore: float = 0.05, pin: Iterable[str] = (), forbid: Iterable[str] = (),
                 narrow: bool = False, came_whole: Callable[[str, str, str], bool] | None = None,
                 same_bytes: Callable[[str, str], bool | None] | None = None) -> None:
        self.k = max_distance
        self.narrow = narrow
        self.came_whole = came_whole
        #: whether two fetched pages are byte-for-byte the same (their heads: length and window), None when
        #: not known (``_judge``: a prefix rule of such copies acts only through confirmation)
        self.same_bytes = same_bytes
        self.min_evidence = min_evidence
        self.explore = explore
        self.forbid = [UrlRule.parse(line) for line in forbid]
        self.pins = [UrlRule.parse(line) for line in pin]
        self.store: Storage = open_storage(location)
        self.by_host: dict[str, list[RuleState]] = {}
        # Per host, what every outlink's look-up needs: its acting rules (in order, and by
        # what they touch) and the parameter rule that strips what they say does not matter.
        # Read per outlink (tens a page), changed only when a rule is added or changes state
        # (_rules_changed).
        self._acting_by_host: dict[str, list[RuleState]] = {}
        self._acting_index: dict[str, _Touching] = {}
        self._strip_by_scope: dict[tuple[str, str], UrlRule | None] = {}
        # Per host, its live rules by what they touch (``_touching``): read per page checked.
        self._live_by_host: dict[str, _Touching] = {}
        self._by_rule: dict[UrlRule, RuleState] = {}  # (``_state_of``: asked per rule a dropped page suggests)
        self._any_acting: bool | None = None  # (acts(): None until asked after a change)
        self.events: list[tuple[str, RuleState]] = []  # ("learned" | "retired", rule): for the caller's stats
        for rule in self.pins:
            self.store.create(rule.spec, rule.host)
        # (for `neardup rules`: the states as this crawl has them, pinned rules as pinned)
        self.store.save_settings({"min_evidence": str(min_evidence), NARROW: "1" if narrow else "0",
                                  PIN: json.dumps([r.spec for r in self.pins]),
                                  FORBID: json.dumps([r.spec for r in self.forbid])})
        self.store.commit()
        self._refreshed = 0.0
        self.refresh()

    def refresh(self) -> None:
        """Read the rules and their counts again (a shared book: what the other
        processes learned and retired)."""
        known = {st.rule.spec: st for st in self.rules()}
        others: list[RuleState] = []  # (rules another process made since this book's first look)
        for row in self.store.rules():
            # (looked up live: a retirement met in this loop suggests sub-tree rules, ``_narrow``, which later rows
            # name; from the list taken before, each was added twice, and the stale copy acted after a retirement)
            st = known.get(row["spec"]) or self._by_spec(row["spec"])
            if st is None:
                rule = UrlRule.parse(row["spec"])
                st = RuleState(rule, CANDIDATE, pinned=any(p == rule for p in self.pins))
                self._add_rule(st)
                if self._refreshed:
                    others.append(st)
            self._update(st, row)
        values: dict[tuple[str, str], set[str]] = {}
        settings = self.store.settings()
        for name, value in settings.items():  # (the values this or another process saw agree)
            if name.startswith(VALUE):
                spec, scope, seen = name[len(VALUE):].split("\t", 2)
                values.setdefault((spec, scope), set()).add(seen)
        for name, value in settings.items():  # (the scopes this or another process learned)
            if name.startswith(SCOPE):
                spec, _, scope = name[len(SCOPE):].rpartition("\t")
                st = self._by_spec(spec)
                if st is not None:
                    self._merge_values(st, scope, None if value == "1" else values.get((spec, scope), set()))
        for name, value in settings.items():  # (the ETag changes this or another process saw)
            if name.startswith(ETAG):
                spec, index, was = name[len(ETAG):].split("\t", 2)
                st = self._by_spec(spec)
                if st is not None and index.isdigit():
                    st.etag_changes[int(index), was] = value
        for name, value in settings.items():  # (whether a prefix rule's copies are byte-for-byte ones)
            if name.startswith(CONFIRM) and (st := self._by_spec(name[len(CONFIRM):])) is not None \
                    and st.confirm != (value == "1"):
                st.confirm = value == "1"
                self._rules_changed()
                self._update(st, {})  # (its pairs needed to act may be fewer)
        for name in settings:  # (the sections where a path rule's pairs agreed, here or in another process)
            if name.startswith(WHERE):
                spec, _, scope = name[len(WHERE):].rpartition("\t")
                st = self._by_spec(spec)
                if st is not None:
                    st.scopes.add(scope)
        for name in settings:  # (the sections where this or another process met a counter-example first)
            if name.startswith(AGAINST):
                spec, _, scope = name[len(AGAINST):].rpartition("\t")
                st = self._by_spec(spec)
                if st is not None and scope not in st.against and st.live and not st.pinned:
                    st.against.add(scope)
                    self._strip_by_scope.clear()
        for st in self.rules():
            # (a section where it acts, or acted before a kill, that another process kept it out of: it is
            # retired, and what it left out there is made)
            if st.rule.kind == "param" and st.live and not st.pinned and (st.scopes & st.against):
                self._against(st, min(st.scopes & st.against), save=False)
        for st in self.rules():
            # (a book written before scopes were kept: its parameter rule acts where its example pair agreed)
            if not st.scopes and st.example and st.evidence:
                # (a book written before: a parameter rule acts where its example pair agreed, a path rule on
                # either side of it)
                if st.rule.kind == "param":
                    st.scopes.add(scope_of(parts_of(st.example.split(" = ")[0])[2]))
                elif st.rule.kind == "prefix":
                    st.scopes.update(section_of(st.rule, parts_of(u)[2]) for u in st.example.split(" = "))
        for st in others:
            # The pages this process met before it knew the rule were judged by no one against it if they came
            # after its maker tried it on the pages then (``_backfill``): a translated front page met here was
            # never the counter-example it is, and whole-language rules of a shared crawl acted on 10 pairs and
            # lost 61 distinct pages of the bench mirror. They are judged now (the pairs judged already, once).
            if st.live:
                self._backfill(st)
        self._refreshed = time.monotonic()

    def _merge_values(self, st: RuleState, scope: str, seen: set[str] | None) -> set[str] | None:
        """Add to parameter rule ``st``'s scope ``scope`` the values ``seen`` agree there (``_tokens``; None:
        any); the tokens that are new (to be kept in the book), None if nothing changed what it acts on.
        O(VALUES_ANY per parameter)."""
        names = st.rule.a.split(",")
        if scope not in st.scopes:
            st.scopes.add(scope)
            now = None if seen is None else _collapsed(seen, names)
            st.values[scope] = now
            new: set[str] = set() if now is None else now
        else:
            was = st.values.get(scope)
            if was is None:
                return None
            now = None if seen is None else _collapsed(was | seen, names)
            if now == was:
                return None
            st.values[scope] = now
            new = set() if now is None else now - was
        self._strip_by_scope.clear()  # (what the scope's forms strip may have changed)
        return new

    def _against(self, st: RuleState, scope: str, url: str | None = None, save: bool = True) -> bool:
        """Mark ``scope`` as one where parameter rule ``st`` met a counter-example before any pair of its own
        agreed there: it never acts there. Where it acted already (another process of a shared book saw a
        pair agree there first), the counter-example retires it, as any does where it acts: what it left
        out is made. Whether the rule stays live. O(1)."""
        st.against.add(scope)
        self._strip_by_scope.clear()
        if save:
            self.store.save_settings({f"{AGAINST}{st.rule.spec}\t{scope}": "1"})
        if (scope in st.scopes or len(st.against) > MAX_AGAINST) and st.live and not st.pinned:
            st.counter_example = st.counter_example or (
                f"a counter-example in {scope}, where it acted" if scope in st.scopes
                else f"counter-examples in {len(st.against)} sections where it never acted ({url})")
            self._update(st, self.store.bump(st.rule.spec, counter=1, counter_example=st.counter_example))
            return False
        logger.info("URL rule %s does not act in %s: %s", st.rule.spec, scope, url or "another process met a "
                    "counter-example there")
        return True

    def _by_spec(self, spec: str) -> RuleState | None:
        try:
            return self._state_of(_parsed(spec))
        except ValueError:  # (a setting no rule line: not one of the scopes')
            return None

    def _update(self, st: RuleState, counts: dict) -> None:
        """Take a rule's counts as the storage has them; note what changed."""
        for name in ("evidence", "counter", "avoided", "example", "counter_example"):
            if counts.get(name) is not None:
                setattr(st, name, counts[name])
        st.if_range_off = st.if_range_off or bool(counts.get("if_range_off"))
        was, st.state = st.state, state_of(st.evidence, st.counter,
                                           min_evidence_of(st.rule, self.min_evidence, st.confirm and self.narrow),
                                           pinned=st.pinned,
                                           forbidden=self._forbidden(st.rule))
        if st.state != was:
            self._rules_changed()
        if was == CANDIDATE and st.state == ACTIVE:
            self.events.append(("learned", st))
            logger.info("URL rule learned: %s (%d pairs agree%s)", st.rule.spec, st.evidence,
                        f", e.g. {st.example}" if st.example else "")  # (a shared book's may be another process's)
        elif was == ACTIVE and st.state == RETIRED:
            self.events.append(("retired", st))
            logger.warning("URL rule retired: %s (%s)", st.rule.spec, st.counter_example)
        if st.state == RETIRED and was != RETIRED:
            self.store.drop_forms(st.rule.spec)  # (never looked at again)
            if st.rule.kind == "param":
                self._reform(st)
            self.store.commit()  # (a retirement is never lost: a resumed crawl must not act on the rule again)
            if was == ACTIVE:
                self._narrow(st)

    def _reform(self, retired: RuleState) -> None:
        """Parameter rule ``retired`` no longer strips its parameters: the forms
        path rules made with them stripped are not their first pages' forms any
        more (under ``prefix /p/ /m/``, the personalised ``/p/9.html?sid=7`` met
        first was the page of the form ``/p/9.html``: ``/m/9.html`` would be
        avoided as its copy, or judged against it). Each such form is made again
        from its page's URL as forms are made now. O(the host's path rules' forms
        whose page has a query): a retirement is rare."""
        names = set(retired.rule.a.split(","))
        for st in self._rules_for(retired.rule.host):
            if st.rule.kind == "param" or st.state == RETIRED:
                continue
            stale = [(form, url, fp) for form, url, fp in self.store.query_forms(st.rule.spec)
                     if any(k in names for k, _ in parts_of(url)[3])]
            if stale:
                self.store.drop_form_keys(st.rule.spec, [form for form, _, _ in stale])
                self.store.set_forms([(st.rule.spec, self._form(st, url), url, fp) for _, url, fp in stale])

    # -- learning ---------------------------------------------------------------

    def observe(self, url: str, fp: int, duplicate_of: str | None = None) -> None:
        """A page the filter checked: its URL, its fingerprint and, when it was
        dropped, the URL it duplicated."""
        host = host_of(url)
        path = parts_of(url)[2]
        self.store.add_page(host, url, fp, path)
        # (a prefix rule that cannot map this URL or onto it: no pair to judge, no form to keep)
        live = self._touching(host, path)
        if live:
            firsts = self.store.set_forms([(st.rule.spec, self._form(st, url), url, fp) for st in live])
            strip = self._stripper(host, scope_of(path))  # (as the forms were made: a rule retired meanwhile changes it)
            for st, _, first in self._once([(st, url, fp, first) for st, first in zip(live, firsts)]):
                self._judge(st, url, fp, first, strip)
        if duplicate_of and duplicate_of != url:
            dup = url_of(self._strip(parts_of(url)))
            for suggested in derive(dup, url_of(self._strip(parts_of(duplicate_of)))):
                rule: UrlRule | None = suggested
                # A prefix rule retired (a translated page under a mirrored language tree, say):
                # the pair may still be evidence of the sub-tree it is in (/de/mod/ -> /en/mod/).
                while rule is not None and (was := self._state_of(rule)) is not None and was.state == RETIRED:
                    rule = narrower(rule, dup) if self.narrow else None
                if rule is not None:
                    self._suggest(rule)
        self.store.maybe_commit()
        if time.monotonic() - self._refreshed >= REFRESH_EVERY:
            self.refresh()

    def _suggest(self, rule: UrlRule) -> None:
        """Make ``rule`` a candidate, tried on the pages met so far, unless the book has it, it is forbidden,
        or its host has ``MAX_RULES_PER_HOST``. O(the host's pages it touches, up to ``BACKFILL``)."""
        if self._state_of(rule) is not None or self._forbidden(rule) \
                or len(self.by_host.get(rule.host, ())) >= MAX_RULES_PER_HOST:
            return
        st = RuleState(rule, CANDIDATE)
        self._add_rule(st)
        if not self.store.create(rule.spec, rule.host):
            # (another process made it first, and tried it on the pages then: those this one met since were
            # tried by no one; the pairs judged already count once, ``_once``)
            self._update(st, self.store.bump(rule.spec))
        if st.live:
            self._backfill(st)

    def _narrow(self, retired: RuleState) -> None:
        """Prefix rule ``retired`` acted and met a counter-example: the sub-tree rules of the sections where
        its pairs agreed (``/fr/api/`` -> ``/en/api/``, ``rules.narrower``) are suggested at once, tried on the
        pages met so far, so that the requests it had left out, made again, are confirmed by content where
        its copies were (before, a sub-tree rule came only with a pair met after the retirement: the requests
        were downloaded whole). Only with ``narrow`` (confirmation by content on). O(its sections)."""
        if not self.narrow or retired.rule.kind != "prefix" or retired.rule.sub_tree:
            return
        subs = {sub for section in sorted(retired.scopes)
                if "#" not in section and (sub := narrower(retired.rule, f"http://{retired.rule.host}{section}x"))}
        for sub in sorted(subs, key=lambda r: r.spec)[:MAX_NARROWED]:
            # (a few: each is tried on the pages met so far, on the crawl's thread, and the host's rules are capped)
            self._suggest(sub)

    def _form(self, st: RuleState, url: str) -> str:
        """``url``'s form under a rule; for a path rule, without the parameters
        active parameter rules say do not matter (so ``/a/index.html?sid=1`` and
        ``/a/?sid=2`` are one form under ``suffix h /index.html /`` once ``sid`` is
        known not to matter). A form made before a parameter rule became
        active still has the parameter: it matches less, never wrongly."""
        parts = parts_of(url)
        return url_of(st.rule.apply(parts if st.rule.kind == "param" else self._strip(parts)))

    def _strip(self, parts: Parts) -> Parts:
        """A URL's parts without the query parameters that active rules of its host say do not matter there."""
        stripper = self._stripper(parts[1], scope_of(parts[2]))
        return stripper.apply(parts) if stripper is not None else parts

    def _stripper(self, host: str, scope: str) -> UrlRule | None:
        """The parameter rule that strips what ``host``'s acting parameter rules say does not matter in
        ``scope`` (``_in_scope``): a path rule's form strips nothing more, or it would act as a parameter
        rule where none has evidence (``prefix /m/ /`` touches every path)."""
        try:
            stripper = self._strip_by_scope[host, scope]
        except KeyError:
            names = sorted(self._parameters_acting(host, scope, any_value=True))
            stripper = self._strip_by_scope[host, scope] = UrlRule("param", "*", ",".join(names)) if names else None
        return stripper

    def _parameters_acting(self, host: str, scope: str, any_value: bool = False) -> set[str]:
        """The parameters ``host``'s acting parameter rules leave out in ``scope`` (``_in_scope``); with
        ``any_value``, only those they leave out whatever their value (``_any_value``). O(the host's rules)."""
        return {n for st in self._acting_for(host)
                if st.rule.kind == "param" and _in_scope(st, scope) and (not any_value or _any_value(st, scope))
                for n in st.rule.a.split(",")}

    def _judge(self, st: RuleState, url: str, fp: int, first: tuple[str, int] | None,
               strip: UrlRule | None) -> None:
        """A page against the first page of its form under a rule (None: it is the first);
        ``strip``: the host's parameter stripper the forms were made with."""
        if first is None or first[0] == url:
            return
        if st.rule.kind != "param" and (
                parts_of(url) == parts_of(first[0]) if strip is None
                else strip.apply(parts_of(url)) == strip.apply(parts_of(first[0]))):
            # The pair is one form already without this rule (it differs only in parameters
            # that acting parameter rules strip): it says nothing of this rule, for or against
            # (``p/1.html?sid=7`` != ``p/1.html`` says nothing about ``prefix /p/ /m/``). Counted
            # when it agreed, such pairs made a rule act on no pair it maps: ``prefix /mirror/ /a/``
            # acted on ten ``/a/N.html?ref=feed`` = ``/a/N.html`` pairs after one mirror pair, and
            # the distinct pages under ``/mirror/`` were never fetched.
            return
        if (first[1] ^ fp).bit_count() <= self.k:
            st.example = st.example or f"{url} = {first[0]}"
            if st.rule.kind == "param" and scope_of(parts_of(url)[2]) in st.against:
                return  # (the parameter matters in this section: no pair here is evidence for the rule)
            if st.rule.kind == "param":
                mine, its = _tokens(st.rule, parts_of(url)), _tokens(st.rule, parts_of(first[0]))
                if any(mine[n] == its[n] for n in mine):
                    # (the two agree on a parameter of the rule: the pair says nothing of it. ``?sid=3`` =
                    # ``?sid=4`` is no evidence for ``param lang,sid``, which then left out translations)
                    return
                scope = scope_of(parts_of(url)[2])
                new_scope = scope not in st.scopes
                added = self._merge_values(st, scope, set(mine.values()) | set(its.values()))
                if added is not None:  # (settings only added: at most VALUES_ANY + 1 a parameter and scope)
                    self.store.save_settings({**({f"{SCOPE}{st.rule.spec}\t{scope}": "v"} if new_scope else {}),
                                              **{f"{VALUE}{st.rule.spec}\t{scope}\t{v}": "1" for v in added}})
            elif st.rule.kind == "prefix" and not st.rule.sub_tree:  # (it acts where its pairs agreed: ``_acts_in``)
                if st.confirm is None and st.state == CANDIDATE and not st.avoided and self.narrow \
                        and self.same_bytes is not None and (same := self.same_bytes(url, first[0])) is not None:
                    # Byte-for-byte copies (a symlink, a fallback, a tree copied) are what a ranged GET confirms,
                    # and what a partly translated or versioned tree serves beside its own pages: such a rule
                    # acts only through confirmation, as a sub-tree rule. Acting unconfirmed, whole-language rules
                    # of a helper's mirrors, crawled depth-first, left out translated front pages (distances 28-35)
                    # before they were met. Near-duplicates that differ in bytes (a mobile or print template)
                    # cannot be confirmed so, and such a rule acts unconfirmed, in the sections of its pairs.
                    # (decided once, before the rule acts: one that left requests out unconfirmed stays so, and
                    # the first process of a shared book to decide decides for all)
                    st.confirm = self.store.setting_once(f"{CONFIRM}{st.rule.spec}", "1" if same else "0") == "1"
                    self._rules_changed()
                new = {section_of(st.rule, parts_of(u)[2]) for u in (url, first[0])} - st.scopes
                if new:
                    st.scopes |= new
                    self.store.save_settings({f"{WHERE}{st.rule.spec}\t{scope}": "1" for scope in new})
            counts = self.store.bump(st.rule.spec, evidence=1, example=st.example)
        elif self._free_miss(st, url, first[0]):
            # A rule acting only through confirmation predicts which fetched page a request's bytes
            # are compared with; it never leaves a page out. Wrong here (a translated page under an
            # untranslated sub-tree), its prediction costs what a plain crawl spends, one request
            # answered whole: retiring it would only download whole the copies it has yet to confirm.
            self.events.append(("missed_whole", st))
            logger.info("URL rule %s kept: %s != %s (it acts through ranged GETs only: a page that is not a copy "
                        "costs the request a plain crawl makes)", st.rule.spec, url, first[0])
            return
        elif st.rule.kind == "param" and not st.pinned and (scope := scope_of(parts_of(url)[2])) not in st.scopes:
            # A counter-example in a section where no pair of the rule agreed, so where it never acted: the
            # parameter matters here, and the rule stays out of this section. Retired for the whole host,
            # ``param sort`` (re-sorted lists in ``/shop/cat/``) met ``?sort=price`` filtering ``/shop/deals/``
            # and every re-sorted list was downloaded (a helper's shops: nothing saved).
            if scope not in st.against:
                self._against(st, scope, f"{url} != {first[0]}")
            return
        else:
            st.counter_example = f"{url} != {first[0]}"
            counts = self.store.bump(st.rule.spec, counter=1, counter_example=st.counter_example)
            if st.pinned:
                logger.warning("pinned URL rule %s does not hold: %s", st.rule.spec, st.counter_example)
        self._update(st, counts)

    def _free_miss(self, st: RuleState, url: str, first: str) -> bool:
        """Whether the counter-example ``url`` != ``first`` leaves rule ``st`` acting: the
        rule acts only through confirmation by content (``confirmed_only``, with ``narrow``)
        and a ranged GET confirming ``url`` as a copy of ``first`` (or the reverse) comes, or
        came, whole in its answer (``came_whole``). A miss that costs a request more than a
        plain crawl (a distinct page with its predicted copy's ``ETag``: a second, whole GET
        after the ranged one; or a server without ETags) retires it as any
        counter-example does, so that its later predictions are plain GETs."""
        return (self.came_whole is not None and self.narrow and st.confirmed and not st.avoided
                and self.came_whole(st.rule.spec, url, first))

    def _backfill(self, st: RuleState) -> None:
        pages = self.store.pages(st.rule.host, BACKFILL, touching=st.rule)
        for start in range(0, len(pages), 1000):  # (a round per thousand pages on a shared book)
            chunk = pages[start : start + 1000]
            if st.rule.kind == "prefix":  # (a shared book lists every page of the host: the path's start first)
                sides = (st.rule.a, st.rule.b)
                chunk = [(url, fp) for url, fp in chunk if _raw_path(url).startswith(sides)]
            chunk = [(url, fp) for url, fp in chunk if touches(st.rule, parts_of(url)[2])]
            firsts = self.store.set_forms([(st.rule.spec, self._form(st, url), url, fp) for url, fp in chunk])
            fps = dict(chunk)
            for (_, url, first) in self._once([(st, url, fp, first) for (url, fp), first in zip(chunk, firsts)]):
                if not st.live:
                    return
                self._judge(st, url, fps[url], first, self._stripper(st.rule.host, scope_of(parts_of(url)[2])))

    def _once(self, pairs: list[tuple[RuleState, str, int, tuple[str, int] | None]]
              ) -> list[tuple[RuleState, str, tuple[str, int]]]:
        """Of (rule, page, its fingerprint, its form's first page), those to judge: a pair (the first is another
        page) that no process of the book has judged yet with this content (``Storage.judge_once``, one round:
        a page fetched again with other content is judged again). O(len(pairs))."""
        ask = [(st, url, fp, first) for st, url, fp, first in pairs if first is not None and first[0] != url]
        claimed = self.store.judge_once([(st.rule.spec, f"{url}\t{fp}") for st, url, fp, _ in ask])
        return [(st, url, first) for (st, url, _, first), new in zip(ask, claimed) if new]

    # -- acting -------------------------------------------------------------------

    def confirmed_only(self, spec: str, url: str | None = None) -> bool:
        """Whether the rule ``spec`` (an ``avoid`` verdict's, for ``url``) acts only through
        confirmation by content: a sub-tree rule the user did not pin; and, with ``narrow``, a
        parameter rule acting in ``url``'s section on the values its pairs there showed, fewer than
        ``VALUES_ANY``. Such a value says what one page did with it, not another: one-page categories
        give page 1 back for their linked ``?page=2``, and a two-page category's is a page of its own,
        which nothing but its body tells apart (a parameter with many values seen agree, a session id,
        is noise wherever it goes, and is left out unconfirmed). O(1)."""
        rule = _parsed(spec)
        st = self._state_of(rule)
        if st is not None and st.pinned:
            return False
        if rule.sub_tree or (self.narrow and st is not None and st.confirmed):
            return True
        return (self.narrow and rule.kind == "param" and url is not None and st is not None
                and not _any_value(st, scope_of(parts_of(url)[2])))

    def if_range_off(self, spec: str) -> bool:
        """Whether the rule ``spec``'s ranged GETs go without ``If-Range`` (``turn_if_range_off``). O(1)."""
        st = self._state_of(_parsed(spec))
        return st is not None and st.if_range_off

    def predicted_etag(self, spec: str, etag: str) -> str:
        """The ``ETag`` a copy of a fetched page whose ETag is ``etag`` has under the rule ``spec``
        (``etags.predicted``), for its ranged GET's ``If-Range``: ``etag`` itself while the rule
        knows no change that applies to it. O(the ETag's length)."""
        st = self._state_of(_parsed(spec))
        if st is None or not st.etag_changes:
            return etag
        return predicted(etag, st.etag_changes) or etag

    def learn_etag_change(self, spec: str, change: Change) -> bool:
        """A copy came whole under the rule ``spec`` with an ETag that differs from its page's
        by ``change`` (``etags.change_of``): its later ranged GETs carry ETags made so, both ways (a
        rule's page may be on either side of it)
        (``predicted_etag``). False when the rule knows them already (its prediction did not
        bring the range: a server that ignores ``If-Range``), knows another change of the same part
        (copies written at two times), or would know more than ``etags.MAX_CHANGES`` (in this
        process): the caller turns ``If-Range`` off instead. Kept with the rule and
        committed at once, as ``turn_if_range_off``. O(1)."""
        st = self._state_of(_parsed(spec))
        if st is None or st.if_range_off:
            return False
        i, was, now = change
        if st.etag_changes.get((i, was), now) != now:
            # (another change of a part a change is known of: copies of pages of one time written at two times,
            # which no prediction follows. Learnt again and again, each copy came whole)
            return False
        # (the reverse only where none is known: originals of several times copied at one are each learnt)
        new = {key: value for key, value in (((i, was), now), ((i, now), was)) if key not in st.etag_changes}
        if not new or len(st.etag_changes) + len(new) > MAX_CHANGES:
            return False
        st.etag_changes.update(new)
        self.store.save_settings({f"{ETAG}{spec}\t{i}\t{was}": now for (i, was), now in new.items()})
        self.store.commit()
        return True

    def turn_if_range_off(self, spec: str) -> bool:
        """The rule ``spec``'s ranged GETs go without ``If-Range`` from now on (a copy came whole
        in the answer to one: its pages' ETags do not follow their content); False if they did
        already. Kept with the rule and committed at once, as a retirement: a resumed crawl (or
        another process of a shared book, at its next ``refresh``) does not send it again, which
        would download every copy whole until a copy came whole once more."""
        st = self._state_of(_parsed(spec))
        if st is None or st.if_range_off:
            return False
        st.if_range_off = True
        self.store.set_if_range_off(spec)
        self.store.commit()
        return True

    def avoid(self, url: str) -> tuple[str, str, bool] | None:
        """(rule, the fetched URL standing for it, explored) when an active rule
        gives ``url`` the form of a page already fetched, else None. ``explored``:
        it is one of the share ``explore`` requested all the same, to keep
        testing the rule (a stable draw: the same URL, the same answer)."""
        got = self.avoid_many([url])[0]
        return None if got is None else got[:3]

    def avoid_many(self, urls: list[str]) -> list[tuple[str, str, bool, int] | None]:
        """``avoid`` for each URL, with the fetched page's fingerprint, with one look-up round for all
        (``Storage.forms``), and one more for those it would avoid (``Storage.fetched``)."""
        if not self.acts():  # (most crawls, most of the time: no outlink is canonicalised for nothing)
            return [None] * len(urls)
        asks = [(j, st, self._form(st, url)) for j, url in enumerate(urls)
                for st in self._acting_touching(host_of(url), parts_of(url)[2])]
        firsts = self.store.forms([(st.rule.spec, form) for _, st, form in asks]) if asks else []
        out: list[tuple[str, str, bool, int] | None] = [None] * len(urls)
        confirming: dict[int, Counter[int]] = {}  # (per URL, the fingerprints confirming rules name)
        for (j, st, _), first in zip(asks, firsts):
            url, taken = urls[j], out[j]
            # (a verdict only a ranged GET would confirm gives way to one that leaves the request out: a
            # parameter rule on a value seen must not cost a request a suffix or prefix rule saves)
            if (taken is not None and not self.confirmed_only(taken[0], url)) or first is None or first[0] == url:
                continue
            if not _acts_in(st, parts_of(url)[2]) \
                    or not _acts_on_values(st, scope_of(parts_of(url)[2]), parts_of(url), parts_of(first[0])):
                continue  # (made: its answer is the rule's first evidence there, or its counter-example)
            if st.rule.kind != "param" and parts_of(first[0])[2] == parts_of(url)[2]:
                # (the two differ in their query alone: a parameter rule's to claim, not a path rule whose form
                # strips the section's parameters; ``prefix /m/ /`` touches every path, and booked them all)
                continue
            if taken is not None and self.confirmed_only(st.rule.spec, url):
                votes = confirming.setdefault(j, Counter({taken[3]: 1}))
                votes[first[1]] += 1
                if votes[first[1]] > votes[taken[3]]:
                    # (rules that confirm by content name several fetched pages, each its language's or
                    # version's: the request is compared with the content most of them have. A translated
                    # page named by the first rule came whole, and a language's copy confirmed nothing)
                    out[j] = (st.rule.spec, first[0], taken[2], first[1])
                continue
            out[j] = (st.rule.spec, first[0], _draw(url) % 10_000 < self.explore * 10_000, first[1])
        # A URL fetched already (before the rule acted) is not avoided: the dupe filter
        # refuses it anyway, and it must not be counted as a request not made.
        maybe = [j for j, verdict in enumerate(out) if verdict is not None and not verdict[2]]
        if maybe:
            for j, done in zip(maybe, self.store.fetched([urls[j] for j in maybe])):
                if done:
                    out[j] = None
        return out

    def record_avoided(self, url: str, spec: str, target: str, request: str | None = None,
                       scheduled: bool = False, frontier_id: int | None = None) -> bool:
        """Note an avoided request (``request``: as the caller can make it again,
        should the rule be retired; ``scheduled``: it had passed the dupe filter,
        ``frontier_id``: as the durable frontier's row); False if it was avoided
        before (count it once)."""
        st = next(s for s in self._rules_for(host_of(url)) if s.rule.spec == spec)
        params: tuple[str, ...] = ()
        if st.rule.kind != "param":
            # (the forms of the URL and of its target, each in its own section, may have stripped these: the
            # avoidance depends on their rules too, and their retirement releases it. Every acting parameter
            # rule of the section, whatever values it acts on: a shared book's other processes may strip more.)
            names = {n for u in (url, target)
                     for n in self._parameters_acting(host_of(u), scope_of(parts_of(u)[2]))}
            params = tuple(sorted({k for u in (url, target) for k, _ in parts_of(u)[3] if k in names}))
        if not self.store.avoid_once(spec, url, target, request, scheduled, params, frontier_id):
            return False
        self._update(st, self.store.bump(spec, avoided=1))
        self.store.maybe_commit()
        return True

    def release(self, st: RuleState, claim: bool = True) -> list[Avoided]:
        """A retired rule's avoided requests (as given to ``record_avoided``), to
        be made after all: the rule was wrong for some of them. A parameter rule's
        are also those a path rule avoided with its parameters stripped (the form
        ``/m/1.html`` of ``/p/1.html?sid=7`` under ``prefix /p/ /m/``). ``claim``: forgets
        them at once (with a shared book, the process that saw the retirement takes
        them all); else they stay until ``forget``, once the caller has them queued
        durably, so that a kill in between loses none (``unreleased``)."""
        names = tuple(st.rule.a.split(",")) if st.rule.kind == "param" else ()
        out = self.store.release(st.rule.spec, names, claim)
        if claim:
            self.store.commit()
        return out

    def forget(self, avoided: list[Avoided]) -> None:
        """The requests ``release(st, claim=False)`` gave are durably queued: forget them."""
        self.store.forget([a.url for a in avoided])
        self.store.commit()

    def unreleased(self) -> list[RuleState]:
        """Retired rules whose avoided requests are still noted: a kill came
        between the retirement and the requests' queueing (to be released again)."""
        return [st for st in self.rules() if st.state == RETIRED and self.release(st, claim=False)]

    # -- listing and housekeeping -----------------------------------------------

    def rules(self) -> list[RuleState]:
        return [st for states in self.by_host.values() for st in states]

    def _rules_for(self, host: str) -> list[RuleState]:
        return self.by_host.get(host, []) + self.by_host.get("*", [])

    def _acting_for(self, host: str) -> list[RuleState]:
        """``host``'s acting rules (and those for every host): O(1) but after a change.
        Sub-tree rules last (a URL another rule also predicts is avoided outright, unconfirmed),
        and only with ``narrow`` (a book written by a crawl that confirmed them, read by one
        that does not: they do not act unconfirmed); a pinned rule acts as the user said."""
        acting = self._acting_by_host.get(host)
        if acting is None:
            acting = self._acting_by_host[host] = sorted(
                (st for st in self._rules_for(host)
                 if st.acting and (self.narrow or st.pinned or not st.confirmed)),
                key=lambda st: st.confirmed)
        return acting

    def _acting_touching(self, host: str, path: str) -> list[RuleState]:
        """``host``'s acting rules that touch ``path``, in ``_acting_for``'s order:
        O(the path's depth), not O(the host's rules). A site of numbered near-duplicates
        has a suffix rule per pair (up to ``MAX_RULES_PER_HOST``), and a page's outlinks
        were each tried against all of them (25,600 ``touches`` a page of 100 outlinks
        at 256 rules)."""
        index = self._acting_index.get(host)
        if index is None:
            acting = self._acting_for(host)
            if not acting:  # (most hosts of a crawl's outlinks: no index kept for them)
                return []
            index = self._acting_index[host] = _Touching(acting)
        return index.of(path)

    def acts(self) -> bool:
        """Whether any rule acts, on any host: O(1) but after a change. With none,
        ``avoid_many`` answers without looking at the URLs."""
        if self._any_acting is None:
            self._any_acting = any(st.acting for st in self.rules())
        return self._any_acting

    def _touching(self, host: str, path: str) -> list[RuleState]:
        """``host``'s live rules (and those for every host) that touch ``path``
        (``rules.touches``), in the book's order: O(the path's depth), not
        O(the host's rules), through an index made again after a change."""
        index = self._live_by_host.get(host)
        if index is None:
            index = self._live_by_host[host] = _Touching([st for st in self._rules_for(host) if st.live])
        return index.of(path)

    def _add_rule(self, st: RuleState) -> None:
        self.by_host.setdefault(st.rule.host, []).append(st)
        self._by_rule[st.rule] = st
        self._rules_changed()

    def _rules_changed(self) -> None:
        """A rule was added or changed state: the per-host look-ups are made again when next needed."""
        self._any_acting = None
        self._acting_by_host.clear()
        self._strip_by_scope.clear()
        self._live_by_host.clear()
        self._acting_index.clear()

    def _state_of(self, rule: UrlRule) -> RuleState | None:
        return self._by_rule.get(rule)

    def _forbidden(self, rule: UrlRule) -> bool:
        return forbidden_by(rule, self.forbid)

    def close(self) -> None:
        self.store.close()


class _Touching:
    """Rules by what they touch (``rules.touches``), for ``RuleBook._touching``:
    parameter rules (and suffix rules onto ``''``) touch every path; a prefix
    side (``/a/``) is a path's start up to one of its slashes, a suffix side
    (``/x.html``) its end from one of its slashes, so a path's rules are found
    with a look-up per slash in it."""

    def __init__(self, live: list[RuleState]) -> None:
        self.every: list[tuple[int, RuleState]] = []
        self.starts: dict[str, list[tuple[int, RuleState]]] = {}
        self.ends: dict[str, list[tuple[int, RuleState]]] = {}
        for pos, st in enumerate(live):
            rule = st.rule
            if rule.kind == "param" or (rule.kind == "suffix" and "" in (rule.a, rule.b)):
                self.every.append((pos, st))
                continue
            sides = self.starts if rule.kind == "prefix" else self.ends
            for side in {rule.a, rule.b}:
                sides.setdefault(side, []).append((pos, st))

    def of(self, path: str) -> list[RuleState]:
        found = list(self.every)
        if self.starts or self.ends:
            slash = path.find("/")
            while slash >= 0:
                found += self.starts.get(path[: slash + 1], ())
                found += self.ends.get(path[slash:], ())
                slash = path.find("/", slash + 1)
        if len(found) > 1:  # (the book's order; a rule both of whose sides match, once)
            return [st for _, st in sorted(dict(found).items())]
        return [st for _, st in found]


def list_rules(location: str | Path, *, min_evidence: int | None = None) -> list[dict]:
    """The rules in a rule book (a file or a ``redis://`` URL), for ``neardup
    rules``, read without writing to it (``storage.read_book``): each rule's
    state as the crawl that wrote the book has it (its pins and forbids, and its
    ``min_evidence`` unless one is given; 10 for a book that does not say), and whether it acts only
    through confirmation by content, which the crawl that wrote the book last had off (``confirmation_off``).
    Raises ``sqlite_files.WrongFileError`` for a file that is not a rule book."""
    rows, settings = read_book(location)
    if min_evidence is None:
        min_evidence = int(settings.get("min_evidence") or 10)
    pins = {UrlRule.parse(spec) for spec in json.loads(settings.get(PIN) or "[]")}
    forbids = [UrlRule.parse(spec) for spec in json.loads(settings.get(FORBID) or "[]")]
    out = []
    for row in rows:
        rule = UrlRule.parse(row["spec"])
        confirm = settings.get(f"{CONFIRM}{row['spec']}") == "1"
        state = state_of(row["evidence"], row["counter"], min_evidence_of(rule, min_evidence, confirm), pinned=rule in pins,
                         forbidden=forbidden_by(rule, forbids))
        out.append({"rule": row["spec"], "state": state,
                    # (a rule that acts only through confirmation by content acts not at all where it is off)
                    "confirmation_off": settings.get(NARROW) == "0" and only_confirmed(rule, confirm, rule in pins),
                    "evidence": row["evidence"],
                    "counter_examples": row["counter"], "avoided": row["avoided"], "example": row["example"],
                    "counter_example": row["counter_example"]})
    return out


__all__ = ["ACTIVE", "CANDIDATE", "PINNED", "RETIRED", "RuleBook", "RuleState", "list_rules", "state_of"]
