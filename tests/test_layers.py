"""Who may import whom (docs/architecture.md): the import-linter contracts in pyproject.toml
hold, and the pure modules load in a fresh interpreter without Django."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import compaction.core

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = re.search(r"Contracts: (\d+) kept, (\d+) broken", done.stdout)
    assert counts is not None, done.stdout
    assert int(counts[1]) >= 6 and int(counts[2]) == 0, done.stdout  # none of pyproject.toml's was dropped


def test_every_pure_module_imports_without_django():
    # The contracts read the import statements; this also catches an import made at run time
    # (importlib, a plugin registry) by loading every module of the core for real.
    modules = [name for _, name, _ in pkgutil.walk_packages(compaction.core.__path__, prefix="compaction.core.")] + [
        "gateway.history"
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('django', 'celery', 'rest_framework')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(modules) > 30  # the walk found the core (its subpackages included)
