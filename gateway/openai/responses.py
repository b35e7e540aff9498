from __future__ import annotations

from ..errors import GatewayError


def openai_responses_call(**kwargs):
    raise GatewayError(501, "api_error", "not yet")
