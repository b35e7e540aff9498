"""The checkers' configuration names only what exists (every module pyproject.toml's mypy
overrides name and every package it checks), and mypy checks every module: no override turns its
errors off, and the pure core and the message store's services stay under the strict flags."""

from __future__ import annotations

import tomllib

from tests.services import ROOT


def _module_exists(name: str) -> bool:
    path = ROOT / name.removesuffix(".*").replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_module_the_mypy_config_names_exists():
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    named = [m for o in mypy["overrides"] for m in ([o["module"]] if isinstance(o["module"], str) else o["module"])]
    assert [m for m in named if not _module_exists(m)] == []
    assert [f for f in mypy["files"] if not (ROOT / f).is_dir()] == []


def test_no_module_is_exempt_from_mypy():
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    assert [o["module"] for o in overrides if o.get("ignore_errors") or o.get("follow_imports") == "skip"] == []
    strict = next(o for o in overrides if o.get("disallow_untyped_defs") and o.get("disallow_subclassing_any"))
    assert {"compaction.core.*", "sessions.services.*"} <= set(strict["module"])


def test_a_module_that_is_gone_is_reported():
    assert _module_exists("compaction.services.*") and _module_exists("sessions.admin")
    assert not _module_exists("compaction.services.importing")
