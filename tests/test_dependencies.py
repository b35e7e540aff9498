"""Dependencies declared where they are imported: every third-party package the server's code
imports is pinned in requirements.txt, and every one the pip-installable client imports is in
pyproject.toml's dependencies (nothing arrives only because another package pulls it in)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.test_code_size import ROOT, _product_files

OURS = {"compaction", "sessions", "gateway", "ops", "project", "compactor_client", "tests"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_distributions(files) -> dict[str, set[str]]:
    """Distribution → the files that import it (standard library and our packages left out)."""
    owners = packages_distributions()
    out: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in OURS:
                    continue
                for dist in owners.get(top, [top]):
                    out.setdefault(_norm(dist), set()).add(str(path.relative_to(ROOT)))
    return out


def _requirements() -> set[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return {_norm(re.split(r"[=<>\[ ;]", line.strip())[0]) for line in lines if line.strip() and line[0] != "#"}


def test_the_server_imports_only_what_requirements_txt_pins():
    server = [p for p in _product_files() if p.parts[len(ROOT.parts)] != "compactor_client"]
    missing = {d: sorted(f)[:3] for d, f in imported_distributions(server).items() if d not in _requirements()}
    assert missing == {}


def test_the_client_imports_only_its_declared_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_norm(re.split(r"[=<>\[ ;]", d)[0]) for d in project["dependencies"]}
    client = [p for p in _product_files() if p.parts[len(ROOT.parts)] == "compactor_client"]
    missing = {d: sorted(f)[:3] for d, f in imported_distributions(client).items() if d not in declared}
    assert missing == {}
