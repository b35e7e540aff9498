"""How a search query is read and how a hit is shown (sessions.search_text: no database)."""

from __future__ import annotations

import pytest

from sessions.search_text import QueryError, message_blocks, parse_query, snippet_for


def test_a_query_splits_into_words_phrases_and_identifiers():
    query = parse_query('fix "ALTER  TABLE" in src/app.py, then spotter-fum.2. Done (3bf70f7)')
    assert query.words == ("fix", "in", "then", "Done", "3bf70f7")
    assert query.phrases == ("ALTER TABLE",)
    assert query.identifiers == ("src/app.py", "spotter-fum.2")
    # An identifier is found by its words, then as a substring.
    assert parse_query("--no-verify").identifiers == ("--no-verify",)
    assert parse_query("50%").identifiers == ("50%",)


@pytest.mark.parametrize("bad", ["%", "[", "_", "/", "--", '""', '"--"', "() %", "__ ** //"])
def test_a_query_without_a_letter_or_digit_is_an_error_that_says_why(bad):
    """The index is of words: punctuation alone would be a substring read of every message
    (issue 35: `%` took 2.2 to 2.6 s over 37.7k messages)."""
    with pytest.raises(QueryError, match="no letter or digit"):
        parse_query(bad)


@pytest.mark.parametrize("bad", ["", "   ", "x" * 501, "a\x00b"])
def test_an_unsearchable_query_is_an_error(bad):
    with pytest.raises(QueryError):
        parse_query(bad)


def test_blocks_have_their_kind_and_readable_text():
    blocks = message_blocks(
        [
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls\nsrc/"}},
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "app.py"}]},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ]
    )
    assert [(b.index, b.kind) for b in blocks] == [(0, "text"), (1, "tool_call"), (2, "tool_result")]
    assert blocks[1].text == "Bash command: ls\nsrc/"
    assert message_blocks("plain")[0].kind == "text"


def test_the_snippet_marks_every_match_around_the_first():
    content = [
        {"type": "text", "text": "Nothing here."},
        {"type": "tool_result", "tool_use_id": "t1", "content": "line\n" * 80 + "ALTER   TABLE users;\nalter table x"},
    ]
    snippet = snippet_for(content, parse_query('"alter table"'))
    assert snippet.block.kind == "tool_result" and snippet.block.index == 1
    assert snippet.text.startswith("…") and "«ALTER TABLE» users; «alter table» x" in snippet.text
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["ALTER TABLE", "alter table"]
    # A word matches the start of a word, inside dotted names too, not in the middle of one.
    hit = snippet_for("Spotter.Repo.AddState.up/0 and readdress", parse_query("add"))
    assert hit.text == "Spotter.Repo.«AddState».up/0 and readdress".replace("«AddState»", "«Add»State")
