"""The summarizers' text rules as tested data (compaction/core/rules.py): every row's examples hold
against the live pattern, and every pattern and word list of the covered modules has a row. A rule
removed, broken, or added without examples fails here."""

from __future__ import annotations

import pytest

from compaction.core.rules import RULES, discover

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
