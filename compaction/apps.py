from __future__ import annotations

from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "compaction"
    verbose_name = "Compaction"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the Celery tasks in every process (web too), so the services' enqueue by
        # name finds them; in ready() because the tasks need the models, loaded after apps.py.
        from compaction import tasks  # noqa: F401
