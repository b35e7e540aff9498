"""Search the stored history: one session's (`/sessions/{id}/search/`) or every session of the
caller (`/search/`). Owner-only like every read: another owner's session is a 404."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions import search, selectors
from sessions.search_text import MAX_QUERY_CHARS, QueryError, parse_query

from .pagination import bounded_int
from .views import error_responses

DEFAULT_LIMIT = 20


class SearchHitSerializer(serializers.Serializer):
    session = serializers.UUIDField(source="session_id", help_text="The session the message belongs to.")
    session_title = serializers.CharField()
    seq = serializers.IntegerField(help_text="The message's number in its session (read it back by seq).")
    role = serializers.ChoiceField(choices=["user", "assistant"])
    created_at = serializers.DateTimeField()
    kind = serializers.ChoiceField(
        choices=["text", "tool_call", "tool_result", "thinking"], help_text="The kind of block the match is in."
    )
    block_index = serializers.IntegerField(
        allow_null=True, help_text="Index of that block in the message's content (0 for string content)."
    )
    snippet = serializers.CharField(help_text="Text around the match, on one line, every match marked «like this».")
    highlights = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="[start, end) offsets in `snippet` of each marked text (markers excluded).",
    )
    status = serializers.ChoiceField(
        choices=search.HIT_STATUSES,
        help_text="How the served context carries this message now: verbatim; pruned (this tool output is "
        "trimmed); summarized (only the active summary stands for it); dropped (cut without a summary).",
    )
    rank = serializers.FloatField(help_text="Relevance as the database ranks it (only comparable within one answer).")


class SearchOutSerializer(serializers.Serializer):
    query = serializers.CharField()
    session = serializers.UUIDField(allow_null=True, help_text="The session searched; null for every session.")
    hits = SearchHitSerializer(many=True)
    capped = serializers.BooleanField(
        help_text="True when the search's cost bound left older messages unchecked (PostgreSQL): more messages "
        "held every word than the newest COMPACTOR_SEARCH_CANDIDATES (2,000) it ranks, or, for an identifier, "
        "more had its words in order than the newest COMPACTOR_SEARCH_SUBSTRING_CANDIDATES it reads as text. "
        "Older matches may then be missing: add a rarer word, a phrase or search one session."
    )


SEARCH_PARAMETERS = [
    OpenApiParameter(
        "q",
        {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": r"[^\W_]"},
        required=True,
        description=f"Words (prefix match), quoted phrases and identifiers with punctuation (`src/app.py`, "
        f"`spotter-fum.2`, a commit hash: substring match); every part must match. At most {MAX_QUERY_CHARS} "
        "characters, with at least one letter or digit (punctuation alone, `%` or `/`, is a 400: the index is of "
        "words). A search that runs past its time bound (COMPACTOR_SEARCH_TIMEOUT_MS) is a 400 asking for a "
        "narrower query.",
    ),
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": search.MAX_LIMIT},
        description=f"Hits to return, 1 to {search.MAX_LIMIT} (default {DEFAULT_LIMIT}).",
    ),
]


def _params(request) -> tuple[str, int]:
    q = request.query_params.get("q", "")
    raw_limit = request.query_params.get("limit")
    errors: dict[str, list[str]] = {}
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        if (value := bounded_int(raw_limit, 1, search.MAX_LIMIT)) is not None:
            limit = value
        else:
            errors["limit"] = [f"must be an integer from 1 to {search.MAX_LIMIT}"]
    try:
        parse_query(q)
    except QueryError as exc:
        errors["q"] = [str(exc)]
    if errors:
        raise ValidationError(errors)
    return q, limit


def _answer(request, q: str, limit: int, session=None) -> Response:
    try:
        result = search.history_search_result(user=request.user, q=q, session=session, limit=limit)
    except search.SearchTooCostly as exc:
        raise ValidationError({"q": [str(exc)]}) from None
    body = {"query": q, "session": session.pk if session else None, "hits": result.hits, "capped": result.capped}
    return Response(SearchOutSerializer(body).data)


class SessionSearchView(APIView):
    @extend_schema(
        operation_id="sessions_search",
        description="Search this session's whole stored history, messages a compaction summarized or pruned "
        "included; best first. Read a hit back whole with `GET .../messages/?from_seq=&to_seq=`.",
        parameters=SEARCH_PARAMETERS,
        responses={200: SearchOutSerializer, **error_responses(400, 404)},
    )
    def get(self, request, session_id):
        session = selectors.session_get(user=request.user, session_id=session_id)
        q, limit = _params(request)
        return _answer(request, q, limit, session)


class SearchView(APIView):
    @extend_schema(
        operation_id="search",
        description="Search every session of the caller (not those in the trash); best first.",
        parameters=SEARCH_PARAMETERS,
        responses={200: SearchOutSerializer, **error_responses(400)},
    )
    def get(self, request):
        q, limit = _params(request)
        return _answer(request, q, limit)
