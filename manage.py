#!/usr/bin/env python
from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        # Load settings now: some commands swallow a settings error and fail later with an
        # unrelated AppRegistryNotReady; a bad variable must be reported by name.
        settings.INSTALLED_APPS  # noqa: B018
    except ImproperlyConfigured as exc:
        sys.exit(f"ImproperlyConfigured: {exc}")

    from django.db import DatabaseError

    from project.unmigrated import sqlite_file, unmigrated_line

    sqlite_path = sqlite_file()
    existed = sqlite_path is None or sqlite_path.exists()
    try:
        execute_from_command_line(sys.argv)
    except DatabaseError:
        # An unmigrated database: one line saying what to run, not a traceback.
        line = unmigrated_line(sys.argv[1] if len(sys.argv) > 1 else "", sqlite_path=sqlite_path, existed=existed)
        if line is None:
            raise
        sys.exit(line)


if __name__ == "__main__":
    main()
