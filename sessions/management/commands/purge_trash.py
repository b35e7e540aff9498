"""Delete for good the sessions that have been in the trash longer than the retention period."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions import trash


class Command(BaseCommand):
    help = (
        "Delete sessions (with their messages, compactions and events) that were moved to the trash more than "
        "COMPACTOR_TRASH_RETENTION_DAYS days ago. Beat runs this daily."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=int, help="Retention in days (default: COMPACTOR_TRASH_RETENTION_DAYS).")
        parser.add_argument("--dry-run", action="store_true", help="Only count what would be purged.")

    def handle(self, *args, days: int | None = None, dry_run: bool = False, **options) -> None:
        if days is not None and days < 0:
            raise CommandError("--days must be 0 or more")
        count = trash.sessions_purge(retention_days=days, dry_run=dry_run)
        retention = settings.TRASH_RETENTION_DAYS if days is None else days
        verb = "would purge" if dry_run else "purged"
        self.stdout.write(f"{verb} {count} session(s) trashed more than {retention} day(s) ago")
