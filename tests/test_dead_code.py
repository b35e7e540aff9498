"""Dead and test-only code: every function and class defined at the top level of the pure core,
the services and the gateway is used by the product (its code, its templates, bench/ or scripts/),
not only by the tests. Django, DRF and Celery call their hooks by name (views, admin, serializers,
signal receivers), so only the packages where nothing is called that way are checked."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from tests.test_code_size import ROOT, _product_files

CHECKED = ("compaction/core", "compaction/services", "sessions/services", "gateway")
# Called by name from outside the code: Django's app registry and URL configuration, Celery.
ENTRY_POINTS = re.compile(r"(?:^|/)(?:apps|urls|views|tasks|admin|models)\.py$|/management/|/migrations/")
WORD = re.compile(r"[A-Za-z_]\w*")


def _used_names(files: list[Path]) -> Counter[str]:
    """Every name read, attribute taken or name imported (and every word of a template), with its count."""
    used: Counter[str] = Counter()
    for path in files:
        text = path.read_text()
        if path.suffix != ".py":
            used.update(WORD.findall(text))
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Name):
                used[node.id] += 1
            elif isinstance(node, ast.Attribute):
                used[node.attr] += 1
            elif isinstance(node, ast.alias):
                used[node.name.rsplit(".", 1)[-1]] += 1
    return used


def unused_definitions(checked: list[Path], product: list[Path], root: Path = ROOT) -> list[str]:
    used = _used_names(product)
    out = []
    for path in checked:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not used[node.name]:
                out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return out


def _product() -> list[Path]:
    tools = [p for top in ("bench", "scripts") for p in (ROOT / top).rglob("*.py") if "tests" not in p.parts]
    return [*_product_files(), *tools, *(ROOT / "templates").rglob("*.html")]


def test_every_checked_definition_is_used_by_the_product():
    checked = [
        p
        for p in _product_files()
        if str(p.relative_to(ROOT)).startswith(CHECKED) and not ENTRY_POINTS.search(str(p.relative_to(ROOT)))
    ]
    assert unused_definitions(checked, _product()) == []


def test_a_definition_only_the_tests_use_is_reported(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def used():\n    return 1\n\n\ndef only_tested():\n    return used()\n")
    caller = tmp_path / "caller.py"
    caller.write_text("from module import used\n\nprint(used())\n")
    assert [line.split()[-1] for line in unused_definitions([module], [module, caller], tmp_path)] == ["only_tested"]
