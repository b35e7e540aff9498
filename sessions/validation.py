"""Shape checks for appended messages (Anthropic Messages API content blocks).

Everything here looks at the request alone; checks against stored history (orphan results,
duplicate tool_use ids) happen in `services.messages_append` under the session lock.
Errors are collected as {field path: problem}, e.g.
`{"messages[2].content[1].tool_use_id": "must be a non-empty string"}`, so the API can name
exactly what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from compaction.core import blocks
from compaction.core.blocks import TOOL_RESULT, TOOL_USE

ROLES = ("user", "assistant")
MESSAGE_KEYS = ("role", "content", "usage", "provenance")
# Whose words a message (or a top-level text block) carries: compaction.core.provenance.
PROVENANCES = ("person", "harness")
PROVENANCE_PROBLEM = "must be 'person' (typed by the user) or 'harness' (injected by the agent harness), or ''"
# The kinds and their fields are compaction.core.blocks'; the API schema and the transcript
# import read them here. Unknown fields are refused instead of stored: most likely a typo.
BLOCK_TYPES = blocks.STORED_KINDS
BLOCK_KEYS = blocks.FIELDS
SOURCE_TYPES = ("base64", "url", "file", "text", "content")
# What each source type needs, and may carry.
SOURCE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "base64": (("media_type", "data"), ()),
    "url": (("url",), ()),
    "file": (("file_id",), ()),
    "text": (("data",), ("media_type",)),
    "content": (("content",), ()),
}
MAX_ERRORS = 50

# --- media as the provider checks it ------------------------------------------------------------
# What the Anthropic Messages API refuses in an image or document source (its "Vision" and "PDF
# support" pages): stored anyway, such a block was sent again on every later call, each refused.
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# An image's base64 data (the API counts the encoded bytes: "image exceeds 5 MB maximum").
MAX_IMAGE_BASE64_BYTES = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8000  # pixels, either side
PDF_MEDIA_TYPE = "application/pdf"
MAX_PDF_BYTES = 32 * 1024 * 1024  # the API's request size limit, which a PDF cannot pass
_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}


@dataclass
class Errors:
    items: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, problem: str) -> None:
        if len(self.items) < MAX_ERRORS and path not in self.items:
            self.items[path] = problem

    def __bool__(self) -> bool:
        return bool(self.items)


def _join(prefix: str, name: str) -> str:
    if not prefix:
        return name
    return f"{prefix}{name}" if name.startswith("[") else f"{prefix}.{name}"


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _check_source(block: dict[str, Any], path: str, errors: Errors) -> None:
    source = block.get("source")
    where = _join(path, "source")
    if not isinstance(source, dict):
        errors.add(where, "required: an object with a 'type' (base64, url or file)")
        return
    kind = source.get("type")
    if kind not in SOURCE_TYPES or (block.get("type") == "image" and kind in ("text", "content")):
        allowed = SOURCE_TYPES if block.get("type") == "document" else ("base64", "url", "file")
        errors.add(_join(where, "type"), f"must be one of {', '.join(allowed)}")
        return
    required, optional = SOURCE_KEYS[kind]
    for key in required:
        value = source.get(key)
        if key == "content":
            if isinstance(value, list):
                if not value:
                    errors.add(_join(where, key), "must not be empty")
                for index, inner in enumerate(value):
                    check_block(inner, _join(where, f"content[{index}]"), None, errors, inner=True)
            elif not _nonempty_str(value):
                errors.add(_join(where, key), f"required for a {kind} source: a string or a list of blocks")
        elif not _nonempty_str(value):
            errors.add(_join(where, key), f"required for a {kind} source: a non-empty string")
    for key in source:
        if key not in ("type", *required, *optional):
            errors.add(
                _join(where, safe_text(str(key))),
                f"unknown field for a {kind} source; allowed: {', '.join(('type', *required, *optional))}",
            )
    if all(_nonempty_str(source.get(key)) for key in required if key != "content"):
        problem = media_problem(block.get("type"), source)
        if problem is not None:
            errors.add(_join(where, problem[0]), problem[1])


def media_problem(kind: Any, source: dict[str, Any]) -> tuple[str, str] | None:
    """(field under the source, problem) when the provider would refuse this image or document
    source: base64 that does not decode, data that is not the media type it says (magic bytes),
    an image over 5 MB or 8,000 pixels a side, a PDF over 32 MB, a url that is not https."""
    source_type = source.get("type")
    if source_type == "url":
        url = source["url"]
        parts = urlsplit(url) if url.isascii() else None
        if parts is None or parts.scheme.lower() != "https" or not parts.hostname:
            return "url", f"must be an https:// URL, got {safe_text(url[:60])!r}"
        return None
    if source_type == "text" and kind == "document":
        media_type = source.get("media_type", "text/plain")
        if media_type != "text/plain":
            return "media_type", f"must be 'text/plain' for a text source, got {safe_text(str(media_type)[:60])!r}"
        return None
    if source_type != "base64":
        return None
    media_type, data = source["media_type"], source["data"]
    allowed = IMAGE_MEDIA_TYPES if kind == "image" else (PDF_MEDIA_TYPE,)
    if media_type not in allowed:
        return (
            "media_type",
            f"must be one of {', '.join(allowed)} for a base64 {kind}, got {safe_text(media_type[:60])!r}",
        )
    if kind == "image" and len(data) > MAX_IMAGE_BASE64_BYTES:
        return "data", f"image exceeds 5 MB maximum: {len(data):,} bytes of base64 > {MAX_IMAGE_BASE64_BYTES:,}"
    if kind == "document" and len(data) > MAX_PDF_BYTES * 4 // 3 + 4:
        return "data", f"PDF exceeds the 32 MB request maximum: {len(data):,} bytes of base64"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "data", "is not valid base64 (RFC 4648: A-Z, a-z, 0-9, + and /, padded with =; no spaces)"
    if not _is_media_type(raw, media_type):
        return "data", f"is not {media_type} data (its first bytes are not that format's signature)"
    size = image_size(raw, media_type) if kind == "image" else None
    if size is not None and max(size) > MAX_IMAGE_SIDE:
        return "data", f"image is {size[0]}x{size[1]} pixels: at most {MAX_IMAGE_SIDE:,} pixels a side"
    return None


def _is_media_type(raw: bytes, media_type: str) -> bool:
    if media_type == "image/webp":
        return raw[:4] == b"RIFF" and raw[8:12] == b"WEBP"
    if media_type == PDF_MEDIA_TYPE:
        return b"%PDF-" in raw[:1024]  # the header may follow a little junk (PDF 1.7, 7.5.2)
    return raw.startswith(_MAGIC[media_type])


def image_size(raw: bytes, media_type: str) -> tuple[int, int] | None:
    """(width, height) read from the image's header; None when the header is not all there."""
    try:
        if media_type == "image/png" and raw[12:16] == b"IHDR":
            return struct.unpack(">II", raw[16:24])
        if media_type == "image/gif":
            return struct.unpack("<HH", raw[6:10])
        if media_type == "image/webp":
            chunk = raw[12:16]
            if chunk == b"VP8X":
                return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
            if chunk == b"VP8L":
                bits = int.from_bytes(raw[21:25], "little")
                return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
            if chunk == b"VP8 ":
                width, height = struct.unpack("<HH", raw[26:30])
                return width & 0x3FFF, height & 0x3FFF
        if media_type == "image/jpeg":
            return _jpeg_size(raw)
    except struct.error:
        return None
    return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        length = int.from_bytes(raw[at + 2 : at + 4], "big")
        # Start of frame (baseline, progressive, ...): not DHT (C4), JPG (C8) or DAC (CC).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", raw[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _check_text(value: Any, path: str, errors: Errors) -> None:
    if not isinstance(value, str):
        errors.add(path, f"required: a string, got {_kind(value)}")
    elif not value:
        # The provider rejects empty text blocks, which would make the served context invalid.
        # Whitespace-only blocks are accepted: real agents (Claude Code) send "\n\n" blocks.
        errors.add(path, "must not be empty")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def check_block(block: Any, path: str, role: str | None, errors: Errors, *, inner: bool = False) -> None:
    if not isinstance(block, dict):
        errors.add(path, f"must be a content block object, got {_kind(block)}")
        return
    kind = block.get("type")
    allowed = blocks.TOOL_RESULT_CONTENT_KINDS if inner else BLOCK_TYPES
    if not isinstance(kind, str) or kind not in allowed:
        shown = repr(kind) if isinstance(kind, str) else _kind(kind)
        errors.add(_join(path, "type"), f"unknown block type {shown}; allowed: {', '.join(allowed)}")
        return
    # Provenance is a message's text's: not a tool result's or a document's inner blocks'.
    known = BLOCK_KEYS[kind] - {"provenance"} if inner else BLOCK_KEYS[kind]
    for key in block:
        if key not in known:
            errors.add(
                _join(path, safe_text(str(key))),
                f"unknown field for a {kind} block; allowed: {', '.join(sorted(known))}",
            )
    owner = blocks.ROLE_ONLY.get(kind)
    if owner and role and role != owner:
        errors.add(_join(path, "type"), f"{kind} blocks are only allowed in {owner} messages, not in {role} messages")
    if kind == blocks.TEXT:
        _check_text(block.get("text"), _join(path, "text"), errors)
        if "provenance" in block and not inner:
            _check_provenance(block["provenance"], _join(path, "provenance"), errors)
    elif kind == blocks.THINKING:
        if not isinstance(block.get("thinking"), str):
            errors.add(_join(path, "thinking"), "required: a string")
        if "signature" in block and not isinstance(block["signature"], str):
            errors.add(_join(path, "signature"), "must be a string")
    elif kind == blocks.REDACTED_THINKING:
        if not _nonempty_str(block.get("data")):
            errors.add(_join(path, "data"), "required: a non-empty string")
    elif kind == blocks.TOOL_USE:
        if not _nonempty_str(block.get("id")):
            errors.add(_join(path, "id"), "required: a non-empty string")
        elif len(block["id"]) > 255:
            errors.add(_join(path, "id"), "must be at most 255 characters")
        if not _nonempty_str(block.get("name")):
            errors.add(_join(path, "name"), "required: a non-empty string")
        elif len(block["name"]) > 255:
            errors.add(_join(path, "name"), "must be at most 255 characters")
        if "input" not in block:
            errors.add(_join(path, "input"), "required: an object (the tool's arguments)")
        elif not isinstance(block["input"], dict):
            errors.add(_join(path, "input"), f"must be an object, got {_kind(block['input'])}")
    elif kind == blocks.TOOL_RESULT:
        if not _nonempty_str(block.get("tool_use_id")):
            errors.add(_join(path, "tool_use_id"), "required: a non-empty string")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            errors.add(_join(path, "is_error"), "must be a boolean")
        content = block.get("content")
        if isinstance(content, list):
            for index, inner_block in enumerate(content):
                check_block(inner_block, _join(path, f"content[{index}]"), None, errors, inner=True)
        elif content is not None and not isinstance(content, str):
            errors.add(_join(path, "content"), f"must be a string or a list of blocks, got {_kind(content)}")
    elif kind in (blocks.IMAGE, blocks.DOCUMENT):
        _check_source(block, path, errors)


