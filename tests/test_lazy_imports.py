"""docs/architecture.md: a lazy import (inside a function) states its reason in a comment on its
line (or the line above): a real cycle, an optional or slow dependency, Django's app loading."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_code_size import ROOT, _product_files


def unexplained_lazy_imports(path: Path, root: Path = ROOT) -> list[str]:
    source = path.read_text()
    lines = source.splitlines()
    out = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                said = lines[node.lineno - 1 : node.end_lineno] + [lines[node.lineno - 2].strip()]
                if not any("#" in line for line in said):
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(out))


def test_every_lazy_import_says_why():
    assert [line for p in _product_files() for line in unexplained_lazy_imports(p)] == []


def test_the_check_finds_an_unexplained_lazy_import(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text("def f():\n    import json\n\n    # a cycle: x imports us\n    import os\n    import re  # slow\n")
    assert unexplained_lazy_imports(path, tmp_path) == ["sample.py:2: import json"]
