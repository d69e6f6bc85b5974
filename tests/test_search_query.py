"""``neardup search``'s queries: FTS5 syntax kept, words tokenized as the
index's text is (``crawler.index.fts5_query``), and errors that say what FTS5
expects; against a real SQLite FTS5 index."""

from __future__ import annotations

import re

import pytest

from scrapy_neardup.crawler.index import PageIndex, QueryError, fts5_query


@pytest.mark.parametrize("query,match", [
    ("Solpo", '"solpo"'),
    ("Solpo OR Zuhor", '"solpo" OR "zuhor"'),
    ("solpo and zuhor", '"solpo" "and" "zuhor"'),  # (lower-case "and" is a word, as in FTS5)
    ("Solp*", '"solp" *'),
    ("Solpo NOT Zuhor", '"solpo" NOT "zuhor"'),
    ("title:Solpo", 'title : "solpo"'),
    ("-title:Solpo", '-title : "solpo"'),
    ("{title body}:Solpo", '{title body} : "solpo"'),
    ("NEAR(Solpo Zuhor, 5)", 'NEAR ( "solpo" "zuhor" , 5 )'),
    ('"Harbour of  Solpo"', '"harbour of solpo"'),
    ('"say ""hi"""', '"say hi"'),
    ("^Solpo + harbour", '^ "solpo" + "harbour"'),
    ("ＳＯＬＰＯ", '"solpo"'),  # full-width Latin, as the tokenizer folds it
    ("e-mail", '"e mail"'),  # a word of several tokens: their phrase
    ("网页去重技术", '"网页 去 重 技术"'),  # Chinese: jieba's words, as indexed
    ("& Solpo", '"solpo"'),  # punctuation alone is no word
])
def test_words_are_tokenized_and_the_syntax_kept(query, match):
    assert fts5_query(query) == match


@pytest.mark.parametrize("query,problem", [
    ("(", "unbalanced ("),
    ("Solpo)", "unbalanced )"),
    ('"unbalanced', 'unbalanced "'),
    ("{title Solpo", "unbalanced {"),
    ("&&", "no word to search for"),
    ("AND", "no word to search for"),
])
def test_a_query_fts5_cannot_read_is_refused_before_it_runs(query, problem):
    with pytest.raises(QueryError, match=re.escape(problem)) as err:
        fts5_query(query)
    assert "FTS5 expects" in str(err.value)


def test_fts5s_own_errors_come_back_as_query_errors(tmp_path):
    index = PageIndex(tmp_path / "index.sqlite3")
    index.add("http://t.test/a", "Solpo", "The harbour of Solpo.", "0" * 16, "2026-01-01", 200)
    assert [u for u, _, _ in index.search("Solpo OR Zuhor")] == ["http://t.test/a"]
    for query, problem in (("Solpo OR", "syntax error"), ("author:Solpo", "no such column: author")):
        with pytest.raises(QueryError, match=problem):
            index.search(query)
    index.close()


def test_greek_is_found_without_its_accents_and_russian_yo_as_ye(tmp_path):
    """Greek capitals carry no accents and many type without them; `ё` is mostly written `е`: a search for
    εγκατασταση or ΕΓΚΑΤΑΣΤΑΣΗ found nothing of pages that say εγκατάσταση."""
    index = PageIndex(tmp_path / "index.sqlite3")
    index.add("http://t.test/el", "Οδηγός", "Η εγκατάσταση του συστήματος", "0" * 16, "2026-01-01T00:00:00", 200)
    index.add("http://t.test/ru", "Ещё", "установка ещё раз", "1" * 16, "2026-01-01T00:00:00", 200)
    index.add("http://t.test/uk", "Її", "мій їжак", "2" * 16, "2026-01-01T00:00:00", 200)
    index.close()
    index = PageIndex(tmp_path / "index.sqlite3", readonly=True)
    for query in ("εγκατασταση", "ΕΓΚΑΤΑΣΤΑΣΗ", "εγκατάσταση", "συστηματος"):
        assert [u for u, _, _ in index.search(query)] == ["http://t.test/el"], query
    for query in ("еще", "ещё", "title:ЕЩЕ"):
        assert [u for u, _, _ in index.search(query)] == ["http://t.test/ru"], query
    assert index.search("мій") and not index.search("мии") and not index.search("іжак")  # (й, ї stay letters)
    index.close()
    # (an index made before the folding: tests/test_index_is_the_filters.py)
