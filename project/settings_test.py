"""Settings for the test suite: the real settings with test-friendly environment defaults."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("COMPACTOR_VAR_DIR", tempfile.mkdtemp(prefix="compactor-test-"))

from .settings import *  # noqa: E402,F403

STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405 - silences WhiteNoise's missing-folder warning
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Throttle counters in memory, emptied before each test (tests/conftest.py): never in the Redis
# database the e2e tests use as their broker.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# schemathesis' in-process WSGI client (tests/schema) calls the app as host "localhost".
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "localhost"]  # noqa: F405
