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

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
