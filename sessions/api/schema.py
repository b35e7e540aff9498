"""OpenAPI schema post-processing: what every operation can answer, stated in the schema.

drf-spectacular documents what each view declares; the answers that come from the framework
around the views (authentication, CSRF, throttling, the size limit, an unknown or another
owner's session, a bad page) are the same for every operation, so they are added here once
instead of on every view. Also adds the constraints a serializer cannot express (overflow's
"at least one of").
"""

from __future__ import annotations

from typing import Any

from compaction.core.config import OVERRIDABLE
from compaction.core.prompts import CUSTOM_PROMPT_PLACEHOLDERS, MAX_CUSTOM_PROMPT_CHARS
from sessions.validation import BLOCK_KEYS, BLOCK_TYPES, SOURCE_KEYS, SOURCE_TYPES

ERROR_REF = {"$ref": "#/components/schemas/Error"}

DESCRIPTIONS = {
    "400": "Bad input: `error` names the first field path and its problem; `detail` maps every bad field path "
    "to its problems. Nothing was stored.",
    "401": "No API key, or an invalid, revoked or expired one.",
    "403": "Authenticated by the dashboard's login session without a valid CSRF token.",
    "404": "No such session for this caller (another owner's session, or one in the trash, is also a 404), "
    "no such compaction, or a page or cursor past the end.",
    "411": "Transfer-Encoding: chunked on a server that does not de-chunk: send a Content-Length.",
    "409": "A conflict with the current state (`error` says which), or an `Idempotency-Key` already used for "
    "another request, or whose first request is still running.",
    "413": "Body larger than COMPACTOR_MAX_REQUEST_BYTES; `detail` has the size and the limit.",
    "429": "Too many requests for this API key (COMPACTOR_API_THROTTLE_RATE); Retry-After says when to retry.",
}

# Every writing POST takes the header (sessions.api.idempotency); not a declared parameter, so
# that generated requests do not reuse one key for two bodies.
IDEMPOTENCY_NOTE = (
    "\n\nSafe to retry with an `Idempotency-Key` header (1-255 printable ASCII characters, per API key "
    "owner, 24 h): the same key and body get the first answer again (`Idempotent-Replayed: true`) "
    "and write nothing; the same key with another body is a 409."
)

RETRY_AFTER = {
    "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds until the next request is allowed."}
}


def _error(code: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": DESCRIPTIONS[code],
        "content": {"application/json": {"schema": ERROR_REF}},
    }
    if code == "429":
        response["headers"] = RETRY_AFTER
    return response


