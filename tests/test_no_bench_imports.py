"""Tests import nothing from bench/ (its scripts may assume what tests must not); bench's own
checks live in bench/tests, beside what they check."""

from __future__ import annotations

import ast

from tests.services import ROOT


def bench_imports(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        if any(n == "bench" or n.startswith("bench.") for n in names):
            lines.append(node.lineno)
    return lines


def test_no_test_imports_bench():
    found = [
        f"{p.relative_to(ROOT)}:{line}" for p in (ROOT / "tests").rglob("*.py") for line in bench_imports(p.read_text())
    ]
    assert found == []


def test_the_check_sees_both_import_forms():
    assert bench_imports("import bench.summary_eval\nfrom bench import kept_eval\nimport benchmark\n") == [1, 2]
