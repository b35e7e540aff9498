from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for USERNAME. The key is printed once, alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="A label to recognise the key by.")
        parser.add_argument(
            "--key-only",
            action="store_true",
            help="Print only the key on stdout (the note goes to stderr), for KEY=$(...): an error is "
            "never captured as the key.",
        )

    def handle(self, *args, username: str, name: str, key_only: bool = False, **options):
        User = get_user_model()
        try:
            user = User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"No user named {username!r}. Create one with `manage.py createsuperuser`.") from None
        api_key, key = ApiKey.objects.create_key(owner=user, name=name)
        note = f"Created API key {api_key.prefix}… ({name}) for {username}. Store it now; it is not shown again"
        if key_only:
            self.stderr.write(note + ".")
        else:
            self.stdout.write(note + ":")
        self.stdout.write(key)
