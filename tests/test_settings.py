"""Bad configuration fails at start-up with a message naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _check(env_overrides: dict[str, str | None]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "SECRET_KEY": "x",
            "COMPACTOR_VAR_DIR": "/tmp/compactor-settings-test",
        }
    )
    for key, value in env_overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_it_starts_with_the_embedded_defaults():
    result = _check({})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SECRET_KEY", None),
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "nosuchdb://x"),
        ("REDIS_URL", "http://localhost:6379"),
        ("COMPACTOR_RESERVE_TOKENS", "lots"),
        ("COMPACTOR_AUTO_COMPACT_RATIO", "1.5"),
        ("COMPACTOR_MAX_REQUEST_BYTES", "10"),
        ("COMPACTOR_AUTO_COMPACT_RATIO", "0.001"),
        ("COMPACTOR_ANTHROPIC_TIMEOUT", "nan"),
        ("LOG_LEVEL", "LOUD"),
        ("COMPACTOR_COMPACT_PROMPT", "Summarize {nonsense} without the transcript"),
        ("COMPACTOR_VAR_DIR", "/proc/nope"),
    ],
)
def test_it_names_the_bad_variable(variable, value):
    result = _check({variable: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert variable in result.stderr.splitlines()[-1]


def _postgres_options(env_overrides: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env.update({"DJANGO_SETTINGS_MODULE": "project.settings", "SECRET_KEY": "x"}, **env_overrides)
    code = "import django; from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_postgresql_connections_give_up_after_a_connect_timeout():
    url = "postgres://u@db.invalid:5432/x"
    assert "'connect_timeout': 5" in _postgres_options({"DATABASE_URL": url})
    assert "'connect_timeout': 2" in _postgres_options({"DATABASE_URL": url, "COMPACTOR_DB_CONNECT_TIMEOUT": "2"})
    assert "'connect_timeout': 9" in _postgres_options({"DATABASE_URL": url + "?connect_timeout=9"})
