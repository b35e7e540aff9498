from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker said it was alive (ops.heartbeat writes it every few seconds).

    Readiness (/readyz) and the heartbeat-age metric read the freshest row: a worker that died,
    even by SIGKILL, stops writing, so its age only grows. One row per worker name; a restarted
    worker takes its row over.
    """

    worker = models.CharField(max_length=255, unique=True, help_text="Celery's worker name (name@host).")
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-seen_at"]

    def __str__(self) -> str:
        return f"{self.worker} (pid {self.pid}) seen {self.seen_at:%Y-%m-%d %H:%M:%S}"
