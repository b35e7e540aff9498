"""The summarizers' text rules as tested data (compaction/core/rules/): every row's examples hold
against the live pattern, every pattern and word list of the covered modules has a row, none is
written inside one of their functions (MECHANISMS aside), and every core module that writes
patterns is covered or said not to be summarizer text. A rule removed, broken, or added without
examples fails here."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator

import pytest

from compaction.core.rules import RULES, discover
from compaction.core.rules.base import COVERED, MECHANISMS, NOT_SUMMARIZER, SHORT
from tests.services import ROOT

_RE_CALLS = frozenset({"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})


def _written(node: ast.expr) -> bool:
    """A pattern written where it is used: a string literal, an f-string, or a sum holding one."""
    if isinstance(node, ast.BinOp):
        return _written(node.left) or _written(node.right)
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _pattern_calls(tree: ast.AST) -> Iterator[tuple[ast.Call, bool]]:
    """Every `re.<fn>(pattern, ...)` call whose pattern is written there (a literal, an f-string
    or a sum holding one), and whether it is inside a function."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, inside = stack.pop()
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in _RE_CALLS
            and node.args
            and _written(node.args[0])
        ):
            yield node, inside
        nested = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, nested) for child in ast.iter_child_nodes(node))


def inline_patterns(source: str, module: str) -> list[str]:
    """`module:function:line` of every pattern written inside a function of `source` (the
    function is the innermost one that holds it), MECHANISMS left out."""
    tree = ast.parse(source)
    owners: dict[int, str] = {}
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                owners[id(node)] = function.name  # walked outer first: the innermost wins
    out = []
    for call, inside in _pattern_calls(tree):
        name = f"{module}:{owners.get(id(call), '<lambda>')}"
        if inside and name not in MECHANISMS:
            out.append(f"{name}:{call.lineno}")
    return sorted(out)


def discover_inline() -> list[str]:
    """Patterns written inside the functions of the COVERED modules (see inline_patterns)."""
    short = {full: name for name, full in SHORT.items()}
    return [
        found
        for full in COVERED
        for found in inline_patterns(inspect.getsource(importlib.import_module(full)), short[full])
    ]


NAMES = [rule.name for rule in RULES]


def test_every_text_rule_has_a_row_and_every_row_a_rule():
    found = set(discover())
    assert len(NAMES) == len(set(NAMES)), "a rule has two rows"
    missing = sorted(found - set(NAMES))
    assert not missing, f"text rules without a row in compaction/core/rules.py: {missing}"
    gone = sorted(set(NAMES) - found)
    assert not gone, f"rows whose rule no longer exists (remove the row with the rule): {gone}"


@pytest.mark.parametrize("rule", RULES, ids=NAMES)
def test_the_rule_matches_what_it_must_and_nothing_it_must_not(rule):
    assert rule.recognises and rule.why, "say what the rule recognises and the general fact behind it"
    assert rule.match and rule.no_match, "a rule needs examples it must match and must not match"
    assert rule.how in ("search", "match", "fullmatch", "member")
    wrong = [e for e in rule.match if not rule.matches(e)]
    assert not wrong, f"{rule.name} ({rule.recognises}) no longer matches: {wrong}"
    wrong = [e for e in rule.no_match if rule.matches(e)]
    assert not wrong, f"{rule.name} ({rule.recognises}) now matches: {wrong}"


def test_no_text_rule_is_written_inside_a_function():
    inline = discover_inline()
    assert not inline, f"patterns written inside functions (move each to module level with a row): {inline}"
    assert all(why for why in MECHANISMS.values())


def test_a_pattern_written_inside_a_function_is_found():
    source = (
        'import re\n_OK = re.compile(r"a")\n'
        'def f(x):\n    return re.search(r"b+", x) or _OK.search(x)\n'
        'def g(x, key):\n    h = lambda y: re.sub(rf"{key}", "", y)\n    return h(x)\n'
        'def k(x, words):\n    return re.split(r"\\b(" + "|".join(words) + ")", x)\n'
    )
    assert inline_patterns(source, "m") == ["m:f:4", "m:g:6", "m:k:9"]


def test_every_module_that_writes_patterns_is_covered_or_said_not_to_be_summarizer_text():
    writes = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "compaction" / "core").rglob("*.py")
        if "rules" not in path.parts
        and re.search(r"\bre\.(?:compile|search|match|fullmatch|sub|split|findall|finditer)\(", path.read_text())
    }
    assert sorted(writes - set(COVERED) - set(NOT_SUMMARIZER)) == []
    assert sorted(set(NOT_SUMMARIZER) - writes) == [], "a module that no longer writes patterns"