def check_message(message: Any, path: str, errors: Errors) -> None:
    if not isinstance(message, dict):
        errors.add(path or "body", f"must be an object with 'role' and 'content', got {_kind(message)}")
        return
    # First, and alone when it fails: PostgreSQL's jsonb cannot store U+0000, no database can
    # store (and no error body can echo) an unpaired surrogate, and absurd nesting is refused
    # before anything recurses into it. Content is one level below the message.
    bad = None
    if "content" in message:
        bad = find_bad_json(
            message["content"], _join(path, "content"), max_depth=MAX_CONTENT_DEPTH, check_strings=False
        )
    # The content is within that depth: the message's other fields are walked for theirs, then
    # every string of the message checked once.
    others = {key: value for key, value in message.items() if key != "content"}
    bad = bad or _too_deep(others, path, MAX_CONTENT_DEPTH + 2) or find_bad_json(message, path)
    if bad is not None:
        errors.add(*bad)
        return
    for key in message:
        if key not in MESSAGE_KEYS:
            errors.add(_join(path, safe_text(str(key))), f"unknown field; allowed: {', '.join(MESSAGE_KEYS)}")
    role = message.get("role")
    if role not in ROLES:
        shown = repr(role) if isinstance(role, str) else _kind(role)
        errors.add(_join(path, "role"), f"unknown role {shown}; must be 'user' or 'assistant'")
        role = None
    if "content" not in message:
        errors.add(_join(path, "content"), "required: a string or a list of content blocks")
    else:
        content = message["content"]
        if isinstance(content, str):
            if not content:
                errors.add(_join(path, "content"), "must not be empty")
        elif isinstance(content, list):
            if not content:
                errors.add(_join(path, "content"), "must not be empty")
            for index, block in enumerate(content):
                check_block(block, _join(path, f"content[{index}]"), role, errors)
        else:
            errors.add(_join(path, "content"), f"must be a string or a list of content blocks, got {_kind(content)}")
    usage = message.get("usage")
    if usage is not None and not isinstance(usage, dict):
        errors.add(_join(path, "usage"), f"must be an object, got {_kind(usage)}")
    if "provenance" in message:
        _check_provenance(message["provenance"], _join(path, "provenance"), errors)


