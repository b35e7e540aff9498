"""Sizes a newcomer can read (docs/architecture.md): no product module over 800 lines and no
function over 60 lines, with no exemption."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("project", "sessions", "compaction", "gateway", "ops", "compactor_client")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 60


def _product_files() -> list[Path]:
    files = [p for top in PRODUCT for p in (ROOT / top).rglob("*.py")]
    return [p for p in files if "migrations" not in p.parts]


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_product_module_is_over_800_lines():
    long = [
        f"{p.relative_to(ROOT)} ({n})"
        for p in _product_files()
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert not long, long


def test_no_function_is_over_60_lines():
    long = [f for p in _product_files() for f in _long_functions(p)]
    assert not long, long
