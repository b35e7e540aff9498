"""The rule table's row type and the discovery of every text rule (compaction/core/rules).

Every text rule of the summarizers, as one table: what each pattern or word list recognises,
the general fact that makes it right, and examples it must and must not match.

A rule lives where it is used (compaction/core/vocabulary.py for commands, checks, trackers and
git; compaction/core/tool_vocabulary.py for tool names; text_heuristics.py for the person's words
and error lines; the work model's parsers and reducers; the extractive summarizer), and its row
here names it (`module:NAME`, `module:NAME[i]` for a row of a table of patterns, `[key]` for a
dict's). tests/core/test_rules.py checks every row's examples against the live pattern, that
every module-level pattern and word list of the modules in COVERED has a row, that no pattern is
written inside a function of those modules (a `re` call with a literal or f-string pattern:
move it to module level and give it a row; only a mechanism declared in MECHANISMS may stay), and
that every module of compaction.core that writes patterns is in COVERED or in NOT_SUMMARIZER: a
rule removed, broken or added without examples fails it.

A rule encodes a general fact — a program's own output format (git's, a test runner's tally), an
exit status, what a tool is for, how people write — never one transcript's wording. A row whose
only example is one transcript's sentence is a rule to remove.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# The modules whose module-level patterns (re.Pattern, alone or in tuples and dicts) and word lists
# (frozensets of strings, in WORDLIST_MODULES) are text rules.
COVERED = (
    "compaction.core.text_heuristics",
    "compaction.core.vocabulary",
    "compaction.core.tool_vocabulary",
    "compaction.core.conversation_text",
    "compaction.core.work.parse",
    "compaction.core.work.profiles",
    "compaction.core.work.reducers.checks",
    "compaction.core.work.reducers.decisions",
    "compaction.core.work.reducers.errors",
    "compaction.core.work.reducers.files",
    "compaction.core.work.reducers.git",
    "compaction.core.work.reducers.tasks",
    "compaction.core.work.reducers.turn",
    "compaction.core.summarizers.extractive.standing",
    "compaction.core.summarizers.extractive.remaining",
    "compaction.core.summarizers.extractive.asked",
    "compaction.core.summarizers.extractive.view",
    "compaction.core.summarizers.extractive.render",
    "compaction.core.summarizers.base",
    "compaction.core.summarizers.agree",
    "compaction.core.provenance",
    "compaction.core.ledger",
    "compaction.core.fileops",
    "compaction.core.kept",
    "compaction.core.summary_markdown",
    "compaction.core.paths",
    "compaction.core.prompts",
)
WORDLIST_MODULES = (
    "compaction.core.ledger",
    "compaction.core.paths",
    "compaction.core.vocabulary",
    "compaction.core.tool_vocabulary",
    "compaction.core.summarizers.extractive.view",
)
SHORT = {
    "text_heuristics": "compaction.core.text_heuristics",
    "vocabulary": "compaction.core.vocabulary",
    "tool_vocabulary": "compaction.core.tool_vocabulary",
    "conversation_text": "compaction.core.conversation_text",
    "parse": "compaction.core.work.parse",
    "profiles": "compaction.core.work.profiles",
    "checks": "compaction.core.work.reducers.checks",
    "decisions": "compaction.core.work.reducers.decisions",
    "errors": "compaction.core.work.reducers.errors",
    "files": "compaction.core.work.reducers.files",
    "git": "compaction.core.work.reducers.git",
    "tasks": "compaction.core.work.reducers.tasks",
    "turn": "compaction.core.work.reducers.turn",
    "standing": "compaction.core.summarizers.extractive.standing",
    "remaining": "compaction.core.summarizers.extractive.remaining",
    "asked": "compaction.core.summarizers.extractive.asked",
    "view": "compaction.core.summarizers.extractive.view",
    "render": "compaction.core.summarizers.extractive.render",
    "base": "compaction.core.summarizers.base",
    "agree": "compaction.core.summarizers.agree",
    "provenance": "compaction.core.provenance",
    "ledger": "compaction.core.ledger",
    "fileops": "compaction.core.fileops",
    "kept": "compaction.core.kept",
    "summary_markdown": "compaction.core.summary_markdown",
    "paths": "compaction.core.paths",
    "prompts": "compaction.core.prompts",
}

# Patterns built inside a function of a COVERED module that are no text rule: "module:function"
# (module by its short name) → why. None today: a rule whose pattern takes a value (a task key, a
# file's name) is a module-level template with a placeholder, tested by its row.
MECHANISMS: dict[str, str] = {}
# Modules of compaction.core that write patterns but are not the summarizers' text: each tests its
# patterns its own way.
NOT_SUMMARIZER = {
    "compaction.core.overflow": "providers' context-overflow errors, each pattern with its example (tests/core/test_overflow.py)",
    "compaction.core.tokens": "model names to tokenizers and tiktoken's own o200k split (tests/core/test_tokens.py)",
    "compaction.core.transcripts.codex": "Codex's exec output format (tests/core/test_transcripts_codex.py)",
}


@dataclass(frozen=True)
class Rule:
    """One row: `name` is `module:NAME`, `module:NAME[i]` or `module:NAME[key]` (module by its
    short name in SHORT). `how`: "search" (anywhere), "match" (at the start, as the code calls
    it), "fullmatch" (the whole text), or "member" for a word list (examples are members and
    non-members)."""

    name: str
    recognises: str
    why: str
    match: tuple[str, ...]
    no_match: tuple[str, ...]
    how: str = "search"

    def target(self) -> Any:
        module_name, _, attr = self.name.partition(":")
        module = importlib.import_module(SHORT[module_name])
        key = None
        if "[" in attr:
            attr, _, key = attr[:-1].partition("[")
        value = getattr(module, attr)
        if key is None:
            return value
        if isinstance(value, dict):
            return value[key]
        item = value[int(key)]
        return next(part for part in item if isinstance(part, re.Pattern))

    def matches(self, example: str) -> bool:
        target = self.target()
        if self.how == "member":
            return example in target
        if self.how == "match":
            return bool(target.match(example))
        if self.how == "fullmatch":
            return bool(target.fullmatch(example))
        return bool(target.search(example))


def _defined_names(module: Any) -> set[str]:
    """Names assigned at module level in the module's own source (not imported ones)."""
    tree = ast.parse(inspect.getsource(module))
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def discover() -> Iterator[str]:
    """The name of every text rule in the COVERED modules, in the table's naming."""
    short = {full: name for name, full in SHORT.items()}
    for full in COVERED:
        module = importlib.import_module(full)
        for attr in sorted(_defined_names(module)):
            value = getattr(module, attr)
            prefix = f"{short[full]}:{attr}"
            if isinstance(value, re.Pattern):
                yield prefix
            elif isinstance(value, frozenset) and full in WORDLIST_MODULES and all(isinstance(v, str) for v in value):
                yield prefix
            elif isinstance(value, dict) and value and all(isinstance(v, re.Pattern) for v in value.values()):
                yield from (f"{prefix}[{key}]" for key in value)
            elif isinstance(value, tuple) and value and all(isinstance(item, tuple) for item in value):
                for index, item in enumerate(value):
                    if any(isinstance(part, re.Pattern) for part in item):
                        yield f"{prefix}[{index}]"
