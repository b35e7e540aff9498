"""What a history search asks for and how a hit is shown: pure Python, no database.

A query is words, quoted phrases and identifiers. A word (letters and digits only) matches
a word starting with it; a quoted phrase matches its words in that order; an identifier (a
token with punctuation: `spotter-fum.2`, `src/app.py`, `--no-verify`) matches as an exact,
case-insensitive substring. Every part must match, and some part must hold a letter or digit:
the index is of words, so punctuation alone (`%`, `/`) is refused rather than read off every
message. The database finds the messages
(sessions.search); this module finds, in a message found, the block and the place to show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE

MAX_QUERY_CHARS = 500
SNIPPET_CHARS = 200
MARK_OPEN, MARK_CLOSE = "«", "»"

_PHRASE_RE = re.compile(r'"([^"]*)"')
# Punctuation around a token that belongs to the sentence, not to the identifier.
_EDGE_PUNCT = "\"'`()[]{}<>,;:!?"
WORD_RE = re.compile(r"[^\W_]+")


class QueryError(ValueError):
    """The query cannot be searched; the message says why."""


@dataclass(frozen=True)
class Query:
    words: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = field(default=(), compare=False)
    loose: tuple[re.Pattern[str], ...] = field(default=(), compare=False)


def parse_query(text: str) -> Query:
    """The parts of a search query; QueryError when it has none or is out of bounds."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("is required: the words, phrases or identifiers to find")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"is longer than {MAX_QUERY_CHARS} characters")
    if "\x00" in text:
        raise QueryError("must not contain the NUL character")
    phrases: list[str] = []
    for raw in _PHRASE_RE.findall(text):
        phrase = " ".join(raw.split())
        if phrase and phrase.lower() not in (p.lower() for p in phrases):
            phrases.append(phrase)
    words: list[str] = []
    identifiers: list[str] = []
    for phrase in [p for p in phrases if not WORD_RE.search(p)]:
        phrases.remove(phrase)  # only punctuation (`"--"`): no word to match in order, so a substring
        identifiers.append(phrase)
    for token in _PHRASE_RE.sub(" ", text).split():
        token = token.strip(_EDGE_PUNCT).rstrip(".")
        if not token:
            continue
        target = words if WORD_RE.fullmatch(token) else identifiers
        if token.lower() not in (t.lower() for t in target):
            target.append(token)
    if not words and not phrases and not any(WORD_RE.search(identifier) for identifier in identifiers):
        # The index holds words: a query of punctuation only (`%`, `[`, `_`, `/`, `--`) has no
        # term to look up, and matching it as a substring would read every message.
        raise QueryError(
            f"has no letter or digit to search by ({text.strip()[:40]!r}): the index finds words, and identifiers "
            "by their words; add a word the message holds (e.g. `--verbose`, `50%`, `src/`)"
        )
    return Query(
        words=tuple(words),
        phrases=tuple(phrases),
        identifiers=tuple(identifiers),
        patterns=tuple(_patterns(words, phrases, identifiers, strict=True)),
        loose=tuple(_patterns(words, phrases, identifiers, strict=False)),
    )


def _patterns(words: list[str], phrases: list[str], identifiers: list[str], *, strict: bool) -> list[re.Pattern]:
    """Where each part is in a text. Strict: a word starts a word and a phrase's words may be
    apart by any punctuation (as PostgreSQL's full-text parser reads them); loose: plain
    substrings (as SQLite's trigram index matches), for a hit the strict reading misses."""
    found = []
    for word in words:
        found.append(re.compile(("(?<![^\\W_])" if strict else "") + re.escape(word), re.IGNORECASE))
    for phrase in phrases:
        parts = WORD_RE.findall(phrase) if strict else phrase.split()
        glue = r"[\W_]+" if strict else r"\s+"
        if parts:
            found.append(re.compile(glue.join(re.escape(p) for p in parts), re.IGNORECASE))
    for identifier in identifiers:
        found.append(re.compile(re.escape(identifier), re.IGNORECASE))
    return found


