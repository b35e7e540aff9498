from __future__ import annotations

from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"
    default_auto_field = "django.db.models.BigAutoField"