def add_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: every API operation documents its errors."""
    for path, methods in result.get("paths", {}).items():
        if not path.startswith("/api/v1/") or path.startswith(("/api/v1/schema", "/api/v1/docs")):
            continue
        for method, operation in methods.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            codes = {"401", "403", "429"}
            parameters = operation.get("parameters", [])
            if "{" in path or any(p.get("in") == "query" and p.get("name") in {"page", "cursor"} for p in parameters):
                codes.add("404")
            if operation.get("requestBody") or any(p.get("in") == "query" for p in parameters):
                codes.add("400")
            if method in {"post", "put", "patch"}:
                codes |= {"411", "413"}
            if method == "post":
                codes.add("409")
                operation["description"] = (operation.get("description") or "") + IDEMPOTENCY_NOTE
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                existing = responses.get(code)
                if existing is None or "content" not in existing:
                    responses[code] = _error(code) | ({"description": existing["description"]} if existing else {})
                elif code == "429":
                    existing["headers"] = RETRY_AFTER
    schemas = result.get("components", {}).get("schemas", {})
    for name, component in schemas.items():
        if name.endswith("Request") and component.get("type") == "object":
            # Every request body refuses unknown fields with a 400 naming them.
            component["additionalProperties"] = False
    _message_shapes(schemas)
    _compaction_settings_shape(schemas)
    _overflow_needs_one_field(result)
    return result


def _message_shapes(schemas: dict[str, Any]) -> None:
    message = schemas.get("MessageInRequest")
    if not message:
        return
    props = message["properties"]
    props["content"] = {
        **props.get("content", {}),
        "oneOf": [
            {"type": "string", "minLength": 1},
            {
                "type": "array",
                "minItems": 1,
                "items": {"oneOf": [_block_schema(kind) for kind in BLOCK_TYPES]},
            },
        ],
    }
    props["usage"] = {**props.get("usage", {}), "type": "object", "nullable": True}


# What each block type must carry (sessions.validation.check_block refuses it otherwise) and the
# fields whose type the schema can state; the others of blocks.FIELDS are accepted as they are.
BLOCK_REQUIRED: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking",),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name", "input"),
    "tool_result": ("tool_use_id",),
    "image": ("source",),
    "document": ("source",),
}
_NONEMPTY = {"type": "string", "minLength": 1}
FIELD_SCHEMAS: dict[str, dict[str, Any]] = {
    "text": _NONEMPTY,
    "thinking": {"type": "string"},
    "signature": {"type": "string"},
    "data": _NONEMPTY,
    "id": {**_NONEMPTY, "maxLength": 255},
    "name": {**_NONEMPTY, "maxLength": 255},
    "input": {"type": "object"},
    "tool_use_id": _NONEMPTY,
    "is_error": {"type": "boolean"},
    "provenance": {
        "type": "string",
        "enum": ["person", "harness", ""],
        "description": "Text blocks only: whose words this block carries, when it differs from the message's "
        "(see the message's `provenance`).",
    },
}


def _source_schema(kind: str) -> dict[str, Any]:
    """An image's or document's `source`: one object per source type, with what that type needs."""
    allowed = SOURCE_TYPES if kind == "document" else ("base64", "url", "file")
    shapes = []
    for source_type in allowed:
        required, optional = SOURCE_KEYS[source_type]
        properties: dict[str, Any] = {"type": {"type": "string", "enum": [source_type]}}
        for key in required:
            properties[key] = {} if key == "content" else _NONEMPTY
        properties.update({key: {} for key in optional})
        shapes.append(
            {"type": "object", "required": ["type", *required], "properties": properties, "additionalProperties": False}
        )
    return {"oneOf": shapes}


def _block_schema(kind: str) -> dict[str, Any]:
    properties: dict[str, Any] = {"type": {"type": "string", "enum": [kind]}}
    for key in sorted(BLOCK_KEYS[kind] - {"type"}):
        if key == "source":
            properties[key] = _source_schema(kind)
        else:
            properties[key] = FIELD_SCHEMAS.get(key, {})
    return {
        "type": "object",
        "required": ["type", *BLOCK_REQUIRED[kind]],
        "properties": properties,
        "additionalProperties": False,
    }


def _compaction_settings_shape(schemas: dict[str, Any]) -> None:
    """The per-session overrides: known keys only, each with its type and bounds (null removes)."""
    properties: dict[str, Any] = {}
    for key, (kind, low, high) in OVERRIDABLE.items():
        schema: dict[str, Any] = {"nullable": True}
        if kind is bool:
            schema["type"] = "boolean"
        elif kind is int:
            schema["type"] = "integer"
        elif kind is float:
            schema["type"] = "number"
        else:
            schema["type"] = "string"
        if key == "compact_prompt":
            # compaction.core.prompts.validate_custom_prompt: not blank, bounded, with {conversation}.
            schema.update(
                minLength=1,
                maxLength=MAX_CUSTOM_PROMPT_CHARS,
                pattern=r"\{\s*conversation\s*\}",
                description="A summary prompt template: must contain {conversation}; other placeholders: "
                + ", ".join("{" + name + "}" for name in CUSTOM_PROMPT_PLACEHOLDERS)
                + "; {{ and }} for literal braces. null removes it (the default prompt).",
            )
        if low is not None:
            schema["minimum"] = low
        if high is not None:
            schema["maximum"] = high
        properties[key] = schema
    for name in ("SessionInRequest", "PatchedSessionInRequest"):
        field = schemas.get(name, {}).get("properties", {}).get("compaction_settings")
        if field is not None:
            field.pop("additionalProperties", None)
            field.update({"type": "object", "properties": properties, "additionalProperties": False})


def _overflow_needs_one_field(result: dict[str, Any]) -> None:
    """POST .../overflow/ needs a body with a non-empty error_text, a status_code or input_tokens."""
    for path, methods in result.get("paths", {}).items():
        if path.endswith("/overflow/") and "requestBody" in methods.get("post", {}):
            methods["post"]["requestBody"]["required"] = True
    schemas = result.get("components", {}).get("schemas", {})
    for name in ("OverflowRequest", "Overflow"):
        if name in schemas:
            schemas[name]["anyOf"] = [
                {"required": ["error_text"], "properties": {"error_text": {"type": "string", "minLength": 1}}},
                {"required": ["status_code"], "properties": {"status_code": {"type": "integer"}}},
                {"required": ["input_tokens"], "properties": {"input_tokens": {"type": "integer"}}},
            ]