# --- blocks of a stored message -------------------------------------------------------------

KIND_TEXT, KIND_TOOL_CALL, KIND_TOOL_RESULT, KIND_THINKING = "text", "tool_call", "tool_result", "thinking"


@dataclass(frozen=True)
class Block:
    index: int
    kind: str
    text: str
    tool_use_id: str = ""
    tool_name: str = ""


def _leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return []


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def message_blocks(content: Any) -> list[Block]:
    """The searchable blocks of a stored message's content, with their kind and text."""
    if isinstance(content, str):
        return [Block(0, KIND_TEXT, content)]
    blocks: list[Block] = []
    for index, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append(Block(index, KIND_TEXT, str(block.get("text", ""))))
        elif kind == TOOL_USE:
            name = str(block.get("name", ""))
            arguments = block.get("input")
            # Its arguments' values raw (not JSON-escaped), so a multi-line command reads and matches as sent.
            if isinstance(arguments, dict):
                shown = "\n".join(f"{key}: {' '.join(_leaves(value))}" for key, value in arguments.items())
            else:
                shown = " ".join(_leaves(arguments))
            text = f"{name} {shown}".strip()
            blocks.append(Block(index, KIND_TOOL_CALL, text, str(block.get("id", "")), name))
        elif kind == TOOL_RESULT:
            text = _result_text(block.get("content"))
            blocks.append(Block(index, KIND_TOOL_RESULT, text, str(block.get("tool_use_id", ""))))
        elif kind == "thinking":
            blocks.append(Block(index, KIND_THINKING, str(block.get("thinking", ""))))
    return blocks


# --- where the match is, and the snippet around it -------------------------------------------


@dataclass(frozen=True)
class Snippet:
    block: Block
    text: str  # the match marked «like this»
    highlights: list[tuple[int, int]]  # offsets of the marked text inside `text`, markers excluded


def _first_match(blocks: list[Block], patterns: tuple[re.Pattern, ...]) -> tuple[Block, int, int] | None:
    """The first block any pattern matches, and the earliest match in it."""
    for block in blocks:
        spans = [(m.start(), m.end()) for p in patterns if (m := p.search(block.text)) and m.end() > m.start()]
        if spans:
            start, end = min(spans)
            return block, start, end
    return None


