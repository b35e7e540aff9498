from __future__ import annotations

from django.apps import AppConfig


class ProjectConfig(AppConfig):
    """The project's own wiring: what belongs to no app of its layers."""

    name = "project"
    verbose_name = "Compactor"

    def ready(self) -> None:
        # Django's app loading (the app registry must be ready before project.security's
        # receivers import the auth models): connects the failed-login counters (login
        # throttling) to Django's auth signals.
        from project import security  # noqa: F401
