"""/openai/v1/chat/completions and /responses: authorize → parse → one service call → render.

Errors use OpenAI's shape, {"error": {"message", "type", "param", "code"}}, so the openai SDKs
and the agents built on them report them as they would OpenAI's own.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx2 as httpx
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from ..auth import authenticate
from ..errors import GatewayError
from ..intake import agent_name, not_configured, read_request, session_header
from ..resent import Parsed
from ..views import bodiless_on_head, render, root
from . import chat, responses, upstream

# The gateway's error kinds (the Messages API's names) as OpenAI's type and code.
_OPENAI_ERRORS = {
    "authentication_error": ("invalid_request_error", "invalid_api_key"),
    "not_found_error": ("invalid_request_error", "not_found"),
    "request_too_large": ("invalid_request_error", "request_too_large"),
    "api_error": ("server_error", None),
}


def openai_error(
    status: int, error_type: str, message: str, param: str | None = None, code: str | None = None
) -> JsonResponse:
    kind, default_code = _OPENAI_ERRORS.get(error_type, (error_type, None))
    code = code or default_code
    return JsonResponse({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=status)


def _parse(request: HttpRequest, items: str) -> tuple[Any, Parsed, str | None, bytes | None]:
    user, parsed, raw = read_request(
        request,
        upstream_key=settings.OPENAI_GATEWAY_UPSTREAM_API_KEY,
        key_variables=upstream.KEY_VARIABLES,
        items=items,
    )
    return user, parsed, session_header(request), raw


@csrf_exempt
def chat_completions_view(request: HttpRequest) -> HttpResponse:
    try:
        user, parsed, session_id, raw = _parse(request, "messages")
        result = chat.openai_chat_call(
            user=user,
            body=parsed.body,
            resent=parsed,
            raw=raw,
            session_id=session_id,
            headers=upstream.request_headers(request),
            agent=agent_name(request),
        )
    except GatewayError as exc:
        return openai_error(exc.status, exc.error_type, exc.message, exc.param, exc.code)
    return render(result)


@csrf_exempt
def responses_view(request: HttpRequest) -> HttpResponse:
    try:
        user, parsed, session_id, raw = _parse(request, "input")
        result = responses.openai_responses_call(
            user=user,
            body=parsed.body,
            resent=parsed,
            raw=raw,
            session_id=session_id,
            headers=upstream.request_headers(request),
            agent=agent_name(request),
        )
    except GatewayError as exc:
        return openai_error(exc.status, exc.error_type, exc.message, exc.param, exc.code)
    return render(result)


def models_view(request: HttpRequest, model: str = "") -> HttpResponse:
    """GET /openai/v1/models[/<id>]: the upstream's model list, which some agents read at start-up."""
    if request.method != "GET":
        return openai_error(405, "invalid_request_error", f"{request.method} is not allowed here; use GET")
    try:
        authenticate(request)
    except exceptions.AuthenticationFailed as exc:
        return openai_error(401, "authentication_error", str(exc.detail))
    if not settings.OPENAI_GATEWAY_UPSTREAM_API_KEY:
        missing = not_configured(upstream.KEY_VARIABLES)
        return openai_error(missing.status, missing.error_type, missing.message, code=missing.code)
    path = f"/models/{quote(model, safe='')}" if model else "/models"
    try:
        response = upstream.get(path=path, headers=upstream.request_headers(request))
    except httpx.HTTPError as exc:
        return openai_error(
            502,
            "api_error",
            f"upstream OpenAI API unreachable ({type(exc).__name__}): check COMPACTOR_OPENAI_UPSTREAM_URL",
        )
    answer = HttpResponse(response.content, status=response.status_code)
    for name, value in upstream.response_headers(response).items():
        answer[name] = value
    return answer


@csrf_exempt
def root_view(request: HttpRequest) -> HttpResponse:
    return root(request, "openai", ["/v1/chat/completions", "/v1/responses", "/v1/models"])


@csrf_exempt
def not_found_view(request: HttpRequest) -> HttpResponse:
    response = openai_error(
        404,
        "not_found_error",
        f"the gateway serves /openai/v1/chat/completions, /openai/v1/responses and /openai/v1/models, "
        f"not {request.path}",
    )
    return bodiless_on_head(request, response)
