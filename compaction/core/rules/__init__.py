"""Every text rule of the summarizers, as one table (see base.py for what a row says and how the
table is checked): the rows are kept in five parts by topic, RULES is all of them."""

from __future__ import annotations

from . import commands, outputs, summary, support, words
from .base import COVERED, Rule, discover

RULES: tuple[Rule, ...] = words.RULES + commands.RULES + outputs.RULES + summary.RULES + support.RULES

__all__ = ["COVERED", "RULES", "Rule", "discover"]
