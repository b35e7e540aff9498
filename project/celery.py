from __future__ import annotations

import os

from celery import Celery
from kombu.utils.objects import cached_property  # the decorator of Celery's own Worker property

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


class CompactorCelery(Celery):
    @cached_property
    def Worker(self):  # noqa: N802 - Celery's name
        """`celery worker` runs project.worker.Worker: Celery's, started lean (its docstring)."""
        return self.subclass_with_self("project.worker:Worker")


app = CompactorCelery("compactor")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker records a heartbeat (ops.worker): /readyz and the metrics tell when none is alive.
# By name: the step needs the models, which load after this module (Celery resolves it at start).
app.steps["worker"].add("ops.worker:WorkerHeartbeatStep")
