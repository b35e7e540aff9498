"""URLconf for bench/api_load.py only: the project's URLs plus two floor endpoints.

The floor is what any endpoint of this service costs at the least: the same middleware, DRF
request parsing, the same API key authentication, one INSERT of the request body into a
table the bench creates (bench_floor), a small JSON answer.

The essential append is what storing an agent's message costs at the least with what Compactor
promises of every stored message, and nothing else: its exact token count (tiktoken) and its
search vector, the session's row locked, the next seq, the message row in the real table with
its indexes, the session's counters bumped, in two round trips (the locked read, then the writes
and COMMIT), written as plain SQL. No validation, tool pairing, meter or calibration, idempotency
or served-context rules: the gap between it and the real append is what those cost.
Never part of the production URLs.
"""

from __future__ import annotations

import json

from django.db import connection
from django.urls import path
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction.core import tokens as core_tokens
from project.urls import handler404, handler500  # noqa: F401
from project.urls import urlpatterns as project_urlpatterns
from sessions.search_text import index_vector
from sessions.statements import prepared


class FloorView(APIView):
    permission_classes = [IsAuthenticated]

    def post(self, request):
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO bench_floor (body, created_at) VALUES (%s, now()) RETURNING id",
                [json.dumps(request.data)],
            )
            (row_id,) = cursor.fetchone()
        return Response({"id": row_id}, status=201)


class EssentialAppendView(APIView):
    permission_classes = [IsAuthenticated]

    def post(self, request, session_id):
        message = request.data
        content = message["content"]
        tokens = core_tokens.count_content(content, core_tokens.get_tokenizer("cl100k_base"))
        vector = index_vector(content)
        with connection.cursor() as cursor:
            try:
                # Prepared once per connection, as the append's statements are (sessions.statements).
                cursor.execute("BEGIN;\n" + prepared(connection, cursor, LOCKED_READ), [session_id, request.user.pk])
                cursor.nextset()  # past the BEGIN
                (last_seq,) = cursor.fetchone()
                seq = last_seq + 1
                cursor.execute(
                    ";\n".join([*(prepared(connection, cursor, sql) for sql in WRITES), "COMMIT"]),
                    [
                        session_id,
                        seq,
                        message["role"],
                        json.dumps(content),
                        tokens,
                        vector,
                        seq,
                        tokens,
                        tokens,
                        session_id,
                    ],
                )
                (row_id,) = cursor.fetchone()
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
        return Response({"id": row_id, "seq": seq, "token_count": tokens}, status=201)


LOCKED_READ = "SELECT last_seq FROM agent_sessions_session WHERE id = %s AND owner_id = %s FOR UPDATE"
WRITES = (
    "INSERT INTO agent_sessions_message (session_id, seq, role, content, token_count, tool_use_ids,"
    " tool_result_ids, provenance, created_at, search_vector)"
    " VALUES (%s, %s, %s, %s, %s, '[]', '[]', '', now(), %s) RETURNING id",
    "UPDATE agent_sessions_session SET last_seq = %s, message_count = message_count + 1,"
    " total_message_tokens = total_message_tokens + %s, context_tokens = context_tokens + %s,"
    " last_activity_at = now(), updated_at = now() WHERE id = %s",
)


urlpatterns = [
    path("bench/floor/", FloorView.as_view()),
    path("bench/essential/<uuid:session_id>/", EssentialAppendView.as_view()),
    *project_urlpatterns,
]
