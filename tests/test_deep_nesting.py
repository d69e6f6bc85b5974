"""Deeply nested blocks: renamed past MAX_DEPTH so that parsing stays linear,
with the same visible text."""

from __future__ import annotations

import functools
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_neardup.dedup.text import visible as T
from scrapy_neardup.dedup.text.deep_nesting import MAX_DEPTH, bound_nesting


@pytest.mark.parametrize(("data", "depth", "expected"), [
    (b"<div><div>x</div></div>", 1, b"<div><marquee>x</marquee></div>"),
    # names in any case, quoted ">" in attributes, attributes kept
    (b"<DIV class='a>b'><Div hidden>x</DIV ></div>", 1, b"<DIV class='a>b'><marquee hidden>x</marquee ></div>"),
    # tags inside raw text, comments and other elements' names are not counted
    (b"<div><script>'<div><div>'</script><!-- <div> --><divx><section>y</section></div>", 1,
     b"<div><script>'<div><div>'</script><!-- <div> --><divx><marquee>y</marquee></div>"),
    (b"<div><textarea><div></textarea><div>z", 1, b"<div><textarea><div></textarea><marquee>z"),
    # p, li are closed by their next sibling: never counted
    (b"<p>a<p>b<li>c<li>d", 0, b"<p>a<p>b<li>c<li>d"),
    (b"<<<<", 1, b"<<<<"),
    (b"<div", 0, b"<marquee"),
    (b"", 0, b""),
])
def test_renames_only_what_nests_too_deep(data, depth, expected):
    assert bound_nesting(data, max_depth=depth) == expected


def test_pages_with_few_tags_are_returned_as_they_are():
    data = b"<div>" * MAX_DEPTH
    assert bound_nesting(data) is data


def test_very_deep_nesting_keeps_its_text():
    """100,000 nested divs took lexbor 32 s before (quadratic); the text at
    the bottom, and a hidden element's absence, must survive the renaming."""
    n = 100_000
    data = (b"<div>" * n + b"<p>bottom words</p><div hidden>secret</div>" + b"</div>" * n
            + b"<p>after the nest</p>")
    page = T.extract(data)
    assert page.text == "bottom words\nafter the nest"


_BLOCKS = ("div", "section", "ul", "ol", "blockquote", "nav", "article")


@st.composite
def nested_markup(draw, well_formed: bool) -> str:
    """Random nested blocks with text, hidden elements, paragraphs, lists,
    inline elements and tags inside scripts. Well formed: every end tag
    closes the element open last, and list items sit in their own list (the
    two cases where renaming changes the tree past the depth limit: an end
    tag closing an outer element through inner ones, and an ``<li>`` closing
    an open item through ``div``s)."""
    parts: list[str] = []
    open_tags: list[str] = []
    for _ in range(draw(st.integers(1, 120))):
        kind = draw(st.sampled_from(["open", "open", "close", "text", "p", "li", "inline", "script", "hidden"]))
        if kind == "open":
            tag = draw(st.sampled_from(_BLOCKS))
            attrs = draw(st.sampled_from(["", " class='x>y'", " style='display:none'", " aria-hidden=true"]))
            parts.append(f"<{tag.upper() if draw(st.booleans()) else tag}{attrs}>")
            open_tags.append(tag)
        elif kind == "close" and open_tags:
            wrong = not well_formed and draw(st.booleans())
            parts.append(f"</{draw(st.sampled_from(_BLOCKS)) if wrong else open_tags.pop()}>")
        elif kind == "text":
            parts.append(draw(st.sampled_from(["alpha", "beta gamma", "网页", " ", "delta\n", "<h2>heading</h2>"])))
        elif kind == "p":
            parts.append("<p>para</p>" if well_formed else "<p>para")
        elif kind == "li":
            parts.append("<ul><li>item</li></ul>" if well_formed else "<li>item")
        elif kind == "inline":
            parts.append("<b>bold</b><a href=/x>link</a>")
        elif kind == "script":
            parts.append("<script>'<div><div>'</script><!-- <div> -->")
        else:
            parts.append("<div hidden>hidden text</div>")
    return "".join(parts)


def _extract_with(bound, html: bytes) -> T.Page:
    """``extract`` with ``bound`` in place of ``bound_nesting``."""
    original = T.bound_nesting
    T.bound_nesting = bound
    try:
        return T.extract(html)
    finally:
        T.bound_nesting = original


@settings(max_examples=150, deadline=None)
@given(nested_markup(well_formed=True), st.integers(0, 6))
def test_same_visible_text_as_without_renaming(markup, depth):
    """With a tiny depth limit most blocks get renamed: the visible text of
    well-formed nesting must not change (pre, svg and math are left out: see
    the module docstring)."""
    html = markup.encode()
    renamed = _extract_with(functools.partial(bound_nesting, max_depth=depth), html)
    plain = _extract_with(lambda data: data, html)
    assert (renamed.title, renamed.text) == (plain.title, plain.text)


@settings(max_examples=150, deadline=None)
@given(nested_markup(well_formed=False), st.integers(0, 6))
def test_broken_nesting_keeps_only_its_own_words(markup, depth):
    """Broken nesting past the limit may hide or show other elements than a
    browser would; it never raises nor makes up text."""
    renamed = _extract_with(functools.partial(bound_nesting, max_depth=depth), markup.encode())
    text_of_markup = re.sub(r"<[^>]*>", "", re.sub(r"<script>.*?</script>|<!--.*?-->", "", markup))
    assert Counter("".join(renamed.text.split())) <= Counter("".join(text_of_markup.split()))
