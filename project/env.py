"""Small typed readers for environment variables.

Bad configuration must fail at start-up with a message naming the variable,
never later inside a request, so every reader raises ImproperlyConfigured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import overload

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), got {raw!r}")


@overload
def env_int(name: str, default: int, *, minimum: int | None = None) -> int: ...
@overload
def env_int(name: str, default: None, *, minimum: int | None = None) -> int | None: ...
def env_int(name: str, default: int | None, *, minimum: int | None = None) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


@overload
def env_float(name: str, default: float, *, minimum: float, maximum: float) -> float: ...
@overload
def env_float(name: str, default: None, *, minimum: float, maximum: float) -> float | None: ...
def env_float(name: str, default: float | None, *, minimum: float, maximum: float) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if not (minimum <= value <= maximum):  # also rejects nan
        raise ImproperlyConfigured(f"{name} must be between {minimum} and {maximum}, got {raw!r}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().upper()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return value


def env_writable_dir(name: str, default: str, *, base: Path | None = None) -> Path:
    """The directory `name` names (created when missing); a relative one is under `base`."""
    path = Path(os.environ.get(name) or default)
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}: cannot create directory {str(path)!r}: {exc.strerror}") from None
    if not os.access(path, os.W_OK):
        raise ImproperlyConfigured(f"{name}: directory {str(path)!r} is not writable")
    return path


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


_RATE_PERIODS = {"s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day"}


def env_rate(name: str, default: str | None) -> str | None:
    """A DRF throttle rate, "<count>/<period>" (period s, min, hour or day); "off" = None."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"off", "0", "none"}:
        return None
    count, _, period = value.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in _RATE_PERIODS:
        raise ImproperlyConfigured(f"{name} must look like 1200/min (periods: s, min, hour, day) or off, got {raw!r}")
    return f"{int(count)}/{period}"


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """SECURE_PROXY_SSL_HEADER from "X-Forwarded-Proto: https" (or "HTTP_X_FORWARDED_PROTO,https")."""
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return None
    header, sep, value = raw.partition(":") if ":" in raw else raw.partition(",")
    header, value = header.strip(), value.strip()
    if not sep or not header or not value:
        raise ImproperlyConfigured(f"{name} must look like 'X-Forwarded-Proto: https', got {raw!r}")
    if not header.upper().startswith("HTTP_"):
        header = "HTTP_" + header.upper().replace("-", "_")
    return header.upper(), value