def snippet_for(content: Any, query: Query, width: int = SNIPPET_CHARS) -> Snippet | None:
    """The first block of `content` where the query matches and a snippet around the match,
    every part of the query marked in it. None when the content has no searchable block."""
    blocks = [b for b in message_blocks(content) if b.text.strip()]
    if not blocks:
        return None
    found = _first_match(blocks, query.patterns) or _first_match(blocks, query.loose)
    block, start, end = found if found else (blocks[0], 0, 0)
    text = block.text
    lead = max(0, start - width // 3)
    stop = min(len(text), max(end, lead + width))
    window = text[lead:stop]
    spans = _spans(window, query)
    pieces: list[str] = ["…" if lead else ""]
    highlights: list[tuple[int, int]] = []
    cursor = 0
    length = len(pieces[0])
    for s, e in spans:
        plain = _flat(window[cursor:s])
        marked = _flat(window[s:e])
        pieces += [plain, MARK_OPEN, marked, MARK_CLOSE]
        length += len(plain) + len(MARK_OPEN)
        highlights.append((length, length + len(marked)))
        length += len(marked) + len(MARK_CLOSE)
        cursor = e
    pieces.append(_flat(window[cursor:]))
    if stop < len(text):
        pieces.append("…")
    return Snippet(block=block, text="".join(pieces), highlights=highlights)


def _flat(text: str) -> str:
    """Whitespace runs as one space, so a snippet is one line (ends kept, for the marks' sake)."""
    return re.sub(r"\s+", " ", text)


def _spans(window: str, query: Query) -> list[tuple[int, int]]:
    """Every match in the window, as the database read the query (loosely only if that finds none)."""
    spans: list[tuple[int, int]] = []
    for patterns in (query.patterns, query.loose):
        spans = sorted(
            (m.start(), m.end()) for pattern in patterns for m in pattern.finditer(window) if m.end() > m.start()
        )
        if spans:
            break
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


# The index of a stored message (PostgreSQL's tsvector; migrations 0010 and 0015). Its text is every
# string and number of the content but the structural ones, in the order the database's
# compactor_search_text walks it: level by level, an object's keys in jsonb's order (shorter
# first, then bytewise). Its words are the runs of letters and digits (WORD_RE), each lowercased,
# numbered from 1, as the database's compactor_search_vector takes them for other writers.
SKIPPED_KEYS = frozenset({"type", "provenance", "signature", "media_type", "data"})
INDEXED_CHARS = 200_000  # a tsvector holds at most 1 MB: the first 200,000 characters are indexed
MAX_WORD_BYTES = 2047  # a longer word is left out (it keeps its number)
# A message whose text may pass the positions carries this word, which no text can make (words are
# letters and digits only); sessions.search checks such a message's text for a phrase instead.
LONG_MARK = "_long_"
LONG_CHARS = 32_000
# ASCII letters lowercased, digits kept, other ASCII a space, other bytes (UTF-8 of the rest) kept.
_ASCII_WORDS = bytes((c | 0x20) if chr(c).isalnum() and c < 128 else (c if c >= 128 else 32) for c in range(256))


def index_text(content: Any) -> str:
    """The searchable text of a message's content, as compactor_search_text gives it."""
    out: list[str] = []
    level: list[tuple[str | None, Any]] = [(None, content)]
    while level:
        below: list[tuple[str | None, Any]] = []
        for key, value in level:
            if isinstance(value, str):
                if key not in SKIPPED_KEYS:
                    out.append(value)
            elif isinstance(value, dict):
                ordered: list[tuple[str, Any]] = sorted(value.items(), key=_jsonb_key_order)
                below.extend(ordered)
            elif isinstance(value, list):
                below.extend((None, item) for item in value)
            elif isinstance(value, int | float) and not isinstance(value, bool) and key not in SKIPPED_KEYS:
                out.append(str(value))
        level = below
    return "\n".join(out)


def _jsonb_key_order(item: tuple[str, Any]) -> tuple[int, bytes]:
    key = item[0].encode()
    return len(key), key


def index_words(text: str) -> list[bytes]:
    """WORD_RE's words of `text`, each lowercased, as UTF-8. ASCII runs are cut by a byte table;
    only a run holding other characters goes through the regular expression (5x slower)."""
    words: list[bytes] = []
    for run in text.encode().translate(_ASCII_WORDS).split():
        if run.isascii():
            words.append(run)
        else:
            words.extend(word.lower().encode() for word in WORD_RE.findall(run.decode()))
    return words


def index_vector(content: Any) -> str:
    """The message's tsvector as PostgreSQL's input text, a word and its number per occurrence
    (`'the':1 'tests':2 'the':3`; the input merges a word's numbers, keeps its first 256 and stops
    them at 16,383), which the append path sends with the INSERT: built here, it costs the web
    process a third of what the database's compactor_search_vector costs the database. A float is
    written as Python writes it (the database keeps a JSON number's own digits, `2.50`): the one
    place the two can differ."""
    text = index_text(content)
    words = index_words(text[:INDEXED_CHARS])
    parts = [b"'%s':%d" % (word, index) for index, word in enumerate(words, start=1) if len(word) <= MAX_WORD_BYTES]
    if len(text) > LONG_CHARS:
        parts.append(b"'" + LONG_MARK.encode() + b"'")
    return b" ".join(parts).decode()
