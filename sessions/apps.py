from __future__ import annotations

from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    name = "sessions"
    # The plain label "sessions" is taken by django.contrib.sessions.
    label = "agent_sessions"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"
