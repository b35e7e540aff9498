"""Decisions: a choice with its reason, attached to the change that carried it out.

The agent's words become a decision only when it gave a reason and the call right after them
went through (its stated intent was carried out). A plan the person approved is a decision of
its own. Everything else the agent says stays narration, out of the state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compaction.core.text_heuristics import sentences
from compaction.core.work.events import Call
from compaction.core.work.parse import code_names, edit_texts, one_line, plan_of
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Decision, NameEdit, NameTrace, WorkState

MAX_DECISIONS = 40
MAX_NAMES = 300  # code names followed through the edits
MAX_NAME_EDITS = 40
# A reason that weighs an alternative or names a constraint, not a passing "since we imported it".
REASON_RE = re.compile(
    r"(?i)\b(because|so that|in order to|instead of|rather than|to avoid|to keep|to preserve|"
    r"(?:does ?n[o']t|do ?n[o']t|won'?t|can'?t|cannot|isn'?t) (?:support|work with|allow|handle|access|reach|see)|not supported|unsupported|"
    r"(?:will|would) (?:fail|break)|fails? (?:on|with|when)|(?:nesting|nested|function|complexity) (?:is )?too (?:deep|long|complex|high)|"
    r"backward[- ]compat\w*|trade-?off|otherwise|which (?:means|requires|breaks)|is (?:safer|simpler|faster|cleaner))\b"
)
# A constraint the agent found in the code before choosing how to go on: what something lacks
# or cannot do ("the root layout doesn't render flash messages", "the config is missing the
# key", "too many conditionals in one function"). Right after a failure such a sentence is the
# agent's diagnosis of it (under Errors and Fixes, borne out or not), no decision.
CONSTRAINT_RE = re.compile(
    r"(?i)\b(?:(?:does|do|is|are|has|have) ?n[o']t|never) (?:render|exist|include|contain|provide|expose|define|"
    r"register|configure|load|return|call|handle|show|print|emit)s?\b|"
    r"\bthere(?:'s| is| are) no\b|\b(?:has|have) no\b|\b(?:is|are) (?:missing|not configured)\b|\blacks?\b|"
    r"\btoo many \w+"
)
# A sentence about an error or a failure: what the agent found wrong is its diagnosis of it (under
# Errors and Fixes), not a constraint it chose around.
DIAGNOSIS_RE = re.compile(r"(?i)\b(?:errors?|bugs?|fail(?:s|ed|ing|ure)?|exceptions?|traceback|crash(?:es|ed)?)\b")
ACTION_RE = re.compile(
    r"(?i)^(?:(?:now|next|then|ok|so|first|finally|instead)[,.]?\s+)*(?:i'?ll|i will|let me|let's|we'?ll|i need to|i'm going to)?\s*"
    r"(add|update|replace|create|remove|fix|extract|rewrite|write|implement|change|rename|move|wire|register|refactor|"
    r"make|use|switch|convert|delete|drop|introduce|split|handle|apply|keep|set|patch|restructure|inline|revert)\b"
)
# A reason that is the state of the agent's own work, not why it chose something.
FILLER_RE = re.compile(
    r"(?i)\b(?:i|we) (?:haven'?t|have not|still need to|didn'?t)\b|\bnot (?:\w+ )?yet\b|n't (?:\w+ )?yet\b|\byet because\b"
)
_APPROVED_RE = re.compile(r"(?i)\b(approved|approve)\b")


def _reason_and_choice(text: str, *, constraints: bool = False) -> tuple[str, str]:
    said = [s for s in sentences(text) if 12 <= len(s) <= 400]
    found = (REASON_RE, CONSTRAINT_RE) if constraints else (REASON_RE,)
    raw = next(
        (
            s
            for pattern in found
            for s in said
            if pattern.search(s)
            and not s.rstrip().endswith("?")
            and (pattern is REASON_RE or not DIAGNOSIS_RE.search(s))
        ),
        "",
    )
    reason = raw.lstrip("> ")
    if not reason:
        return "", ""
    # The choice is said after its reason ("X doesn't support Y. I'll rewrite it."): an action
    # named before it is one of the options being weighed ("1. Remove it 2. Use it instead"), not
    # necessarily the one taken.
    after = said[said.index(raw) + 1 :]
    choice = next((s for s in after if ACTION_RE.search(s)), "")
    if not choice and not ACTION_RE.search(reason):
        return "", ""  # a reason for nothing the agent said it would do
    return one_line(reason, 300), one_line(choice, 200)


def _plan(state: WorkState, call: Call) -> None:
    text = call.args.get("plan") if isinstance(call.args, dict) else None
    if not isinstance(text, str) or not _APPROVED_RE.search(call.output[:300]):
        return
    title, points = plan_of(text)
    state.decisions.append(Decision(call.seq, title, "; ".join(points[:6]), by="plan"))


def watch(state: WorkState, text: str) -> None:
    """Follow the code names `text` names (a rule of the person's, a decision) through the edits
    that come after it."""
    for name in code_names(text):
        if name not in state.names and len(state.names) < MAX_NAMES:
            state.names[name] = NameTrace()


def _trace(state: WorkState, call: Call) -> None:
    """What an edit did to the names followed: occurrences its new text has more (or fewer) of
    than its old text; a whole write, against what this history's edits had put in the file."""
    if not state.names:
        return
    pairs, content = edit_texts(call.args)
    path = call.path or ""
    if content is not None:
        new = code_names(content)
        deltas = {name: new[name] - state.names[name].held.get(path, 0) for name in state.names}
    else:
        old = code_names("\n".join(o for o, _n in pairs))
        new = code_names("\n".join(n for _o, n in pairs))
        deltas = {name: new[name] - old[name] for name in state.names}
    for name, delta in deltas.items():
        if not delta:
            continue
        trace = state.names[name]
        trace.edits = [*trace.edits, NameEdit(call.seq, delta, state.turn.request)][-MAX_NAME_EDITS:]
        trace.held[path] = max(0, trace.held.get(path, 0) + delta)


@dataclass(frozen=True)
class TakenOut:
    """A code name the work put in and then took out again: the turn that did it (the
    person's message it answered) and its edits that took it out."""

    name: str
    request: int
    seqs: tuple[int, ...]


def taken_out(state: WorkState, text: str, since: int) -> TakenOut | None:
    """Whether what `text` asked for or chose did not hold: a code name it names that the edits
    from `since` on put in and then took out again as often (and the last edit of it took it
    out). The turn whose edits brought it down to nothing, and those edits; None when every such
    name still stands."""
    for name in code_names(text):
        trace = state.names.get(name)
        later = [e for e in trace.edits if e.seq >= since] if trace else []
        if not any(e.delta > 0 for e in later) or later[-1].delta > 0 or sum(e.delta for e in later) > 0:
            continue
        total, added = 0, False
        for edit in later:
            total += edit.delta
            added = added or edit.delta > 0
            if added and total <= 0:
                seqs = tuple(e.seq for e in later if e.delta < 0 and e.request == edit.request and e.seq > since)
                return TakenOut(name, edit.request, seqs or (edit.seq,))
    return None


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if call.kind == "plan" and outcome.ok:
        _plan(state, call)
        return
    _decide(state, call, outcome)
    if call.kind == "edit" and outcome.ok:
        _trace(state, call)


def _decide(state: WorkState, call: Call, outcome: Outcome) -> None:
    changes = call.kind == "edit" or (call.kind == "shell" and not outcome.probe and not outcome.check)
    if not changes or not outcome.ok or not call.purpose:
        return
    # Made right after a failure (the reads and searches that looked into it aside): the reason
    # is the agent's diagnosis of it, to be borne out.
    failed = next(
        (s for s in reversed(state.turn.steps) if s.seq < call.seq and s.kind not in ("read", "search")), None
    )
    reason, choice = _reason_and_choice(call.purpose, constraints=not (failed is not None and failed.ok is False))
    if not reason or any(d.reason == reason for d in state.decisions):
        return
    if FILLER_RE.search(reason):
        return  # the state of its own work ("not used yet because I haven't …"), no choice
    about = call.path or one_line(outcome.command, 80)
    after = ""
    if failed is not None and failed.ok is False:
        after = next((k for k, streak in state.streaks.items() if streak.last == failed.seq), "")
    state.decisions.append(Decision(call.seq, choice, reason, by="agent", about=about, after_failure=after))
    del state.decisions[:-MAX_DECISIONS]
    watch(state, f"{reason}\n{choice}")


def on_run(state: WorkState, key: str, ok: bool, seq: int) -> None:
    """The next run of a command a decision was made to fix: the diagnosis held or not."""
    for decision in state.decisions:
        if decision.after_failure == key and decision.held is None and decision.seq < seq:
            decision.held = ok
