"""The turn: the person's latest request, the calls since, the agent's latest words, whether
its turn ended, what is still pending. Also the run of commands the other reducers consult."""

from __future__ import annotations

import re

from compaction.core.text_heuristics import SENTENCE_END_RE, chain_parts, error_lines_of, strip_ansi
from compaction.core.vocabulary import NO_MATCHES_RE, PLUMBING, TRACKER_CMD_RE, found_nothing
from compaction.core.work.events import Call, Injected, Narration, Said, TurnEnded
from compaction.core.work.parse import one_line
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Quote, Step, WorkState

MAX_STEPS = 12
MAX_RECENT = 16
MAX_COMMANDS = 80
# Programs that search (their empty answer is "found nothing", another look's is "printed nothing").
SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd"})


def on_said(state: WorkState, event: Said) -> None:
    turn = state.turn
    turn.ended = False
    if state.people.messages and state.people.messages[-1].kind == "chatter" and turn.request:
        return  # "continue", "ok": the same request goes on
    turn.request, turn.calls, turn.steps = event.seq, 0, []
    turn.report, turn.interrupted, turn.submitted, turn.plan = None, None, None, []


def on_injected(state: WorkState, event: Injected) -> None:
    if event.kind == "interrupt":
        state.turn.interrupted = event.seq
        state.turn.ended = False


def on_narration(state: WorkState, event: Narration) -> None:
    state.turn.said = Quote(event.seq, event.text)
    state.turn.ended = False


MAX_ANSWER_CHARS = 600
# Words that announce the agent's next action ("Let me run the tests:", "Now I'll fix the
# import."): a reply ending on them is unfinished — the turn goes on with the call they announce.
ANNOUNCES_RE = re.compile(
    r"(?i)^\W*(?:(?:ok(?:ay)?|now|next|first|then|so|good|great|perfect|alright)[,.!]?\s+)*"
    r"(?:let me|let's|i'll|i will|i'm going to|i am going to|i need to|we need to)\s+(?:now\s+|also\s+|first\s+)?"
    r"(?:check|run|look|read|fix|update|add|create|write|try|verify|see|start|commit|test|examine|investigate|"
    r"search|open|edit|implement|make|install|build|review|continue|proceed|re-?run|find|inspect|apply|change|"
    r"remove|move|rename|push|close|explore|get|set up|compile|modify|finish|address|handle|refactor|debug)\b"
)


def announces_more(text: str) -> bool:
    """Whether the agent's words end by announcing what it does next (nothing done after)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return False
    last = lines[-1]
    if last.endswith(":") and not last.startswith(("|", "-", "*")):
        return True
    sentence = SENTENCE_END_RE.split(last)[-1]
    return len(last) <= 400 and bool(ANNOUNCES_RE.match(sentence))


# A reply's last line that ends mid-sentence: on a word, a comma or a joining mark, where a
# finished sentence ends on its final punctuation (or a closing quote, bracket, code span, emoji).
_OPEN_END_RE = re.compile(r"(?:\w|[,;&+(\-\u2013\u2014/])$")
# A line of a markdown block (list item, quote, table row, heading): it needs no final punctuation.
_BLOCK_LINE_RE = re.compile(r"^(?:[-*+>|#]|\d+[.)]\s)")


def cut_off(text: str) -> bool:
    """Whether the agent's reply stops mid-way: inside a code fence it opened, or on a prose line
    that ends without a sentence's final punctuation ("… Did we revert")."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return False
    if sum(1 for line in lines if line.startswith("```")) % 2:
        return True
    last = lines[-1]
    # A word or two alone ("Perfect", "Done") is an answer, not a sentence cut short.
    return len(last.split()) > 2 and not _BLOCK_LINE_RE.match(last) and bool(_OPEN_END_RE.search(last))


def on_turn_ended(state: WorkState, event: TurnEnded) -> None:
    if announces_more(event.text):
        return  # a reply cut where it announced its next step: the turn is not over
    state.turn.report = Quote(event.seq, event.text)
    state.turn.ended = True
    if cut_off(event.text):
        return  # the agent stopped, but a reply cut mid-sentence answers nothing
    asked = next((p for p in reversed(state.people.messages) if p.seq == state.turn.request), None)
    if asked is not None:
        asked.answer = Quote(event.seq, one_line(event.text, MAX_ANSWER_CHARS))


