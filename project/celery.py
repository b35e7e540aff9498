from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("compactor")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker records a heartbeat (ops.worker): /readyz and the metrics tell when none is alive.
# By name: the step needs the models, which load after this module (Celery resolves it at start).
app.steps["worker"].add("ops.worker:WorkerHeartbeatStep")
