"""POST /api/v1/imports/: upload a transcript file; it becomes a session (authorize → parse → one service call)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction import importing
from compaction.core.transcripts import FORMATS
from sessions.api.idempotency import idempotent
from sessions.api.serializers import ErrorSerializer, SessionOutSerializer
from sessions.api.strict import ListedChoiceField, RejectUnknownFieldsMixin


class ImportRequestSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True,
        help_text="The transcript: Claude Code, pi or Codex CLI JSONL, SWE-agent .traj, Anthropic Messages or OpenAI chat JSON.",
    )
    format = ListedChoiceField(
        choices=FORMATS, required=False, help_text="Skip detection and read the file as this format."
    )
    title = serializers.CharField(
        max_length=200, required=False, allow_blank=True, help_text="Default: the transcript's own."
    )
    replay = serializers.BooleanField(
        default=False,
        help_text="Append message by message (auto-compaction fires as it would live; the jobs are queued for "
        "the workers) instead of loading in bulk with the agent's own compactions.",
    )


ImportResultSerializer = inline_serializer(
    name="ImportResult",
    fields={
        "session": SessionOutSerializer(),
        "messages": serializers.IntegerField(help_text="Messages stored."),
        "format": serializers.ChoiceField(choices=FORMATS, help_text="The format detected (or given)."),
        "report": inline_serializer(
            name="ImportReport",
            fields={
                "messages": serializers.IntegerField(),
                "tool_calls": serializers.IntegerField(),
                "compactions": serializers.IntegerField(),
                "usage_reports": serializers.IntegerField(),
                "queued_messages": serializers.IntegerField(),
                "strings_with_unstorable_characters": serializers.IntegerField(
                    help_text="Strings holding U+0000 or an unpaired surrogate, stored with ␀ / U+FFFD instead."
                ),
                "skipped": serializers.DictField(
                    child=serializers.IntegerField(), help_text="What was left out, by reason."
                ),
                "subagents": serializers.ListField(child=serializers.DictField()),
                "subagents_not_imported": serializers.ListField(child=serializers.DictField()),
                "blocks_not_stored": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Image and document blocks the provider refuses (bad base64, data not of its media "
                    "type, too large, a URL not https): {message (1-based), block (its path), problem}. Each is "
                    "stored as a text block saying so, not as the block.",
                ),
            },
        ),
    },
)


class ImportTooSlow(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "import_over_budget"


class ImportView(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="imports_create",
        summary="Import a transcript as a session",
        description="Upload another agent's transcript (multipart field `file`). The format is detected unless "
        "`format` is given. A file that is not a transcript is a 400 naming the line and the reason, and nothing "
        "is stored. The request size limit (COMPACTOR_MAX_REQUEST_BYTES) applies: 413 above it.",
        request={"multipart/form-data": ImportRequestSerializer},
        responses={
            201: ImportResultSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Not a transcript (the line and why), or a bad field."),
            401: OpenApiResponse(ErrorSerializer, description="No or bad credentials."),
            403: OpenApiResponse(ErrorSerializer, description="Dashboard session without a CSRF token."),
            413: OpenApiResponse(ErrorSerializer, description="Body larger than COMPACTOR_MAX_REQUEST_BYTES."),
            422: OpenApiResponse(
                ErrorSerializer, description="The import ran past COMPACTOR_IMPORT_TIME_BUDGET; nothing was stored."
            ),
        },
    )
    @idempotent(atomic=False)  # a replay commits message by message and queues jobs as it goes
    def post(self, request: Request) -> Response:
        data = ImportRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            report = importing.transcript_import_upload(
                owner=request.user,
                upload=data.validated_data["file"],
                format=data.validated_data.get("format"),
                title=data.validated_data.get("title") or None,
                replay=data.validated_data["replay"],
            )
        except importing.ImportOverBudget as exc:
            raise ImportTooSlow({exc.field: [exc.problem]}) from exc
        except importing.TranscriptImportError as exc:
            raise ValidationError({exc.field: [exc.problem]}) from exc
        return Response(
            {
                "session": SessionOutSerializer(report.session).data,
                "messages": report.messages,
                "format": report.format,
                "report": report.as_dict(),
            },
            status=status.HTTP_201_CREATED,
        )
