"""`Idempotency-Key` on the API's writing POSTs: a retry gets the first answer, not a second write.

    @idempotent
    def post(self, request, session_id): ...

With the header, the request runs in one transaction together with the row that records its key
(unique per owner) and, once it succeeded, its answer. A retry with the same key and the same
body within IDEMPOTENCY_TTL is answered from that row (header `Idempotent-Replayed: true`) and
writes nothing; a concurrent retry waits on the key's unique index until the first commits. The
same key with a different body (or endpoint) is a 409 naming the key. An error answer stores
nothing (the request wrote nothing either), so the retry runs again. Without the header nothing
changes. `@idempotent(atomic=False)`: for a handler that must commit before it answers (it waits
on a job it queued), the key is claimed first (see _claim_first).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from sessions.models import IDEMPOTENCY_TTL, IdempotentRequest

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
# The status of a key whose request has not answered yet.
IN_PROGRESS = 0
# A claim still in progress after this was left by a process that died mid-request.
IN_PROGRESS_STALE = timedelta(minutes=10)


class IdempotencyConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "idempotency_key_reused"


def _key(request) -> str | None:
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    key = raw.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise ValidationError({HEADER: [f"must be 1 to {MAX_KEY_LENGTH} printable ASCII characters (e.g. a UUID)"]})
    return key


def _canonical(value: Any) -> Any:
    """The body as data (key order and JSON spacing do not matter); uploaded files by content."""
    if isinstance(value, UploadedFile):
        file_hash = hashlib.sha256()
        for chunk in value.chunks():
            file_hash.update(chunk)
        value.seek(0)
        return {"file": file_hash.hexdigest(), "name": value.name}
    if hasattr(value, "lists"):  # QueryDict / MultiValueDict (multipart form fields)
        return {k: [_canonical(v) for v in vs] for k, vs in sorted(value.lists())}
    return value


def request_digest(request) -> str:
    body = _canonical(request.data)
    text = json.dumps([request.method, request.path, body], sort_keys=True, ensure_ascii=False, cls=JSONEncoder)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _replay(row: IdempotentRequest | None, *, key: str, digest: str) -> Response:
    if row is None:  # expired and purged between the two queries: the retry starts afresh
        raise IdempotencyConflict(f"{HEADER} {key!r} was just released; retry the request")
    if row.request_digest != digest:
        raise IdempotencyConflict(
            f"{HEADER} {key!r} was already used for a different request ({row.method} {row.path} at "
            f"{row.created_at:%Y-%m-%d %H:%M:%S} UTC): use a new key for a new request"
        )
    if row.status_code == IN_PROGRESS:
        raise IdempotencyConflict(
            f"a request with {HEADER} {key!r} is still being processed; retry it once that one has answered"
        )
    headers = {REPLAYED_HEADER: "true"}
    if row.location:
        headers["Location"] = row.location
    return Response(row.response, status=row.status_code, headers=headers)


def _record(row: IdempotentRequest, response: Response) -> None:
    row.status_code = response.status_code
    row.response = json.loads(json.dumps(response.data, cls=JSONEncoder))
    row.location = str(response.get("Location", ""))[:500]
    row.save(update_fields=["status_code", "response", "location"])


def _claim(request, *, key: str, digest: str) -> IdempotentRequest | None:
    """The new row for this key (status IN_PROGRESS), or None when the key is taken."""
    try:
        with transaction.atomic():
            return IdempotentRequest.objects.create(
                owner=request.user, key=key, method=request.method, path=request.path[:500],
                request_digest=digest, status_code=IN_PROGRESS,
            )  # fmt: skip
    except IntegrityError:
        return None


def _forget_expired(request, key: str) -> None:
    now = timezone.now()
    IdempotentRequest.objects.filter(owner=request.user, key=key).filter(
        Q(created_at__lt=now - IDEMPOTENCY_TTL) | Q(status_code=IN_PROGRESS, created_at__lt=now - IN_PROGRESS_STALE)
    ).delete()


def _one_transaction(handler, self, request, args, kwargs, *, key: str, digest: str) -> Response:
    """The key's row and the request's writes commit together: a stored write always has its
    answer recorded, and a concurrent retry waits on the key's unique index for the outcome."""
    with transaction.atomic():
        row = _claim(request, key=key, digest=digest)
        if row is None:
            return _replay(
                IdempotentRequest.objects.filter(owner=request.user, key=key).first(), key=key, digest=digest
            )
        response = handler(self, request, *args, **kwargs)
        if not 200 <= response.status_code < 300:
            transaction.set_rollback(True)  # the key stays free for the retry
            return response
        _record(row, response)
    return response


def _claim_first(handler, self, request, args, kwargs, *, key: str, digest: str) -> Response:
    """For a request whose own commits must be visible while it runs (a job it waits for, a
    replayed import): the key is claimed and committed first, the answer recorded after. A retry
    meanwhile is a 409 "still being processed"; a claim left by a process that died mid-request
    is released after IN_PROGRESS_STALE."""
    row = _claim(request, key=key, digest=digest)
    if row is None:
        return _replay(IdempotentRequest.objects.filter(owner=request.user, key=key).first(), key=key, digest=digest)
    try:
        response = handler(self, request, *args, **kwargs)
    except BaseException:
        row.delete()
        raise
    if 200 <= response.status_code < 300:
        _record(row, response)
    else:
        row.delete()
    return response


def idempotent(handler=None, *, atomic: bool = True):
    """Decorate an APIView's `post` (it runs after authentication: `request.user` is the key's
    owner). `atomic=False` for a handler that commits and then waits on its own commits."""

    def decorate(handler: Callable[..., Response]) -> Callable[..., Response]:
        run = _one_transaction if atomic else _claim_first

        @wraps(handler)
        def wrapper(self, request, *args, **kwargs) -> Response:
            key = _key(request)
            if key is None:
                return handler(self, request, *args, **kwargs)
            digest = request_digest(request)
            _forget_expired(request, key)
            return run(handler, self, request, args, kwargs, key=key, digest=digest)

        return wrapper

    return decorate(handler) if handler is not None else decorate
