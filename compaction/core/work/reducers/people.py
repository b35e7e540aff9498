"""The person's words: requests, standing rules, chatter; what the harness demanded."""

from __future__ import annotations

from compaction.core.text_heuristics import classify_user_text, sentences
from compaction.core.work.events import Call, Injected, Said
from compaction.core.work.parse import one_line
from compaction.core.work.profiles import handover_command
from compaction.core.work.reducers import decisions
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Person, Quote, WorkState

MAX_DEMAND_CHARS = 600
MAX_REFUSALS = 10
MAX_TEMPLATE_PARTS = 2
MAX_TEMPLATE_CHARS = 6_000
MAX_EXPANSIONS = 2
MAX_EXPANSION_CHARS = 12_000


def person_kind(text: str) -> str:
    """request | rule | chatter: a rule binds the rest of the work, a request asks for some."""
    kind = classify_user_text(text)
    return "rule" if kind == "instruction" else kind


MAX_AFTER_CHARS = 1200


def _kept_lines(text: str, limit: int) -> str:
    """`text` within `limit` characters, its lines kept (a closing question is its last line):
    its beginning and its end when it is longer."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit // 2].rstrip() + "\n…\n" + text[-(limit // 2) :].lstrip()


def on_said(state: WorkState, event: Said) -> None:
    # Runs before the turn reducer starts the new turn: turn.report is still the agent's last word.
    turn = state.turn
    after = (
        Quote(turn.report.seq, _kept_lines(turn.report.text, MAX_AFTER_CHARS)) if turn.ended and turn.report else None
    )
    earlier = state.people.messages[-1] if state.people.messages else None
    if earlier is not None and earlier.seq == event.seq:
        after = earlier.after  # the second text of one message answers what the first did
    # A task a template wraps is what was asked, whatever its wording (a CTF's flavour text is no rule).
    kind = "request" if event.task else person_kind(event.text)
    state.people.messages.append(Person(event.seq, event.text, kind, event.queued, after=after, task=event.task))
    if kind == "rule":
        decisions.watch(state, event.text)  # a rule naming code: did the work keep to it?


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    """A call the person refused (or the harness cancelled) is the person's decision."""
    if call.rejected and "sibling tool call" not in call.output.lower():
        said = next((s for s in sentences(call.output) if s.strip()), call.name)
        state.people.refusals = [*state.people.refusals, Quote(call.seq, f"{call.name}: {one_line(said, 160)}")][
            -MAX_REFUSALS:
        ]


def on_injected(state: WorkState, event: Injected) -> None:
    people = state.people
    people.injected += 1
    if event.kind == "hook":
        people.demands.append(Quote(event.seq, one_line(event.text, MAX_DEMAND_CHARS)))
    elif event.kind == "interrupt":
        people.interruptions = [*people.interruptions, event.seq][-MAX_REFUSALS:]
    elif event.kind == "skill":
        # A command's expansion: kept for the request it came with (the first ones only: the
        # task's own instructions; later skills are counted like any harness text).
        if len(people.expansions) < MAX_EXPANSIONS:
            people.expansions.append(Quote(event.seq, event.text.strip()[:MAX_EXPANSION_CHARS]))
    elif event.kind == "task_template":
        if not people.handover:
            people.handover = handover_command(event.text)
        if len(people.template) < MAX_TEMPLATE_PARTS and (not people.template or people.template[0].seq == event.seq):
            people.template.append(Quote(event.seq, event.text.strip()[:MAX_TEMPLATE_CHARS]))
