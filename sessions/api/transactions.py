"""One transaction per writing API request: a request either does all its writes or none.

A request that fails half-way (a database error, a bug, a 4xx raised after a first write)
must not leave part of its work behind, e.g. an overflow event stored and a queued job
retired by a request that then answered 500. Services keep their own `atomic()` blocks;
inside this one they become savepoints, and their `on_commit` callbacks (enqueueing jobs)
run only once the whole request has committed.
"""

from __future__ import annotations

from django.db import transaction
from rest_framework.permissions import SAFE_METHODS


class AtomicWritesMixin:
    """Mix in before `APIView`: POST/PATCH/PUT/DELETE run in one transaction, rolled back when
    the answer is an error (DRF turns exceptions into responses inside `dispatch`, so the
    status code is what says the request failed)."""

    def dispatch(self, request, *args, **kwargs):
        if request.method in SAFE_METHODS:
            return super().dispatch(request, *args, **kwargs)
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)
            if response.status_code >= 400:
                transaction.set_rollback(True)
        return response
