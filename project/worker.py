"""The Celery worker program (`celery -A project worker`, project.celery names it): Celery's own,
started lean, because a restarted worker's start is the time its jobs wait (issue 35: ready 15.5 s
after a SIGKILL on a loaded machine, its start CPU-bound).

Measured with -X importtime and CPU timestamps at each start phase (bench/faults_bench.py
--only restart prints the start's CPU seconds): Django's setup imported every admin module (the
admin's autodiscover: the dashboard's presenters, the API's authentication, drf_spectacular) and
Celery's Django fixup ran the system checks, which import the whole URLconf (every view, the
gateway, the OpenAPI schema). No task runs any of it. Here, before Django's setup (Celery's
WorkController.__init__ runs it first thing):
- the admin app is installed as SimpleAdminConfig: the same app, models and migrations, without
  the autodiscover (the web process, which serves the admin, keeps it);
- CELERY_SKIP_CHECKS (Celery's own switch) is set unless the environment sets it: the checks run
  where they mean something, in `manage.py migrate`/`check` before a deployment starts (make serve
  runs migrate first) and in the test suite.
What the tasks need (compaction.tasks: the services, the summarizer chain, the tokenizers) is still
imported before the pool forks, so the pool's processes share it.
"""

from __future__ import annotations

import os

from celery.apps.worker import Worker as CeleryWorker

ADMIN = "django.contrib.admin"
ADMIN_WITHOUT_AUTODISCOVER = "django.contrib.admin.apps.SimpleAdminConfig"


def lean_django_setup() -> None:
    """Adjust what Django's setup will load in a worker. Must run before django.setup()."""
    from django.conf import settings  # lazy: reading the settings module is all this needs of Django

    os.environ.setdefault("CELERY_SKIP_CHECKS", "1")
    settings.INSTALLED_APPS = [ADMIN_WITHOUT_AUTODISCOVER if app == ADMIN else app for app in settings.INSTALLED_APPS]


class Worker(CeleryWorker):
    """celery.apps.worker.Worker, whose __init__ runs Django's setup (through the loader's
    import_modules signal): the lean adjustments come first."""

    def __init__(self, *args, **kwargs) -> None:
        lean_django_setup()
        super().__init__(*args, **kwargs)
