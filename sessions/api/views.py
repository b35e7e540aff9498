"""Agents' REST API v1: authorize → parse → one service call → render.

Every session lookup is scoped to request.user, so another owner's session is a 404.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction import services as compaction_services
from compaction.core.blocks import TOOL_RESULT, TOOL_USE
from sessions import selectors, services, trash
from sessions.breakdown import session_context_breakdown
from sessions.models import Session

from . import serializers as s
from .idempotency import idempotent
from .pagination import MAX_INT32, StrictCursorPagination, StrictPageNumberPagination, bounded_int
from .renderers import TranscriptJSONRenderer
from .transactions import AtomicWritesMixin

ERROR_DESCRIPTIONS = {
    400: "Bad input: `error` names the first field path and its problem; `detail` maps every bad field path "
    "to its problems. Nothing was stored.",
    401: "No API key, or an invalid, revoked or expired one.",
    403: "Authenticated by the dashboard's login session without a valid CSRF token.",
    404: "No such session for this caller (another owner's session is also a 404): "
    '`{"error": "session <id> not found"}`.',
    413: "Body larger than COMPACTOR_MAX_REQUEST_BYTES; `detail` has the size and the limit.",
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """@extend_schema `responses` entries for these error codes (always with 401 and 403), all
    with the {"error", "detail"} body."""
    return {
        code: OpenApiResponse(response=s.ErrorSerializer, description=ERROR_DESCRIPTIONS[code])
        for code in sorted({*codes, 401, 403})
    }


def _job(job) -> dict | None:
    return s.CompactionJobSerializer(job).data if job is not None else None


class SessionPagination(StrictPageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class MessageCursorPagination(StrictCursorPagination):
    """Opaque cursors over seq: stable while new messages are appended."""

    ordering = "seq"
    position_is_int = True
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000


class SessionListView(AtomicWritesMixin, APIView):
    pagination_class = SessionPagination

    @extend_schema(
        operation_id="sessions_list",
        parameters=[
            OpenApiParameter("agent", str, description="Only sessions of this agent."),
            OpenApiParameter("model", str, description="Only sessions of this model."),
            OpenApiParameter("search", str, description="Title contains (case-insensitive)."),
            OpenApiParameter(
                "id_prefix",
                str,
                pattern=selectors.ID_PREFIX_PATTERN,
                allow_blank=False,
                description="Only sessions whose id starts with this (at least 8 hex digits, as the dashboard "
                "shows ids): how a client resolves a short id, and sees when one is ambiguous.",
            ),
            OpenApiParameter(
                "one_off",
                bool,
                description="true: only lone gateway calls no conversation continued (left out otherwise).",
            ),
        ],
        responses={200: s.SessionOutSerializer(many=True), **error_responses(400)},
    )
    def get(self, request):
        filters = {name: request.query_params.get(name) for name in ("agent", "model", "search")}
        for name, value in filters.items():
            if value and "\x00" in value:
                raise ValidationError({name: ["must not contain the NUL character"]})
        one_off = request.query_params.get("one_off", "false").lower()
        if one_off not in ("true", "false", "1", "0"):
            raise ValidationError({"one_off": ["must be true or false"]})
        qs = selectors.session_list(user=request.user, one_off=one_off in ("true", "1"), **filters)
        prefix = request.query_params.get("id_prefix")
        if prefix is not None:
            problem = selectors.id_prefix_problem(prefix)
            if problem:
                raise ValidationError({"id_prefix": [problem]})
            qs = qs.filter(selectors.id_prefix_q(prefix))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(s.SessionOutSerializer(page, many=True).data)

    @extend_schema(
        operation_id="sessions_create",
        request=s.SessionInSerializer,
        responses={201: s.SessionOutSerializer, **error_responses(400, 413)},
    )
    @idempotent
    def post(self, request):
        data = s.SessionInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        session = services.session_create(owner=request.user, **data.validated_data)
        return Response(s.SessionOutSerializer(session).data, status=status.HTTP_201_CREATED)


class SessionDetailView(AtomicWritesMixin, APIView):
    @extend_schema(operation_id="sessions_retrieve", responses={200: s.SessionOutSerializer, **error_responses(404)})
    def get(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        return Response(s.SessionOutSerializer(session).data)

    @extend_schema(
        operation_id="sessions_partial_update",
        request=s.SessionInSerializer,
        responses={200: s.SessionOutSerializer, **error_responses(400, 404, 413)},
    )
    def patch(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        # The session as GET shows it: read-only fields may only be sent back unchanged.
        data = s.SessionInSerializer(
            data=request.data, partial=True, context={"current": s.SessionOutSerializer(session).data}
        )
        data.is_valid(raise_exception=True)
        session = services.session_update(session=session, **data.validated_data)
        return Response(s.SessionOutSerializer(session).data)

    @extend_schema(
        operation_id="sessions_destroy",
        description="Moves the session to the trash: it disappears from the API and the dashboard's lists, "
        "and every message is kept. `POST .../restore/` brings it back; after COMPACTOR_TRASH_RETENTION_DAYS "
        "(default 30) it is purged for good.",
        responses={204: None, **error_responses(404)},
    )
    def delete(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        services.session_delete(session=session)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionRestoreView(AtomicWritesMixin, APIView):
    @extend_schema(
        operation_id="sessions_restore",
        description="Takes a session out of the trash, exactly as it was. 404 when the session is not in the "
        "caller's trash (never deleted, another owner's, or already purged).",
        request=None,
        responses={200: s.SessionOutSerializer, **error_responses(404)},
    )
    @idempotent
    def post(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id, trashed=True)
        session = trash.session_restore(session=session)
        return Response(s.SessionOutSerializer(session).data)


APPEND_EXAMPLES = [
    OpenApiExample("One message", value={"role": "user", "content": "List the files in src/."}, request_only=True),
    OpenApiExample(
        "A tool exchange (batch)",
        request_only=True,
        value={
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Listing src/."},
                        {"type": TOOL_USE, "id": "toolu_01", "name": "Bash", "input": {"command": "ls src"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": TOOL_RESULT, "tool_use_id": "toolu_01", "content": "main.py\nutil.py"}],
                },
            ]
        },
    ),
]


class SideCallPagination(StrictPageNumberPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500


class SideCallListView(APIView):
    pagination_class = SideCallPagination

    @extend_schema(
        operation_id="side_calls_list",
        description="Calls the agent made beside this session's conversation (through the gateway: Claude Code's "
        "title, topic and command checks), newest first, with the usage each reported. They are answered as "
        "they came and are not part of the session's messages or context.",
        responses={200: s.SideCallOutSerializer(many=True), **error_responses(404)},
    )
    def get(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.side_call_list(session=session), request, view=self)
        return paginator.get_paginated_response(s.SideCallOutSerializer(page, many=True).data)


SEQ_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}


def seq_range(params) -> dict[str, int | None]:
    """`from_seq` / `to_seq` query parameters: message numbers, or a 400 naming the bad one (also a
    `to_seq` below `from_seq`)."""
    bounds: dict[str, int | None] = {}
    errors: dict[str, list[str]] = {}
    for name in ("from_seq", "to_seq"):
        raw = params.get(name)
        if raw is None or raw == "":
            bounds[name] = None
        elif (value := bounded_int(raw, 1, MAX_INT32)) is not None:
            bounds[name] = value
        else:
            errors[name] = ["must be a message number (an integer from 1)"]
    if errors:
        raise ValidationError(errors)
    low, high = bounds["from_seq"], bounds["to_seq"]
    if low is not None and high is not None and high < low:
        raise ValidationError(
            {"to_seq": [f"must not be below from_seq ({high} < {low}): the range is both ends included"]}
        )
    return bounds


class MessageListView(APIView):
    """GET the history; POST appends. Not in one request transaction (AtomicWritesMixin): the
    POST is one service call that commits on its own, the append's transaction first, then the
    auto-compaction decision after that commit and outside the session's row lock.
    Wrapped in the request's transaction, every append paid a savepoint's two round trips and
    held the row lock through the decision."""

    pagination_class = MessageCursorPagination
    renderer_classes = [TranscriptJSONRenderer]

    @extend_schema(
        operation_id="messages_list",
        description="Full history in seq order, cursor-paginated (`?limit=`); compaction never changes it. "
        "`from_seq`/`to_seq` read back a range verbatim (both ends included), widened so tool calls and their "
        "results come whole.",
        parameters=[
            OpenApiParameter("from_seq", SEQ_SCHEMA, description="First message number (default 1)."),
            OpenApiParameter("to_seq", SEQ_SCHEMA, description="Last message number (default: the last)."),
        ],
        responses={200: s.MessageOutSerializer(many=True), **error_responses(400, 404)},
    )
    def get(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        bounds = seq_range(request.query_params)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.message_list(session=session, **bounds), request, view=self)
        return paginator.get_paginated_response([s.message_out(message) for message in page])

    @extend_schema(
        operation_id="messages_append",
        description=(
            "Append one message (`{role, content}`) or a batch (`{messages: [...]}`), all or nothing. "
            "Each message gets the next seq and a token count. A tool_result must answer an earlier tool_use "
            "of this session (earlier in the same batch counts); tool_use ids are unique per session. "
            "Bad input is a 400 naming the field path, and nothing is stored."
        ),
        request=PolymorphicProxySerializer(
            component_name="AppendRequest",
            serializers=[s.MessageInSerializer, s.MessageBatchInSerializer],
            resource_type_field_name=None,
        ),
        examples=APPEND_EXAMPLES,
        responses={201: s.AppendOutSerializer, **error_responses(400, 404, 413)},
    )
    @idempotent
    def post(self, request, session_id):
        # No separate session lookup: the append reads the session once, locked and scoped to
        # the caller (another owner's session is Session.DoesNotExist, a 404 like a missing one).
        body = request.data
        if not isinstance(body, dict):
            selectors.session_get(user=request.user, session_id=session_id)  # 404 before 400
            raise ValidationError({"body": ['must be a message object or {"messages": [...]}']})
        if "messages" in body:
            extra = sorted(set(body) - {"messages"})
            if extra:
                selectors.session_get(user=request.user, session_id=session_id)
                raise ValidationError({name: ["unknown field next to 'messages'"] for name in extra})
            messages, single = body["messages"], False
        else:
            messages, single = [body], True
        try:
            result = compaction_services.messages_append_then_compact(
                session=session_id, owner=request.user, messages=messages, single=single
            )
        except Session.DoesNotExist:
            raise Http404(selectors.session_not_found(session_id)) from None
        return Response(
            {
                "messages": [s.message_out(message) for message in result.messages],
                "usage": result.usage.as_dict(),
                "compaction": _job(result.compaction),
            },
            status=status.HTTP_201_CREATED,
        )


class ContextView(APIView):
    renderer_classes = [TranscriptJSONRenderer]

    @extend_schema(
        operation_id="context_retrieve",
        description=(
            "The LLM-ready history: `system`, then `messages` to send as is (the active summary as a user "
            "message, then every message from the active compaction's first_kept_seq on, old tool outputs "
            "pruned when the compaction pruned them), with the token figures."
        ),
        responses={200: s.ContextOutSerializer, **error_responses(404)},
    )
    def get(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        # ContextView.as_dict() is already the documented shape (ContextOutSerializer, which
        # tests/api/test_context.py holds equal to it): agents GET this before every model
        # call, and walking it through the serializer cost as much as encoding it.
        return Response(selectors.context_build(session=session).as_dict())


class ContextBreakdownView(APIView):
    @extend_schema(
        operation_id="context_breakdown_retrieve",
        description=(
            "What the served context is made of, like Claude Code's /context: system prompt, the agent's fixed "
            "part (tool definitions, its own prompt: inferred from provider usage reports), the summary and the "
            "kept messages on the meter's scale, adding up to `tokens`; then free space up to the auto-compact "
            "trigger and the reserve above it, adding up to the window. With the last provider report beside "
            "Compactor's estimate, and what an active prune saves. Reads no message content."
        ),
        responses={200: s.ContextBreakdownOutSerializer, **error_responses(404)},
    )
    def get(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        return Response(s.ContextBreakdownOutSerializer(session_context_breakdown(session=session)).data)


class UsageView(AtomicWritesMixin, APIView):
    @extend_schema(
        operation_id="usage_report",
        description=(
            "Report the provider's usage for the last model call. The prompt size (input + cache read + "
            "cache write) calibrates the hybrid estimate. stop_reason `max_tokens` drops the reply's "
            "truncated trailing tool_use blocks from the served context."
        ),
        request=s.UsageInSerializer,
        examples=[
            OpenApiExample(
                "Anthropic usage",
                request_only=True,
                value={
                    "input_tokens": 1200,
                    "output_tokens": 310,
                    "cache_read_input_tokens": 45000,
                    "cache_creation_input_tokens": 800,
                    "stop_reason": "tool_use",
                    "model": "claude-sonnet-4-5",
                },
            )
        ],
        responses={200: s.UsageReportOutSerializer, **error_responses(400, 404, 413)},
    )
    @idempotent
    def post(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        data = s.UsageInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = compaction_services.usage_report_then_compact(session=session, **data.validated_data)
        return Response(
            {
                "usage": result.usage.as_dict(),
                "message_seq": result.message_seq,
                "dropped_tool_use_ids": result.dropped_tool_use_ids,
                "compaction": _job(result.compaction),
            }
        )
