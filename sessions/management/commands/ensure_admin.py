from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a superuser 'admin' on first run and say how to log in."

    def handle(self, *args, **options):
        User = get_user_model()
        password_file = settings.VAR_DIR / "admin-password.txt"
        if User.objects.filter(is_superuser=True).exists():
            if password_file.exists():
                password = password_file.read_text().strip()
                self.stdout.write(f"Log in as 'admin' with password {password} (from {password_file}).")
            else:
                self.stdout.write("Log in with your superuser account.")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "", password)
        password_file.parent.mkdir(parents=True, exist_ok=True)
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        self.stdout.write(f"Created superuser 'admin' with password {password} (saved in {password_file}).")
