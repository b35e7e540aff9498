"""Production settings from the environment, security headers, login and API throttling."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sessions.models import ApiKey

from .servers import ROOT

# The production environment README.md documents (TLS terminated by a proxy in front).
PRODUCTION_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "q3JvM0c7Yk2f9Xw1Lp8sT4nZr6Hd5Va0Ue7Ki2Bg9Qm3Ct6Wy1Fx4Jn8Ps5Lo0Rz",
    "ALLOWED_HOSTS": "compactor.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://compactor.example.com",
    "COMPACTOR_HTTPS": "1",
    "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https",
}


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in PRODUCTION_ENV and not k.startswith("SECURE_")}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**clean, **env, "DJANGO_SETTINGS_MODULE": "project.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_settings():
    result = _check_deploy(PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_without_https():
    result = _check_deploy({k: v for k, v in PRODUCTION_ENV.items() if k != "COMPACTOR_HTTPS"})
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


def test_https_switch_sets_every_setting():
    code = (
        "from django.conf import settings as s;"
        "print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS,"
        " s.SECURE_PROXY_SSL_HEADER)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SECURE_")}
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env={**clean, **PRODUCTION_ENV, "DJANGO_SETTINGS_MODULE": "project.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip() == "True True True 31536000 ('HTTP_X_FORWARDED_PROTO', 'https')", out.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/api/v1/sessions/"])
def test_security_headers_are_on_every_response(client, path):
    response = client.get(path)
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "'unsafe-eval'" not in csp
    assert "camera=()" in response["Permissions-Policy"]


@pytest.mark.django_db
@pytest.mark.parametrize("login_path", ["/accounts/login/", "/admin/login/"])
def test_25_wrong_passwords_in_a_burst_are_not_all_answered(client, user, login_path):
    statuses = [client.post(login_path, {"username": "alice", "password": f"wrong-{i}"}).status_code for i in range(25)]
    assert statuses[:5] == [200] * 5  # the form again, with its error
    assert statuses[5:] == [429] * 20
    locked = client.post(login_path, {"username": "alice", "password": "alice-password"})
    assert locked.status_code == 429  # even the right password waits for the window
    assert b"Too many failed login attempts" in locked.content
    assert int(locked["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_lockout_ends_with_its_window(client, user, settings):
    settings.LOGIN_LOCKOUT_SECONDS = 1
    for i in range(6):
        client.post("/accounts/login/", {"username": "alice", "password": f"wrong-{i}"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "alice-password"}).status_code == 429
    import time

    time.sleep(1.2)
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-password"})
    assert response.status_code == 302


@pytest.mark.django_db
def test_many_usernames_from_one_address_are_throttled_too(client, user):
    statuses = [
        client.post("/accounts/login/", {"username": f"user{i}", "password": "x"}).status_code for i in range(25)
    ]
    assert statuses.count(429) == 5


@pytest.mark.django_db
def test_api_requests_are_throttled_per_key(api, user, settings):
    settings.API_THROTTLE_RATE = "3/min"
    statuses = [api.get("/api/v1/sessions/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    throttled = api.get("/api/v1/sessions/")
    assert throttled.status_code == 429
    assert int(throttled["Retry-After"]) > 0
    assert "throttled" in throttled.json()["error"].lower()
    # Another key of the same owner has its own budget.
    from rest_framework.test import APIClient

    _, key = ApiKey.objects.create_key(owner=user, name="second")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert other.get("/api/v1/sessions/").status_code == 200