def _check_provenance(value: Any, path: str, errors: Errors) -> None:
    if value != "" and value not in PROVENANCES:
        errors.add(path, PROVENANCE_PROBLEM)


NUL_PROBLEM = "must not contain the NUL character (\\u0000)"
SURROGATE_PROBLEM = "must not contain an unpaired surrogate (e.g. \\ud800 without its pair); send valid UTF-16 pairs"
# Message content deeper than this is not a conversation; bounding it also keeps every later
# recursive step (json encoding, the database's JSON functions) far from Python's recursion limit.
MAX_CONTENT_DEPTH = 64


def safe_text(text: str) -> str:
    """`text` with unpaired surrogates escaped (\\udc80), so it can be echoed in an error body."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def find_bad_json(
    value: Any, path: str, *, max_depth: int | None = None, check_nul: bool = True, check_strings: bool = True
) -> tuple[str, str] | None:
    """(path, problem) of the first string or object key the database cannot store (U+0000 for
    PostgreSQL's jsonb; an unpaired surrogate, which is not valid UTF-8 anywhere), or of the first
    container nested deeper than `max_depth`. None when all is well.

    Walks iteratively (deep JSON cannot overflow the stack). Strings are only inspected when a
    C-speed scan of the whole value says one of them might be bad.
    """
    suspect = True
    if max_depth is not None:
        problem = _too_deep(value, path, max_depth)
        if problem is not None:
            return problem
    if not check_strings:
        return None
    try:
        dumped = json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):  # deeper than the encoder goes, or NaN: walk it
        pass
    else:
        # json escapes U+0000 as \u0000 and leaves a lone surrogate raw (so encoding fails).
        suspect = (check_nul and "\\u0000" in dumped) or not _encodable(dumped)
    if not suspect:
        return None
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if check_nul and "\x00" in item:
                return where or "body", NUL_PROBLEM
            if not _encodable(item):
                return where or "body", SURROGATE_PROBLEM
        elif isinstance(item, dict):
            for key in reversed(list(item)):
                if check_nul and isinstance(key, str) and "\x00" in key:
                    return _join(where, repr(key)), NUL_PROBLEM
                if isinstance(key, str) and not _encodable(key):
                    return _join(where, safe_text(repr(key))), SURROGATE_PROBLEM
                stack.append((item[key], _join(where, str(key))))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], _join(where, f"[{index}]")))
    return None


def _too_deep(value: Any, path: str, max_depth: int) -> tuple[str, str] | None:
    # Only containers are pushed, each with its parent's entry and its key: the path is built
    # only for the one reported (building one per container cost more than the walk).
    stack: list[tuple[Any, int, Any, Any, bool]] = [(value, 0, None, None, False)]
    while stack:
        entry = stack.pop()
        item, depth = entry[0], entry[1]
        if depth > max_depth:
            return _entry_path(entry, path) or "body", f"nested more than {max_depth} levels deep"
        if isinstance(item, dict):
            stack.extend(
                (child, depth + 1, entry, key, False) for key, child in item.items() if isinstance(child, (dict, list))
            )
        elif isinstance(item, list):
            stack.extend(
                (child, depth + 1, entry, index, True)
                for index, child in enumerate(item)
                if isinstance(child, (dict, list))
            )
    return None


def _entry_path(entry: tuple[Any, int, Any, Any, bool], root: str) -> str:
    steps = []
    while entry[2] is not None:
        steps.append(f"[{entry[3]}]" if entry[4] else safe_text(str(entry[3])))
        entry = entry[2]
    where = root
    for step in reversed(steps):
        where = _join(where, step)
    return where


def tool_uses(content: Any) -> list[tuple[int, dict[str, Any]]]:
    """(block index, block) of each tool_use block."""
    if not isinstance(content, list):
        return []
    return [(i, b) for i, b in enumerate(content) if b.get("type") == TOOL_USE]


def tool_results(content: Any) -> list[tuple[int, dict[str, Any]]]:
    if not isinstance(content, list):
        return []
    return [(i, b) for i, b in enumerate(content) if b.get("type") == TOOL_RESULT]


# --- serving: whitespace-only text ---------------------------------------------------------
# Messages are stored as sent (real transcripts hold text blocks of only "\n\n"), but the
# Anthropic Messages API rejects them ("text content blocks must contain non-whitespace
# text"), so the served context leaves them out.


def _blank_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text", "")).strip()


def has_blank_text(content: Any) -> bool:
    """True when serving `content` as is would send whitespace-only text (cheap; most messages: False)."""
    if isinstance(content, str):
        return not content.strip()
    return isinstance(content, list) and any(_blank_block(b) for b in content)


def without_blank_text(content: Any) -> Any | None:
    """`content` without its whitespace-only text blocks; None when nothing is left to serve."""
    if isinstance(content, str):
        return content if content.strip() else None
    kept = [b for b in content if not _blank_block(b)]
    return kept or None


def without_trailing_whitespace(content: Any) -> Any:
    """Content of the final assistant message, its last text rstripped (the Anthropic API rejects
    "final assistant content cannot end with trailing whitespace"). The same object when unchanged."""
    if isinstance(content, str):
        stripped = content.rstrip()
        return stripped if stripped != content else content
    if isinstance(content, list) and content:
        last = content[-1]
        if isinstance(last, dict) and last.get("type") == "text" and isinstance(last.get("text"), str):
            stripped = last["text"].rstrip()
            if stripped != last["text"]:
                return [*content[:-1], {**last, "text": stripped}]
    return content
