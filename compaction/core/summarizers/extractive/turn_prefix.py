"""The summary of the early part of a turn that is cut in two (the later part stays verbatim)."""

from __future__ import annotations

from compaction.core.prompts import TURN_PREFIX_HEADINGS, text_of
from compaction.core.summarizers.extractive.analysis import Analysis, analyze, one_line
from compaction.core.summarizers.extractive.patterns import JUNK_INTENT_RE, TASK_NOTE_RE, TEST_RE, TRACKER_RE
from compaction.core.summarizers.extractive.sections import COMMAND_CHARS, MAX_COMMANDS
from compaction.core.text_heuristics import GIT_COMMIT_RE, classify_user_text, clean_user_text, normalize
from compaction.core.tokens import count_text
from compaction.core.types import Msg

MAX_ATTEMPTS = 25


def turn_start(messages: list[Msg], a: Analysis) -> str:
    """What the summarized part of the turn really began with."""
    if a.users:
        first = next((u.text for u in a.users if u.kind != "chatter"), a.users[0].text)
        return f'User: "{one_line(first, 501)}"'
    for msg in messages[:3]:
        if msg.role != "user":
            continue
        for block in msg.blocks:
            if block.get("type") != "text":
                continue
            raw = text_of(block, "text")
            if "<task-notification>" in raw:
                note = TASK_NOTE_RE.search(raw)
                what = one_line(note.group(1), 200) if note else "a background task finished"
                return f"This part began with a background-task notification ({what}); the user's request precedes it."
            if "[request interrupted by user" in raw.lower():
                return "This part began right after the user interrupted the assistant; the user's request precedes it."
            cleaned = clean_user_text(raw)
            if cleaned:
                return f'User: "{one_line(cleaned, 501)}"'
        if msg.is_tool_result:
            return "(the user's request precedes this part of the turn; this part starts with tool results)"
    return "(the user's request precedes this part of the turn)"


def _attempts(a: Analysis, already: str) -> list[str]:
    attempted = []
    for work in sorted(a.files.values(), key=lambda w: w.last_event):
        purpose = f": {'; '.join(work.purposes[-2:])}" if work.purposes else ""
        attempted.append(
            f"- Modified `{a.rel(work.path)}` ({work.edits} edit{'s' if work.edits != 1 else ''}{purpose})"
        )
    last_run = {c.command: c for c in a.commands}
    runs = sorted(last_run.values(), key=lambda c: c.index)
    significant = [
        c
        for c in runs
        if not c.ok or TEST_RE.search(c.command) or GIT_COMMIT_RE.search(c.full) or TRACKER_RE.search(c.command)
    ]
    for c in significant[-MAX_ATTEMPTS:]:
        if c.ok:
            outcome = f"ok: {c.detail}" if c.detail else "ok"
        elif c.fixed_by is not None:
            outcome = f"failed ({c.detail}), later fixed"
        else:
            outcome = f"failed: {c.detail}"
        attempted.append(f"- `{one_line(c.shown, COMMAND_CHARS)}` → {outcome}")
    for commit in a.commits:
        attempted.append(f'- Committed `{commit.hash}` "{commit.subject}"' if commit.subject else "")
    others = [c.shown for c in reversed(runs) if c not in significant][:MAX_COMMANDS]
    if others:
        attempted.append("- Other commands run, newest first: " + "; ".join(f"`{one_line(c, 120)}`" for c in others))
    attempted += [f"- Todo {st}: {content}" for st, content in a.todos]
    attempted += [f"- {n.text}" for n in a.notes[-8:]]
    return [line for line in dict.fromkeys(attempted) if line and normalize(line[2:]) not in already]


def extractive_turn_prefix(messages: list[Msg], *, budget: int, already: str = "") -> str:
    """What the in-progress turn attempted so far, in the turn-prefix format.

    `already` is the main summary served beside it: lines it holds are not repeated.
    """
    a = analyze(messages)
    seen = normalize(already)
    attempted = _attempts(a, seen)
    results = [
        f"- Error: {e.line}" + (" (fixed later in this part)" if e.resolved else "")
        for e in a.errors[-25:]
        if normalize(e.line) not in seen
    ]
    results += [f"- The user rejected the {what} (that call did not run)" for what in a.rejections]
    if a.read:
        results.append("- Files read: " + ", ".join(a.rel(p) for p in a.read[:40]))
    context = [f"- {t}" for t in [t for t in a.last_intents if not JUNK_INTENT_RE.search(t)][-3:]]
    if a.final_text:
        context.append(f'- The assistant\'s last words in this part: "{one_line(a.final_text, 300)}"')
    if a.last_tools:
        context.append("- Last tool activity: " + "; ".join(a.last_tools[-3:]))
    requests = [u for u in a.users if classify_user_text(u.text) != "chatter"]
    if len(requests) > 1:
        context.append(f'- The user also said: "{one_line(requests[-1].text, 300)}"')

    def assemble() -> str:
        return "\n".join(
            [
                TURN_PREFIX_HEADINGS[0],
                turn_start(messages, a),
                "",
                TURN_PREFIX_HEADINGS[1],
                *(attempted or ["- (none)"]),
                "",
                TURN_PREFIX_HEADINGS[2],
                *(results or ["- (none)"]),
                "",
                TURN_PREFIX_HEADINGS[3],
                *(context or ["- (none)"]),
            ]
        )

    text = assemble()
    # Oldest attempts go first when over budget; the request and latest state stay.
    while count_text(text) > budget and len(attempted) > 1:
        attempted = attempted[len(attempted) // 4 or 1 :]
        text = assemble()
    while count_text(text) > budget and len(results) > 1:
        results = results[len(results) // 4 or 1 :]
        text = assemble()
    return text


def covered_turn_prefix(messages: list[Msg]) -> str:
    """The turn prefix when the main summary was built from these same messages: say so once
    instead of summarizing them twice."""
    a = analyze(messages[:3]) if messages else Analysis()
    return "\n".join(
        [
            TURN_PREFIX_HEADINGS[0],
            turn_start(messages, a),
            "",
            TURN_PREFIX_HEADINGS[1],
            "- Summarized above, together with the history before it: its progress, errors and state.",
            "",
            TURN_PREFIX_HEADINGS[2],
            "- In the summary above (Errors and Fixes, Repository State).",
            "",
            TURN_PREFIX_HEADINGS[3],
            "- The kept messages that follow continue this same turn from where the summary says the work stopped.",
        ]
    )
