"""Recompute the meter columns the dashboard list sorts and filters on (Session.usage_*).

Every write keeps them current; run this after changing the global defaults
(COMPACTOR_* settings that move triggers or windows), which reach a session otherwise only
at its next write.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from sessions import services


class Command(BaseCommand):
    help = "Recompute every session's stored usage figures (after a change of the global compaction defaults)."

    def handle(self, *args, **options) -> None:
        changed = services.session_meter_refresh()
        self.stdout.write(f"{changed} session(s) updated")
