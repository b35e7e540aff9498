"""`Idempotency-Key` on the API's writing POSTs: a retry gets the first answer, not a second write.

    @idempotent
    def post(self, request, session_id): ...

With the header, the request runs in one transaction together with the row that records its key
(unique per owner) and, once it succeeded, its answer. A retry with the same key and the same
body within IDEMPOTENCY_TTL is answered from that row (header `Idempotent-Replayed: true`) and
writes nothing; a concurrent retry waits on the key's unique index until the first commits. The
same key with a different body (or endpoint) is a 409 naming the key. An error answer stores
nothing (the request wrote nothing either), so the retry runs again. Without the header nothing
changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from sessions.models import IDEMPOTENCY_TTL, IdempotentRequest

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255


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


def _replay(row: IdempotentRequest, *, key: str, digest: str) -> Response:
    if row.request_digest != digest:
        raise IdempotencyConflict(
            f"{HEADER} {key!r} was already used for a different request ({row.method} {row.path} at "
            f"{row.created_at:%Y-%m-%d %H:%M:%S} UTC): use a new key for a new request"
        )
    headers = {REPLAYED_HEADER: "true"}
    if row.location:
        headers["Location"] = row.location
    return Response(row.response, status=row.status_code, headers=headers)


def idempotent(handler: Callable[..., Response]) -> Callable[..., Response]:
    """Decorate an APIView's `post` (after authentication, so `request.user` is the key's owner)."""

    @wraps(handler)
    def wrapper(self, request, *args, **kwargs) -> Response:
        key = _key(request)
        if key is None:
            return handler(self, request, *args, **kwargs)
        digest = request_digest(request)
        owner = request.user
        IdempotentRequest.objects.filter(owner=owner, key=key, created_at__lt=timezone.now() - IDEMPOTENCY_TTL).delete()
        with transaction.atomic():
            try:
                with transaction.atomic():
                    row = IdempotentRequest.objects.create(
                        owner=owner, key=key, method=request.method, path=request.path[:500],
                        request_digest=digest, status_code=0,
                    )  # fmt: skip
            except IntegrityError:
                return _replay(IdempotentRequest.objects.get(owner=owner, key=key), key=key, digest=digest)
            response = handler(self, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)  # the key stays free for the retry
                return response
            row.status_code = response.status_code
            row.response = json.loads(json.dumps(response.data, cls=JSONEncoder))
            row.location = str(response.get("Location", ""))[:500]
            row.save(update_fields=["status_code", "response", "location"])
        return response

    return wrapper
