"""The summarizers' text rules as tested data (compaction/core/rules.py): every row's examples hold
against the live pattern, and every pattern and word list of the covered modules has a row. A rule
removed, broken, or added without examples fails here."""

from __future__ import annotations

import re

import pytest

from compaction.core.rules import RULES, discover
from compaction.core.rules.base import COVERED, MECHANISMS, NOT_SUMMARIZER, discover_inline, inline_patterns
from tests.services import ROOT

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