# A warning: a "Warning:" / "WARN" lead, or Python's `a.py:4: BytesWarning: …`. Not a run's result:
# the run went on after it.
WARNING_LINE_RE = re.compile(r"(?i)^\W*(?:npm\s+)?warn(?:ing)?\b|^\S+:\d+:\s*\w*Warning:")
# What a harness prints around a command's output (SWE-agent's state lines, its prompt, its note
# for a command that printed nothing, its end-of-command marker): not the command's.
HARNESS_LINE_RE = re.compile(
    r"^\((?:Open file|Current directory): .*\)$|^bash-\$$|^Your command ran successfully and did not produce any output\.$"
)
HARNESS_MARK_RE = re.compile(r"///PROCESS-DONE:\d+:PROCESS-DONE///")
# Markup (HTML tags) and what is no letter or digit: a line with nothing else ("</body></html>",
# "}") says nothing of what a run printed.
MARKUP_RE = re.compile(r"<[^<>\n]*>|[^A-Za-z0-9]")
PRINTED_LINES = 2


def _printed(output: str) -> str:
    """What a run that went through printed: an error line it printed (a reproduction of a bug:
    not "passed"; a traceback's last, the exception raised), else its last lines; never a warning,
    which the run went on after ("" when it printed nothing else)."""
    errors = [line for line in error_lines_of(output, is_error=False) if not WARNING_LINE_RE.match(line)]
    if errors:
        return f"printed: {errors[-1] if 'Traceback (most recent call last)' in output else errors[0]}"
    lines = [ln.strip() for ln in HARNESS_MARK_RE.sub("", strip_ansi(output)).splitlines()]
    said = [
        ln for ln in lines if MARKUP_RE.sub("", ln) and not WARNING_LINE_RE.match(ln) and not HARNESS_LINE_RE.match(ln)
    ]
    return f"printed: {' / '.join(one_line(ln, 120) for ln in said[-PRINTED_LINES:])}" if said else ""


def _step(call: Call, outcome: Outcome, open_file: str = "") -> Step:
    if outcome.command:
        kind = (
            "check"
            if outcome.check
            else "git"
            if "git " in outcome.command
            else "tracker"
            if TRACKER_CMD_RE.search(outcome.command)
            else "run"
        )
        detail = "refused" if call.rejected else outcome.tally if outcome.ok else outcome.error or outcome.tally
        detail = outcome.unknown or detail  # ran, with no outcome to tell: what it showed instead
        if outcome.ok and outcome.probe and found_nothing(call.output):
            # A look that came back empty (grep's status 1 is no failure): it answered "nothing".
            first = outcome.command.split("|", 1)[0].split()
            detail = "found nothing" if first and first[0] in SEARCH_PROGRAMS else "printed nothing"
        elif outcome.ok and kind == "run" and not outcome.probe and not detail:
            detail = _printed(call.output)
        return Step(call.seq, kind, f"`{one_line(outcome.command, 100)}`", outcome.ok, detail)
    what = f"{call.kind if call.kind != 'other' else call.name} {call.path}" if call.path else call.name
    if call.kind == "edit" and not call.path and open_file:
        what = f"edit {open_file}"  # an editor's edit changes the file it has open
    detail = "refused" if call.rejected else outcome.error if outcome.ok is False else outcome.unknown
    if (
        outcome.ok
        and call.kind != "edit"
        and ((call.kind == "search" and found_nothing(call.output)) or NO_MATCHES_RE.match(call.output.strip()[:300]))
    ):
        detail = "found nothing"
    return Step(call.seq, call.kind, what, outcome.ok, detail)


def _commands(state: WorkState, call: Call, outcome: Outcome) -> None:
    for part in chain_parts(outcome.command):
        words = part.split("|", 1)[0].split()[:2]
        head = " ".join(w for w in words if "/" not in w and not w.startswith(".") and "=" not in w)
        if not head or head.split()[0] in PLUMBING:
            continue
        if head not in state.commands and len(state.commands) < MAX_COMMANDS:
            state.commands.append(head)
    changes = outcome.ok and not outcome.probe and not outcome.check and not TRACKER_CMD_RE.search(outcome.command)
    if changes and "git " not in outcome.command:
        state.recent = [*state.recent, Quote(call.seq, outcome.command)][-MAX_RECENT:]


MAX_SUBMIT_OUTPUT = 300


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    turn = state.turn
    turn.calls += 1
    turn.ended = False
    step = _step(call, outcome, state.open_file)
    made = state.files.get(call.path or state.open_file) if call.kind == "edit" and outcome.ok else None
    if made is not None and made.empty and made.edits == 1:
        step.what = f"create {made.path} (empty)"  # an editor's `create`: no content written yet
    turn.steps = [*turn.steps, step][-MAX_STEPS:]
    if call.kind == "submit" and outcome.ok:
        # With its argument, when it has one: a CTF's flag is what the work found.
        said = call.args.get("command") if isinstance(call.args, dict) else None
        turn.submitted = Quote(call.seq, one_line(said, 200) if isinstance(said, str) and said.strip() else call.name)
        turn.submit_output = call.output.strip()[:MAX_SUBMIT_OUTPUT]
    if outcome.command:
        _commands(state, call, outcome)
