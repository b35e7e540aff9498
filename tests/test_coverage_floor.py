"""The coverage floor (pyproject.toml [tool.coverage.report] fail_under, which `make coverage`
enforces in CI) only goes up: it is never below what it was in any recent commit of main."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest

from tests.services import ROOT

FLOOR_RE = re.compile(r"^fail_under\s*=\s*([0-9.]+)", re.M)


def _floor(text: str) -> float | None:
    match = FLOOR_RE.search(text)
    return float(match.group(1)) if match else None


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_the_floor_is_set():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["coverage"]["report"]["fail_under"] > 0


def test_the_floor_never_went_down_in_recent_history():
    try:
        commits = _git("log", "--first-parent", "-n", "30", "--format=%H", "--", "pyproject.toml").split()
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"no git history to compare with: {error}")
    now = _floor((ROOT / "pyproject.toml").read_text())
    assert now is not None
    earlier = [f for c in commits if (f := _floor(_git("show", f"{c}:pyproject.toml"))) is not None]
    assert all(now >= f for f in earlier), f"the coverage floor went down: {now} < {max(earlier)}"


def test_the_floor_is_read_from_the_toml_line():
    assert _floor("[tool.coverage.report]\nfail_under = 71.5\n") == 71.5
    assert _floor("[tool.ruff]\nline-length = 120\n") is None
