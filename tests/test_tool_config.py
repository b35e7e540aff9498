"""The checkers' configuration names only what exists: every module pyproject.toml exempts from
mypy (the list of modules whose errors are left to fix) and every package it checks."""

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


def test_a_module_that_is_gone_is_reported():
    assert _module_exists("compaction.services.*") and _module_exists("sessions.admin")
    assert not _module_exists("compaction.services.importing")
