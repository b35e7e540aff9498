"""Parsing a resent history without parsing again what the previous request already held.

An agent resends its whole history on every call: the previous call's items (messages, or a
Responses API `input`) byte for byte, then the reply and the new message; only the last item or
two change in place (Claude Code moves its cache_control markers). At a few thousand messages
that is megabytes, and parsing them, walking them for checks and comparing them with the stored
history is most of what a call costs. So each process keeps the last requests it parsed (raw
bytes and parsed items, per key owner and history); a request whose items start with the same
bytes as a kept one's reuses that one's parsed items and parses only the rest.

How the reused part is found, so that it is exact rather than likely:
1. `"<key>": [` opens the list of items (a structural key: in a JSON string its quotes would be
   escaped). The bytes before it must be the kept request's own (so the list is the same field,
   at the same depth, in both), and the two lists are compared as bytes from there: their
   common prefix.
2. Inside that prefix, from its end backwards, a candidate boundary is a `{"name":` (a name
   starting with a letter) that follows a comma: in valid JSON such a `{` cannot be inside a
   string (the quote after it would close the string, and no letter may follow a string), so it
   opens an object after a comma: an item, or an object in a list nested in one.
3. The new request without the bytes between the list's opening and the candidate is parsed
   (orjson), the list's key renamed for it, so that a second field of that name after the list
   (parsers keep the last of two) shows, and the request is parsed whole. Cutting out whole items leaves valid JSON; cutting from inside an item leaves
   unmatched closing brackets, which no parser accepts. So a successful parse proves the candidate
   is an item boundary, and gives every item after it and every other field of the request.
4. The kept request cut at the same place tells how many of its items come before the boundary:
   those bytes are the same in both, so their parse is the same: the kept objects are reused.
   Step 3's proof holds for a candidate inside the list. A request sent again (an SDK's retry)
   shares the bytes past the list's end too, and a candidate there (a tool, a system block)
   cuts out the list's end and the key of the field holding it: valid JSON whose list is that
   field's tail. So the kept request cut there must keep all its top-level keys and its list's
   tail, or the candidate is skipped.

Anything unexpected (no list, no kept request, no boundary within a few candidates, a parse
that fails) falls back to parsing the whole request. Only requests orjson parsed whole, or built
this way from one, are kept: their bytes are standard JSON, and so are the new request's.

The parsed items are shared between calls: nothing in the gateway may change a parsed request
in place (gateway.history copies before it strips or marks a message).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

# Kept per process: the conversations being driven right now. The byte budget bounds the memory
# (bytes and their parse, a few times the bytes) however many conversations there are.
MAX_KEPT = 16
MAX_KEPT_BYTES = 48 * 1024 * 1024
# Candidates tried before parsing the whole request: the objects nested in the last item or two.
MAX_CANDIDATES = 48
# How much of the first item names a history (with the owner and the list's key).
FIRST_ITEM_BYTES = 512
_GROW = 4  # the common prefix is searched from the end, in steps growing by this factor
_FIRST_STEP = 4096

# A key starting with a letter: after a string's closing quote no letter may follow, so the `{`
# cannot be inside a string (see step 2).
_OBJECT_KEY = re.compile(rb'\{"[A-Za-z_][^"\\]*"\s*:')
_WHITESPACE = frozenset(b" \t\r\n")
_COMMA = ord(",")
# The list's own key gets this suffix while the rest of a request is parsed, so that a second
# field of that name shows (JSON parsers keep the last of two; this module reads the first).
_ALIAS_JSON = b"\\u0001"  # as JSON text
_ALIAS = "\x01"  # as parsed


@dataclass
class _Kept:
    raw: bytes
    start: int  # offset just after the list's opening bracket
    items: list[Any]
    memo: dict[str, Any] = field(default_factory=dict)
    keys: frozenset[str] = frozenset()  # the request's top-level keys


@dataclass
class Parsed:
    """A request's parse. `fresh`: the request as parsed this time (with only the items after the
    reused ones); `fresh_raw`: its bytes. `reused`: how many leading items were the kept
    request's objects. `memo`: what consumers derived from this request's items, kept with it for
    the next one; `previous_memo`: the kept request's, whose first `reused` items are this one's."""

    body: Any
    fresh: Any
    fresh_raw: bytes
    reused: int = 0
    memo: dict[str, Any] = field(default_factory=dict)
    previous_memo: dict[str, Any] = field(default_factory=dict)
    keep_as: tuple[Any, Any] | None = None  # (name, entry) to keep it as, once it passed the checks (keep())


_kept: OrderedDict[tuple[Any, str, bytes], _Kept] = OrderedDict()
_kept_bytes = 0
_lock = threading.Lock()


def parse_resent(raw: bytes, *, owner: Any, key: str) -> Parsed:
    """The request parsed with orjson (raises orjson.JSONDecodeError as orjson.loads does),
    reusing the items of the kept request it continues, if any."""
    opening = re.search(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*\[', raw)
    if opening is None:
        body = orjson.loads(raw)
        return Parsed(body=body, fresh=body, fresh_raw=raw)
    start = opening.end()
    name = (owner, key, raw[start : start + FIRST_ITEM_BYTES])
    with _lock:
        kept = _kept.get(name)
    parsed = _reuse(raw, opening.start(), start, key, kept) if kept is not None else None
    if parsed is None:
        body = orjson.loads(raw)
        parsed = Parsed(body=body, fresh=body, fresh_raw=raw)
    items = parsed.body.get(key) if isinstance(parsed.body, dict) else None
    if isinstance(items, list) and items:
        entry = _Kept(raw=raw, start=start, items=items, memo=parsed.memo, keys=frozenset(parsed.body))
        parsed.keep_as = (name, entry)
    return parsed


def keep(parsed: Parsed) -> None:
    """Keep this request for the next of its history to reuse: only once it passed the checks
    that read only its new items (gateway.intake), so that no reuse skips an item they refused."""
    if parsed.keep_as is not None:
        _keep(*parsed.keep_as)


def _reuse(raw: bytes, key_at: int, start: int, key: str, kept: _Kept) -> Parsed | None:
    if start != kept.start or not raw.startswith(memoryview(kept.raw)[:start]):
        return None  # another head: the list may not be where it was (step 1)
    common = _common_prefix(kept.raw, kept.start, raw, start)
    # The head with the list's key renamed (step 3 parses this).
    named = len(key.encode()) + 2
    aliased = raw[:key_at] + b'"' + key.encode() + _ALIAS_JSON + b'"' + raw[key_at + named : start]
    for boundary in _candidates(kept.raw, kept.start, kept.start + common):
        cut = boundary - kept.start  # bytes of whole items cut out of both lists
        try:
            fresh = orjson.loads(aliased + raw[start + cut :])
            rest_of_kept = orjson.loads(kept.raw[: kept.start] + kept.raw[boundary:])
        except orjson.JSONDecodeError:
            continue
        alias = key + _ALIAS
        if not isinstance(fresh, dict) or key in fresh or not isinstance(fresh.get(alias), list):
            return None  # not a list, or a second field of the list's name after it
        fresh = {key if name == alias else name: value for name, value in fresh.items()}
        after = rest_of_kept.get(key) if isinstance(rest_of_kept, dict) else None
        if not isinstance(after, list) or len(after) >= len(kept.items):
            return None
        reused = len(kept.items) - len(after)
        if rest_of_kept.keys() != kept.keys or after != kept.items[reused:]:
            continue  # past the list's end (step 4)
        body = {**fresh, key: kept.items[:reused] + fresh[key]}
        return Parsed(
            body=body,
            fresh=fresh,
            fresh_raw=raw[:start] + raw[start + cut :],
            reused=reused,
            previous_memo=kept.memo,
        )
    return None


def _common_prefix(a: bytes, a_start: int, b: bytes, b_start: int) -> int:
    """How many bytes a[a_start:] and b[b_start:] have in common from their start.

    A resent history differs from the kept one near its end: windows growing backwards from the
    end are compared until one is the same, then everything below it in one compare (memcmp:
    bytes.startswith of a memoryview, no copy), and the first difference is looked for by
    bisection inside the window above it. An earlier difference is bisected for from the start."""
    view = memoryview(a)
    length = min(len(a) - a_start, len(b) - b_start)

    def same(low: int, high: int) -> bool:
        return b.startswith(view[a_start + low : a_start + high], b_start + low)

    def first_difference(low: int, high: int) -> int:
        # [0, low) is the same and the common prefix is at most `high` long.
        while low < high:
            middle = (low + high + 1) // 2
            if same(low, middle):
                low = middle
            else:
                high = middle - 1
        return low

    high, upper, step = length, length, _FIRST_STEP
    while high > 0:
        low = max(0, high - step)
        if same(low, high):
            break
        high, upper, step = low, high - 1, step * _GROW
    else:
        return first_difference(0, upper)
    if low and not same(0, low):
        return first_difference(0, low - 1)
    return first_difference(high, upper)


def _candidates(raw: bytes, start: int, end: int) -> Iterator[int]:
    """Offsets of `{"name":` after a comma in raw[start:end], the last first (see step 2)."""
    tried = 0
    position = end
    while tried < MAX_CANDIDATES:
        position = raw.rfind(b"{", start, position)
        if position < 0:
            return
        if _OBJECT_KEY.match(raw, position) and _after_comma(raw, start, position):
            tried += 1
            yield position


def _after_comma(raw: bytes, start: int, position: int) -> bool:
    before = position - 1
    while before >= start and raw[before] in _WHITESPACE:
        before -= 1
    return before >= start and raw[before] == _COMMA


def _keep(name: tuple[Any, str, bytes], entry: _Kept) -> None:
    global _kept_bytes
    if len(entry.raw) > MAX_KEPT_BYTES // 4:
        return
    with _lock:
        previous = _kept.pop(name, None)
        _kept_bytes -= len(previous.raw) if previous else 0
        _kept[name] = entry
        _kept_bytes += len(entry.raw)
        while len(_kept) > MAX_KEPT or _kept_bytes > MAX_KEPT_BYTES:
            _, dropped = _kept.popitem(last=False)
            _kept_bytes -= len(dropped.raw)
