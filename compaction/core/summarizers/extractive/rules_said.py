"""The person's rules and replies as the handoff states them: a correction said in answer to
one step of the agent's is marked so (or left to The Person's Messages once the person wrote on
the same subject again), and a report the person answered carries that answer."""

from __future__ import annotations

from compaction.core.summarizers.extractive.standing import (
    INFLECTIONS,
    SUBJECT_STOPWORDS,
    SUBJECT_WORD_RE,
    code,
    listing,
    quoted,
    words_of,
)
from compaction.core.summarizers.extractive.view import View
from compaction.core.text_heuristics import answers_a_step, instruction_quote
from compaction.core.work.reducers.decisions import taken_out
from compaction.core.work.state import Person


def _subject_words(text: str) -> set[str]:
    return {w for w in SUBJECT_WORD_RE.findall(text.lower()) if w not in SUBJECT_STOPWORDS}


def _later_on_it(v: View, rule: Person) -> list[int]:
    """The person's later messages on the same subject (a distinctive word of the rule, or one
    containing it: "block" and "codeblock"): they may have changed or lifted it."""
    said = [(p, _subject_words(p.text)) for p in v.state.people.messages if p.kind != "chatter"]

    def near(a: str, b: str) -> bool:
        # One word, or a compound holding it ("block" in "codeblock"); an inflection ("value",
        # "values"; "display", "displayed") is only the same word in general use.
        short, long = sorted((a, b), key=len)
        if short == long:
            return True
        return short in long and long.replace(short, "", 1) not in INFLECTIONS

    # A word most of the person's messages use ("theme" in a session about themes) names no subject.
    words = {w for w in _subject_words(rule.text) if sum(any(near(w, b) for b in theirs) for _p, theirs in said) <= 3}
    later = [p.seq for p, theirs in said if p.seq > rule.seq and any(near(a, b) for a in words for b in theirs)]
    return list(dict.fromkeys(later))


def rule_line(v: View, p: Person, limit: int) -> str:
    notes = []
    if (p.after is not None or p.queued) and answers_a_step(p.text):
        # Said about what the agent had just done: it binds that step, not all the work.
        notes.append("said in answer to the agent's step before it")
    replaced = taken_out(v.state, p.text, p.seq)
    if replaced is not None:
        # The work did as asked, then took it out again: what the rule named is gone.
        by = f"after the person's {v.cite(replaced.request)}, " if replaced.request > p.seq else ""
        edits = "edit" if len(replaced.seqs) == 1 else "edits"
        notes.append(f"later replaced: {by}{edits} {v.cite(*replaced.seqs)} took {code(replaced.name)} out again")
    later = [s for s in _later_on_it(v, p) if replaced is None or s != replaced.request]
    if later:
        # The next ones: the message that came right after a rule is the one that may change it.
        notes.append(f"the person wrote on the same subject later, at {listing([v.cite(s) for s in later[:3]], 3)}")
    return f"{quoted(instruction_quote(p.text), limit)} ({v.cite(p.seq)}{'; ' + '; '.join(notes) if notes else ''})"


def verdict(v: View, person: Person) -> str:
    """The person's reply to the report that answered `person` (accepted, corrected, undone),
    quoted: an answer the person rejected is not the request done."""
    if person.answer is None:
        return ""
    reply = next(
        (
            p
            for p in v.state.people.messages
            if p.after is not None and p.after.seq == person.answer.seq and p is not person
        ),
        None,
    )
    return (
        f" (the person's reply, {v.cite(reply.seq)}: {quoted(reply.text, v.chars(160))})" if reply is not None else ""
    )


TEMPLATE_CHARS = 2_000


def constraints(v: View) -> list[str]:
    limit = v.chars(500)
    out = [rule_line(v, p, limit) for p in v.rules]
    template = v.state.people.template
    if len(template) > 1:
        # The instructions the task came with (one command at a time, how to hand it in): the
        # harness's words, binding all the same.
        rules = template[-1]
        out.insert(
            0,
            f"The task template's instructions ({v.cite(rules.seq)}, the harness's words): {words_of(rules.text, v.chars(TEMPLATE_CHARS), rules.seq)}",
        )
    return [f"- {line}" for line in out]
