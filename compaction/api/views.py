"""Compaction API: authorize (owner-scoped lookup) → parse → one service call → render."""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import transaction
from drf_spectacular.utils import (
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction import selectors, services
from compaction.models import IN_FLIGHT, QUEUED_HINT_AFTER_SECONDS, Compaction, Status
from sessions import selectors as session_selectors
from sessions.api.idempotency import idempotent
from sessions.api.pagination import StrictCursorPagination
from sessions.api.transactions import AtomicWritesMixin

from .serializers import (
    CompactionRequestedSerializer,
    CompactionRequestSerializer,
    CompactionSerializer,
    DryRunSerializer,
    EventQuerySerializer,
    EventSerializer,
    NotCompactedSerializer,
    OverflowResultSerializer,
    OverflowSerializer,
)

POLL_INTERVAL = 0.2
# A wait at least this long that ends with the job still queued gets the no-worker hint.
WAIT_HINT_MIN_SECONDS = 5


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "conflict"
    default_code = "conflict"


def _conflict(exc: services.CompactionError) -> APIException:
    if exc.code == "invalid":
        return ValidationError({exc.field or "non_field_errors": [str(exc)]})
    return Conflict({exc.field or "detail": str(exc)})


def _job(job: Compaction, session) -> dict:
    return CompactionSerializer(job, context={"active_compaction_id": session.active_compaction_id}).data


class _Waiters:
    """How many requests of this process are inside a `wait` (each holds a web thread): at most
    COMPACTOR_MAX_WAITERS, so long-polls cannot take every thread of a web process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def enter(self) -> bool:
        with self._lock:
            if self.count >= settings.COMPACTION_MAX_WAITERS:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.count -= 1


WAITERS = _Waiters()


def _wait_for(job: Compaction, seconds: float) -> Compaction | None:
    """Poll the row (the worker is another process) until it is finished or time is up.
    None when this process already has its maximum of waiting requests (nothing was waited)."""
    if not WAITERS.enter():
        return None
    try:
        deadline = time.monotonic() + seconds
        while job.status in IN_FLIGHT and time.monotonic() < deadline:
            time.sleep(min(POLL_INTERVAL, max(0.0, deadline - time.monotonic())))
            job = Compaction.objects.get(pk=job.pk)
        return job
    finally:
        WAITERS.leave()


class HistoryPagination(StrictCursorPagination):
    ordering = "-created_at"
    page_size = 20
    max_page_size = 100
    page_size_query_param = "page_size"


class CompactionListCreateView(APIView):
    pagination_class = HistoryPagination  # also what the schema documents for GET

    @extend_schema(
        summary="Compaction history of a session (newest first)",
        responses=CompactionSerializer(many=True),
        tags=["compactions"],
    )
    def get(self, request: Request, session_id) -> Response:
        session = session_selectors.session_get(user=request.user, session_id=session_id)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(selectors.compaction_list(session=session), request, view=self)
        data = CompactionSerializer(
            page, many=True, context={"active_compaction_id": session.active_compaction_id}
        ).data
        return paginator.get_paginated_response(data)

    @extend_schema(
        summary="Compact now (manual), or preview with dry_run",
        request=CompactionRequestSerializer,
        responses={
            202: OpenApiResponse(CompactionRequestedSerializer, description="Queued (or the job already in flight)."),
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="CompactionOutcome",
                    serializers=[CompactionRequestedSerializer, NotCompactedSerializer, DryRunSerializer],
                    resource_type_field_name=None,
                ),
                description="The finished job (with wait), {compacted: false, reason, job}, or a dry run.",
            ),
            400: OpenApiResponse(description="Invalid field"),
        },
        tags=["compactions"],
    )
    @idempotent(atomic=False)  # `wait` polls for the job, which is enqueued on commit
    def post(self, request: Request, session_id) -> Response:
        session = session_selectors.session_get(user=request.user, session_id=session_id)
        params = CompactionRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        if data["dry_run"]:
            result = services.compaction_dry_run(
                session=session,
                strategy=data["strategy"],
                instructions=data["instructions"],
                overrides=data["overrides"],
                force=data["force"],
            )
            return Response(result, status=status.HTTP_200_OK)
        try:
            # Its own transaction (not AtomicWritesMixin's, which would span `wait`): committed
            # before the wait polls, because the job is enqueued on commit.
            with transaction.atomic():
                job = services.compaction_request(
                    session=session,
                    reason="manual",
                    requested_by=request.user,
                    strategy=data["strategy"],
                    instructions=data["instructions"],
                    overrides=data["overrides"],
                    force=data["force"],
                )
        except services.CompactionError as exc:
            raise _conflict(exc) from None
        created = job.created
        wait_skipped = False
        if data["wait"]:
            waited = _wait_for(job, data["wait"])
            wait_skipped = waited is None
            job = waited or job
        session.refresh_from_db(fields=["active_compaction"])
        body = _job(job, session)
        body["already_in_flight"] = not created
        body["wait_skipped"] = wait_skipped
        body["wait_capped"] = data["wait_capped"]
        body["detail"] = _wait_detail(job, data, wait_skipped, poll=f"{request.path}{job.pk}/") or body["detail"]
        headers = {"Location": f"{request.path}{job.pk}/"}
        if job.status in IN_FLIGHT:
            return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)
        if job.status == Status.SKIPPED:
            return Response(
                {"compacted": False, "reason": job.detail, "job": body}, status=status.HTTP_200_OK, headers=headers
            )
        return Response(body, status=status.HTTP_200_OK, headers=headers)


class CompactionDetailView(APIView):
    @extend_schema(summary="One compaction (poll it for status)", responses=CompactionSerializer, tags=["compactions"])
    def get(self, request: Request, session_id, compaction_id) -> Response:
        session = session_selectors.session_get(user=request.user, session_id=session_id)
        job = selectors.compaction_get(session=session, compaction_id=compaction_id)
        return Response(_job(job, session))


class CompactionRevertView(AtomicWritesMixin, APIView):
    @extend_schema(
        summary="Undo: reactivate the compaction this one was based on",
        request=None,
        responses={
            200: inline_serializer(
                "RevertResult",
                {
                    "reverted": CompactionSerializer(),
                    "active_compaction": serializers.UUIDField(allow_null=True),
                    "message": serializers.CharField(),
                },
            ),
            409: OpenApiResponse(description="Not the active compaction"),
        },
        tags=["compactions"],
    )
    @idempotent
    def post(self, request: Request, session_id, compaction_id) -> Response:
        session = session_selectors.session_get(user=request.user, session_id=session_id)
        job = selectors.compaction_get(session=session, compaction_id=compaction_id)
        try:
            previous = services.compaction_revert(compaction=job, user=request.user)
        except services.CompactionError as exc:
            raise _conflict(exc) from None
        session.refresh_from_db(fields=["active_compaction"])
        target = f"compaction {previous.pk}" if previous else "the full history"
        return Response(
            {
                "reverted": _job(job, session),
                "active_compaction": str(previous.pk) if previous else None,
                "message": f"Compaction undone: the context is served from {target} again",
            }
        )


class OverflowView(APIView):
    """Not an AtomicWritesMixin view: the emergency summary must not run inside an open
    transaction (services.compaction_overflow writes everything in one transaction after it)."""

    @extend_schema(
        summary="Report a provider error; if it is a context overflow, compact at once and get the new context",
        request=OverflowSerializer,
        responses=OverflowResultSerializer,
        tags=["compactions"],
    )
    @idempotent
    def post(self, request: Request, session_id) -> Response:
        session = session_selectors.session_get(user=request.user, session_id=session_id)
        params = OverflowSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        result = services.compaction_overflow(
            session=session,
            error_text=data.get("error_text"),
            status_code=data.get("status_code"),
            input_tokens=data.get("input_tokens"),
        )
        if result.get("compaction") is not None:
            session.refresh_from_db(fields=["active_compaction"])
            result["compaction"] = _job(result["compaction"], session)
        return Response(result)


class EventListView(APIView):
    @extend_schema(
        summary="Session events after an id (compaction queued/started/finished/failed, overflow, undo)",
        parameters=[EventQuerySerializer],
        responses=inline_serializer(
            "EventPage",
            {
                "events": EventSerializer(many=True),
                "last_id": serializers.IntegerField(),
            },
        ),
        tags=["events"],
    )
    def get(self, request: Request, session_id) -> Response:
        session = session_selectors.session_get(user=request.user, session_id=session_id)
        query = EventQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        after = query.validated_data["after"]
        events = selectors.event_list_after(session=session, after=after, limit=query.validated_data["limit"])
        return Response(
            {
                "events": EventSerializer(events, many=True).data,
                "last_id": events[-1].pk if events else after,
            }
        )


def _wait_detail(job, data, wait_skipped: bool, poll: str) -> str | None:
    """What a caller who asked to wait should know about the wait, or None."""
    if data["wait_capped"] and job.status in IN_FLIGHT and not wait_skipped:
        return (
            f"waited {data['wait']:g} s, the most a request may (COMPACTOR_MAX_WAIT_SECONDS); the job is still "
            f"{job.status}: poll {poll}"
        )
    if wait_skipped:
        return (
            f"not waited: {settings.COMPACTION_MAX_WAITERS} requests are already waiting in this web process "
            f"(COMPACTOR_MAX_WAITERS); poll {poll} instead"
        )
    if data["wait"] >= WAIT_HINT_MIN_SECONDS and job.status == Status.QUEUED:
        # The caller waited and no worker even picked the job up: say why it may be stuck
        # now rather than only once it is QUEUED_HINT_AFTER_SECONDS old.
        return job.queued_hint(after=min(data["wait"], QUEUED_HINT_AFTER_SECONDS))
    return None
