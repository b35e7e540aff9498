"""The trash: `DELETE /api/v1/sessions/{id}/` only hides a session; restore brings it back as it
was; the purge (a management command and a daily beat task) deletes for good what has been
in the trash longer than settings.TRASH_RETENTION_DAYS.

A trashed session keeps every row (messages, compactions, events), so restore is exact. An
in-flight compaction may still finish meanwhile; the purge takes no notice of it (its rows go
with the session).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from .models import IDEMPOTENCY_TTL, IdempotentRequest, Session

logger = logging.getLogger(__name__)


def session_trash(*, session: Session, now: datetime | None = None) -> Session:
    now = now or timezone.now()
    # Conditional: trashing twice keeps the first time (the retention counts from it).
    Session.objects.filter(pk=session.pk, deleted_at__isnull=True).update(deleted_at=now)
    session.refresh_from_db(fields=["deleted_at"])
    return session


def session_restore(*, session: Session) -> Session:
    Session.objects.filter(pk=session.pk).update(deleted_at=None)
    session.refresh_from_db(fields=["deleted_at"])
    return session


def purge_at(session: Session) -> datetime | None:
    if session.deleted_at is None:
        return None
    return session.deleted_at + timedelta(days=settings.TRASH_RETENTION_DAYS)


def sessions_trashed(*, user=None) -> QuerySet[Session]:
    """The trash, newest first: one owner's (None: everyone's, for staff)."""
    qs = Session.objects.filter(deleted_at__isnull=False).select_related("owner")
    if user is not None:
        qs = qs.filter(owner=user)
    return qs.order_by("-deleted_at")


def sessions_purge(*, now: datetime | None = None, retention_days: int | None = None, dry_run: bool = False) -> int:
    """Delete, with everything they hold, the sessions trashed more than the retention ago.
    One transaction per session: a large history is not one giant transaction, and a failure
    leaves the others purged."""
    now = now or timezone.now()
    days = settings.TRASH_RETENTION_DAYS if retention_days is None else retention_days
    cutoff = now - timedelta(days=days)
    ids = list(Session.objects.filter(deleted_at__lt=cutoff).values_list("pk", flat=True))
    if dry_run:
        return len(ids)
    purged = 0
    for session_id in ids:
        with transaction.atomic():
            # Re-checked inside: a restore that came in meanwhile wins.
            session = Session.objects.select_for_update().filter(pk=session_id, deleted_at__lt=cutoff).first()
            if session is None:
                continue
            Session.objects.filter(pk=session_id).update(active_compaction=None)
            session.delete()
            purged += 1
    if purged:
        logger.info("Trash: purged %d session(s) deleted before %s", purged, cutoff.isoformat())
    return purged


def idempotency_keys_purge(*, now=None) -> int:
    """Forget Idempotency-Keys past their retention (with the hourly purge)."""
    now = now or timezone.now()
    deleted, _ = IdempotentRequest.objects.filter(created_at__lt=now - IDEMPOTENCY_TTL).delete()
    return deleted
