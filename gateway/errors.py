"""What the gateway's calls raise and how a stored-message problem is named in the client's terms."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

SESSION_HEADER = "x-compactor-session"


class GatewayError(Exception):
    """Answered in the calling API's own error shape (gateway.views for the Messages API,
    gateway.openai.views for OpenAI's)."""

    def __init__(
        self, status: int, error_type: str, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.param = param
        self.code = code  # OpenAI's `code` when it is more precise than the type's


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def validation_message(exc: ValidationError, offset: int) -> str:
    """'messages.7.content.0.tool_use_id: problem' with indexes of the client's whole list."""
    detail = exc.message_dict if hasattr(exc, "error_dict") else {"messages": exc.messages}
    path, problems = next(iter(detail.items()))
    if path.startswith("messages[") and "]" in path:
        index, rest = path[len("messages[") :].split("]", 1)
        if index.isdigit():
            path = f"messages[{int(index) + offset}]{rest}"
    elif path == "" or path == "messages":
        path = "messages"
    else:  # a single-message path ('content[0]...'): it is the tail's first message
        path = f"messages[{offset}].{path}"
    return f"{path}: {problems[0]}"
