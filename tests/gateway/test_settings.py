"""Gateway settings are validated at start-up like the others (tests/test_settings.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _settings(**overrides: str) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "COMPACTOR_UPSTREAM", "COMPACTOR_OPENAI"))
    }
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "SECRET_KEY": "x",
            "COMPACTOR_VAR_DIR": "/tmp/compactor-gw-settings",
        }
    )
    env.update(overrides)
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.GATEWAY_UPSTREAM_URL, s.GATEWAY_UPSTREAM_API_KEY or '-', s.GATEWAY_UPSTREAM_TIMEOUT, s.GATEWAY_SUMMARY_WAIT)"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_defaults_and_the_key_fallback():
    assert _settings().stdout.split() == ["https://api.anthropic.com", "-", "600.0", "60.0"]
    assert _settings(ANTHROPIC_API_KEY="sk-a").stdout.split()[1] == "sk-a"
    both = _settings(
        ANTHROPIC_API_KEY="sk-a", COMPACTOR_UPSTREAM_API_KEY="sk-b", COMPACTOR_UPSTREAM_URL="http://proxy:8080/"
    )
    assert both.stdout.split()[:2] == ["http://proxy:8080", "sk-b"]


def _openai(**overrides: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "COMPACTOR_OPENAI"))}
    env.pop("OPENAI_API_KEY", None)
    env.update({"DJANGO_SETTINGS_MODULE": "project.settings", "SECRET_KEY": "x", **overrides})
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.OPENAI_GATEWAY_UPSTREAM_URL, s.OPENAI_GATEWAY_UPSTREAM_API_KEY or '-')"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return result.stdout.split()


def test_the_openai_upstream_defaults_to_openai_and_falls_back_to_openai_api_key():
    assert _openai() == ["https://api.openai.com/v1", "-"]
    assert _openai(OPENAI_API_KEY="sk-o") == ["https://api.openai.com/v1", "sk-o"]
    assert _openai(
        OPENAI_API_KEY="sk-o",
        COMPACTOR_OPENAI_UPSTREAM_API_KEY="sk-p",
        COMPACTOR_OPENAI_UPSTREAM_URL="http://localhost:8000/v1/",
    ) == ["http://localhost:8000/v1", "sk-p"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("COMPACTOR_UPSTREAM_URL", "api.anthropic.com"),
        ("COMPACTOR_UPSTREAM_URL", "ftp://x"),
        ("COMPACTOR_UPSTREAM_URL", "https://x/?a=1"),
        ("COMPACTOR_UPSTREAM_TIMEOUT", "0"),
        ("COMPACTOR_GATEWAY_SUMMARY_WAIT", "soon"),
        ("COMPACTOR_GATEWAY_MAX_REQUEST_BYTES", "12"),
        ("COMPACTOR_OPENAI_UPSTREAM_URL", "api.openai.com/v1"),
        ("COMPACTOR_OPENAI_UPSTREAM_URL", "https://api.openai.com/v1?x=1"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(variable, value):
    result = _settings(**{variable: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and variable in result.stderr
