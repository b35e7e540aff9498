"""The handoff, section by section, from the reconciled state of the work.

One function per section. Each adds prioritised items; `fit_budget` then drops the least
important (oldest first) until the text fits both the token budget and the character cap,
and the user's own words go last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compaction.core.summarizers.extractive.analysis import (
    BOOKKEEPING_CMD_RE,
    Analysis,
    Command,
    Issue,
    Step,
    clean_command,
    command_signature,
    content_words,
    handover_command,
    hook_demand,
    is_sign_off,
    one_line,
    owed_git_steps,
    similar,
    uncommitted_changes,
)
from compaction.core.summarizers.extractive.patterns import (
    EXIT_CODE_RE,
    FOCUS_STOPWORDS,
    FUTURE_RE,
    JUNK_INTENT_RE,
    TEST_RE,
    TRACKER_RE,
)
from compaction.core.summary_markdown import parse_summary_sections
from compaction.core.text_heuristics import (
    CORRECTION_RE,
    GIT_COMMIT_RE,
    MAX_INSTRUCTION_CHARS,
    classify_user_text,
    instruction_quote,
    is_probe_command,
    lower_first,
    normalize,
    sentences,
)
from compaction.core.tokens import count_text

# The body's share of the 16k characters a served summary may take (chain.MAX_SUMMARY_CHARS);
# the chain fits the file tags into what is left.
MAX_BODY_CHARS = 13_500
MAX_USER_MESSAGES = 30
USER_QUOTE_CHARS = 300
# Older user messages are quoted by their start; the newest few in full.
RECENT_USER_MESSAGES = 4
OLDER_QUOTE_CHARS = 140
MAX_PREVIOUS_DONE = 30
MAX_PREVIOUS_CRITICAL = 30
MAX_DECISIONS = 12
MAX_NOTES_PER_UNIT = 8
MAX_OPEN_ERRORS = 15
MAX_FIXED_ERRORS = 15
MAX_FILES = 40
MAX_NAMES_AFTER_PURPOSE = 3  # a Files line is a sentence: the purpose says what, a few names say where
MAX_COMMANDS = 12
MAX_WORK_SINCE_REQUEST = 6
COMMAND_CHARS = 170
# Items at or above this priority are the user's rules and the goal: trimmed last.
RULE_PRIORITY = 90.0
SHORT_QUOTE_CHARS = 200

KEYS = (
    "goal",
    "user_messages",
    "constraints",
    "done",
    "in_progress",
    "blocked",
    "decisions",
    "next",
    "repo",
    "errors",
    "files",
    "critical",
)


@dataclass
class Item:
    text: str
    priority: float
    protected: bool = False
    tokens: int = 0
    focus_score: float = 0.0
    nested: bool = False  # a detail line under the item before it


def focus_words(instructions: str | None) -> set[str]:
    words = {w.strip("./-") for w in re.findall(r"[a-z0-9_./-]{4,}", (instructions or "").lower())}
    words -= FOCUS_STOPWORDS | {""}
    # "errors" should find "error:" lines: match on a crude stem.
    return {w[:-1] if w.endswith("s") and len(w) > 4 else w for w in words}


class Sections:
    def __init__(self, focus: set[str] | None = None) -> None:
        self.items: dict[str, list[Item]] = {k: [] for k in KEYS}
        self._seen: dict[str, set[str]] = {k: set() for k in KEYS}
        self.focus = focus or set()
        # User messages left out before any trimming; the ones trimming drops are counted
        # from what is missing, so the marker is right however many go.
        self.users_hidden = 0
        self.users_added = 0

    @property
    def users_not_shown(self) -> int:
        return self.users_hidden + self.users_added - len(self.items["user_messages"])

    def add(self, key: str, text: str, priority: float, protected: bool = False, nested: bool = False) -> Item | None:
        text = text.strip()
        norm = normalize(text)
        if not text or norm in self._seen[key]:
            return None
        self._seen[key].add(norm)
        score = self.focus_score(text)
        # Items about the requested focus are kept first when trimming.
        item = Item(text, priority + 30.0 * score, protected, focus_score=score, nested=nested)
        self.items[key].append(item)
        return item

    def focus_score(self, text: str) -> float:
        if not self.focus:
            return 0.0
        lowered = text.lower()
        return sum(1 for f in self.focus if f in lowered) / len(self.focus)

    def is_focus(self, text: str) -> bool:
        return self.focus_score(text) > 0

    def text_of(self, *keys: str) -> str:
        return "\n".join(i.text for k in keys for i in self.items[k])


def recency(index: int, total: int) -> float:
    return (index + 1) / max(total, 1)


def quote(text: str, limit: int = USER_QUOTE_CHARS) -> str:
    """The user's words: verbatim when short, the rule sentences of a long message."""
    if len(text) > limit and classify_user_text(text) == "instruction":
        text = instruction_quote(text)
    return one_line(text, limit)


# Lines derived from the state at a cut: a newer range re-derives them.
STATE_PREFIXES = (
    "last tool activity",
    "working on",
    "where the work stopped",
    "the assistant's last words",
    "handling the latest request",
    "issue `",
    "finish issue",
    "fix what still fails",
    "answer/handle the latest user request",
    "continue with the user's latest request",
    "do what the ",
    "continue the task stated under goal",
    "nothing is under way",
    "before its latest calls",
    "the work for ",
    "write the content of",
    "re-run the checks",
    "commit the changes",
    "uncommitted",
    "branch",
)


# ---------------------------------------------------------------------------- sections


def goal_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """The first request (or the previous summary's goal), then the latest one, standing out."""
    requests = [u for u in a.users if u.kind != "chatter"]
    prev_goal = [
        g for g in previous.get("goal", []) if not g.lower().startswith(("latest request", "earlier requests"))
    ]
    for item in prev_goal[:2]:
        s.add("goal", item, 100, protected=True)
    chores = [] if prev_goal else _opening_chores(requests)
    if chores:
        requests = requests[len(chores) :]
    if requests and not s.items["goal"]:
        # The task as the user stated it (its opening); its rules are quoted under Constraints.
        later = [u for u in requests[1:] if not u.queued and not u.hook]
        if len(later) >= MOVED_ON_REQUESTS and requests[0].calls_after:
            # Long since answered in its own turn: the live task is among the requests since.
            said = one_line(_link_texts(requests[0].text), 300)
            s.add(
                "goal",
                f"{said} (the session's first request, worked on in its own turn; {len(later)} requests have "
                "followed, the latest below is the live one)",
                100,
                protected=True,
            )
        else:
            s.add("goal", one_line(_link_texts(task_block(requests[0].text)), 600), 100, protected=True)
    if chores:
        said = "; ".join(f'"{one_line(u.text, 120)}"' for u in chores)
        s.add("goal", f"Asked before this task: {said}", 96, protected=True)
    latest = requests[-1] if requests and (len(requests) > 1 or prev_goal) else None
    if latest is not None and normalize(latest.text) != normalize(requests[0].text if requests else ""):
        how = " (sent while the assistant was working)" if latest.queued else ""
        if latest.hook:
            how = f" (the user's {latest.hook} hook, sent by the harness, not typed)"
        answering = f' (replying to the assistant: "{latest.reply_to}")' if latest.reply_to else ""
        s.add("goal", f'Latest request{how}: "{one_line(latest.text, 400)}"{answering}', 97, protected=True)


# This many typed requests after the first (which got its own turn of work): the first is
# history, no longer the task at hand.
MOVED_ON_REQUESTS = 3

# A one-line request the assistant settled in a call or two ("start the server in the
# background") before the user asked for the real work: not the session's goal.
CHORE_CHARS = 60
CHORE_CALLS = 2


def _opening_chores(requests: list) -> list:
    """The leading requests that were chores. What follows one must be a new request — a
    correction ("actually, the bug is in auth.py") continues the first one instead."""
    chores = []
    for user, following in zip(requests, requests[1:], strict=False):
        small = len(user.text) <= CHORE_CHARS and "\n" not in user.text.strip() and user.calls_after <= CHORE_CALLS
        new_task = (
            following.kind == "request"
            and not CORRECTION_RE.match(following.text.strip())
            and not following.hook
            and len(following.text) > len(user.text)
        )
        if not small or not new_task:
            break
        chores.append(user)
    return chores


# A label on a line of its own ("ISSUE:", "TASK DESCRIPTION:"): a harness template's blocks.
_BLOCK_LABEL_RE = re.compile(r"^[ \t]*([A-Z][A-Z0-9 _-]{2,40}):[ \t]*$", re.MULTILINE)
# The most a harness's lead-in before the task block may be ("We're currently solving the
# following issue within our repository. Here's the issue text:").
PREAMBLE_CHARS = 300


def task_block(text: str) -> str:
    """The task of a harness's prompt, without its lead-in: a short preamble ending in a colon,
    then a labelled block ("ISSUE:\n…") up to the next label ("INSTRUCTIONS:"), given as
    "Issue: …". The goal leads with the task; what the harness says around it is boilerplate.
    Any other message is returned as it is."""
    labels = list(_BLOCK_LABEL_RE.finditer(text))
    if not labels:
        return text
    first = labels[0]
    preamble = text[: first.start()].strip()
    if len(preamble) > PREAMBLE_CHARS or (preamble and not preamble.endswith(":")):
        return text
    end = labels[1].start() if len(labels) > 1 else len(text)
    block = text[first.end() : end].strip()
    if not block:
        return text
    return f"{first.group(1).strip().capitalize()}: {block}"


_MARKDOWN_LINK_RE = re.compile(r"\[([^\]\n]{1,200})\]\((https?://[^)\s]+)\)")


def _link_texts(text: str) -> str:
    """Markdown links as their text: a pasted issue's URLs would take the goal's room (they
    are listed under Critical Context)."""
    return _MARKDOWN_LINK_RE.sub(r"\1", text)


def user_messages_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Every message the user wrote in the range, in order: the newest verbatim, older ones by
    their start, the goal and the latest request (quoted above) by reference."""
    earlier = previous.get("user_messages", [])
    for index, item in enumerate(earlier):
        marker = re.match(r"^\((\d+) .*not shown", item)
        if marker:
            s.users_hidden += int(marker.group(1))  # still not shown: the count goes on
            continue
        if s.add("user_messages", one_line(item, OLDER_QUOTE_CHARS + 40), 66 + 8 * recency(index, len(earlier))):
            s.users_added += 1
    shown = [u for u in a.users if not re.fullmatch(r"/[\w:-]+", u.text.strip())]
    if len(shown) > MAX_USER_MESSAGES:
        # The first message and the newest ones; what is between was acted on long ago.
        s.users_hidden = len(shown) - MAX_USER_MESSAGES
        shown = [shown[0], *shown[-(MAX_USER_MESSAGES - 1) :]]
    quoted_above = s.text_of("goal")
    for index, user in enumerate(shown):
        notes = []
        if user.queued:
            notes.append("sent while the assistant was working")
        if user.after_interrupt:
            notes.append("after interrupting the assistant")
        if user.hook:
            notes.append(f"the {user.hook} hook's output, sent by the harness")
        if user.reply_to and user.kind != "instruction":
            notes.append(f'replying to: "{one_line(user.reply_to, 160)}"')
        recent = index >= len(shown) - RECENT_USER_MESSAGES
        limit = USER_QUOTE_CHARS if recent else OLDER_QUOTE_CHARS
        # A hook's report has no rule sentences to pick: its opening says what it checked.
        text = one_line(user.text, limit) if user.hook else quote(user.text, limit)
        if normalize(_link_texts(task_block(user.text))[:200]) in normalize(quoted_above) and not user.queued:
            continue  # quoted under Goal just above: the same words twice help no one
        suffix = f" ({'; '.join(notes)})" if notes else ""
        weight = 70 + 15 * recency(index, len(shown)) + (8 if user.kind != "chatter" else 0)
        if s.add("user_messages", f'"{text}"{suffix}', weight):
            s.users_added += 1


def constraints_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """The user's rules and corrections verbatim; the previous ones carried forward."""
    prev = previous.get("constraints", [])
    for index, item in enumerate(prev):
        quoted = re.match(r'^User(?: said)?(?: \(verbatim\))?:\s*"?(.*?)"?$', item)
        inner = quoted.group(1) if quoted else item
        if classify_user_text(inner) == "chatter":
            continue
        s.add("constraints", f'User: "{inner}"' if quoted else item, 91 + 3 * recency(index, len(prev)))
    rules = [u.text for u in a.users if u.kind == "instruction"]
    # The task's own words only: the latest request's line is rebuilt at every compaction, a
    # rule in it would be lost with it.
    goal = normalize("\n".join(i.text for i in s.items["goal"] if not i.text.startswith("Latest request")))
    in_goal = False
    for index, text in enumerate(rules):
        rule = instruction_quote(text).strip()
        # A heading without its rule ("Stop hook feedback:", "Generated system must:") is none.
        parts = [p for p in rule.split(" … ") if not p.endswith(":") and len(re.findall(r"[A-Za-z]{2,}", p)) >= 3]
        # Rule sentences the Goal quotes already ("Don't stop until all tests pass" in the first
        # request): the same words twice under two headings help no one.
        kept = [part for part in parts if normalize(part.rstrip("…")) not in goal]
        in_goal = in_goal or len(kept) < len(parts)
        rule = " … ".join(kept)
        if not rule:
            continue
        said = one_line(rule, MAX_INSTRUCTION_CHARS + 1)
        if any(similar(said, item.text, 0.8) for item in s.items["constraints"]):
            continue  # the same rules sent again (a harness repeats its instructions): once
        if task_block(text) != text:
            # A harness's task template (SWE-agent's INSTRUCTIONS and TIPS around the ISSUE):
            # the same boilerplate for every task, named as such and shorter, and the first
            # to go when room runs out — the user's own rules outrank it.
            said = one_line(rule, TEMPLATE_RULES_CHARS)
            s.add("constraints", f'The task prompt\'s standing instructions (harness template): "{said}"', 60)
            continue
        # A long message (a bug report with a pasted log) is quoted by its rule sentences.
        s.add("constraints", f'User: "{said}"', 95 + 4 * recency(index, len(rules)))
    if in_goal and not s.items["constraints"]:
        s.add("constraints", "The user's rules are those in the request quoted under Goal", 90)


# How much of a harness template's rules to quote: its first few, not the whole list.
TEMPLATE_RULES_CHARS = 300


def _unit_header(a: Analysis, unit: int) -> str:
    commit = next((c for c in a.commits if c.unit == unit and c.subject), None)
    closed = [i.id for i in a.issues.values() if i.status == "closed" and i.unit == unit]
    parts = []
    if commit is not None:
        pushed = f", pushed to `{commit.pushed_to}`" if commit.pushed_to else ", not pushed"
        parts.append(f'Committed `{commit.hash}` "{commit.subject}"{pushed}')
    if closed:
        parts.append("closed " + ", ".join(f"`{i}`" for i in closed))
    start = _unit_start(a, unit)
    end = commit.event if commit is not None else a.clock + 1
    checks: dict[str, Command] = {}
    for c in a.commands:
        if c.ok and TEST_RE.search(c.command) and c.detail and start < c.event < end:
            checks[" ".join(c.command.split()[:2])] = c
    if checks:
        shown = ", ".join(f"`{one_line(c.command, 80)}` → {c.detail.rstrip('.')}" for c in list(checks.values())[-2:])
        parts.append(f"checks passed: {shown}")
    return "; ".join(parts)


def _unit_start(a: Analysis, unit: int) -> int:
    before = [c.event for c in a.commits if c.unit == unit - 1]
    return before[-1] if before else 0


def done_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """What is finished, one block per commit: what it holds, what was learned on the way."""
    for item in previous.get("done", [])[-MAX_PREVIOUS_DONE:]:
        s.add("done", item, 50)
    for item in previous.get("in_progress", []):
        if item.lower().startswith(STATE_PREFIXES):
            continue
        if any(similar(item, n.text) for n in a.notes if n.kind == "report"):
            s.add("done", item, 55)
    committed_units = sorted({c.unit for c in a.commits if c.subject})
    total = len(committed_units)
    said_elsewhere = _said_elsewhere(a)
    for index, unit in enumerate(committed_units):
        weight = 70 + 15 * recency(index, total)
        header = _unit_header(a, unit)
        s.add("done", header, weight)
        steps = unit_steps(a, unit, header)
        if steps:
            s.add("done", steps, weight - 10, nested=True)
        notes = [n for n in a.notes if n.unit == unit and n.text.rstrip(".") not in said_elsewhere]
        for n in _newest_tally_only(notes, header)[-MAX_NOTES_PER_UNIT:]:
            s.add("done", n.text, weight - 12, nested=True)
    # Without commits (or after the last one): the agent's reports of finished work.
    last_unit = a.unit
    closed_now = [i.id for i in a.issues.values() if i.status == "closed" and i.unit == last_unit]
    if closed_now:
        s.add("done", "Closed " + ", ".join(f"`{i}`" for i in closed_now), 78)
    reports = [n for n in a.notes if n.unit == last_unit and n.kind == "report"]
    if not a.commits:
        # Findings count as progress; a plan ("we can now clean up") or a guess does not.
        reports = [
            n for n in a.notes if n.kind == "report" or (n.kind == "diagnosis" and not _PLAN_OR_GUESS_RE.search(n.text))
        ]
    groups = _notes_by_request(a, reports) if not a.commits else []
    if len(groups) >= 2:
        # Many requests and no commit to hang the work on: each report under the request it
        # answered, so "Footer now uses dim" reads as the answer to "make the footer dimmer".
        for index, (user, notes) in enumerate(groups):
            weight = 56 + 20 * recency(index, len(groups))
            header = f'For "{one_line(user.text, 110)}":' if user else "Before the first request of this range:"
            s.add("done", header, weight)
            for note in notes[-MAX_NOTES_PER_UNIT // 2 :]:
                s.add("done", _note_line(note), weight - 2 + (5 if s.is_focus(note.text) else 0), nested=True)
        reports = []
    for index, note in enumerate(reports[-MAX_NOTES_PER_UNIT * 2 :]):
        s.add("done", _note_line(note), 55 + 15 * recency(index, len(reports)) + (5 if s.is_focus(note.text) else 0))
    if a.submitted is not None and a.submitted[1].strip():
        s.add("done", submission_note(a), 84)
    completed = [content for status, content in a.todos if status == "completed"]
    if completed:  # one line: a checklist of nine "Todo completed:" lines buries the report
        s.add("done", "Todos completed: " + "; ".join(completed), 66)
    if not a.commits:
        passing = _last_runs(a, lambda c: c.ok and bool(TEST_RE.search(c.command) or TRACKER_RE.search(c.command)))
        for cmd in passing[-6:]:
            detail = f" → {cmd.detail}" if cmd.detail else " → ok"
            s.add("done", f"`{one_line(cmd.shown, COMMAND_CHARS)}`{detail}", 60)
    if not a.turn_ended and a.submitted is None:
        # The range ends inside a turn: the agent has not reported this work yet, and a
        # successor that does not see it would redo it.
        work = work_since_request(a, listed=s.text_of("done"))
        if work:
            s.add("done", f"Since {_latest_request_named(a)}: " + "; ".join(work), 73)


def _said_elsewhere(a: Analysis) -> set[str]:
    """Findings another section states already: the cause given with an error (Errors and
    Fixes) and the reason given with a decision. Said once, where it explains something."""
    causes = {c.diagnosis.rstrip(".") for c in a.commands if not c.ok and c.diagnosis and (c.errors or c.detail)}
    return causes | {n.text.rstrip(".") for n in a.notes if any(n.text.rstrip(".") in d for d in a.decisions)}


# "All 43 tests pass", "12 tests, 0 failures", "5 passed": what one run of the checks reported.
_RUN_TALLY_RE = re.compile(
    r"(?i)\b\d+ (?:unit |integration )?(?:tests?|examples?|specs?)\b[^.;]{0,40}?\b(?:pass(?:ed|es|ing)?|fail\w*|green)\b"
    r"|\b\d+ (?:passed|failed|failures?)\b"
)


def _newest_tally_only(notes: list, header: str) -> list:
    """A count of passing tests is true until the next run: only the newest tally stays, and
    none when the piece's check line (its header) gives one."""
    tallied = [n for n in notes if _RUN_TALLY_RE.search(n.text)]
    stale = set(map(id, tallied if _RUN_TALLY_RE.search(header) else tallied[:-1]))
    return [n for n in notes if id(n) not in stale]


# A sentence that announces a step or guesses at a cause: not a finding to list as done.
_PLAN_OR_GUESS_RE = re.compile(
    r"(?i)\b(let'?s|let me|i will|i'll|we will|we'll|we can now|(?:now|so|then|[,;:]) ?we can|we should|we need to|"
    r"i need to|i'm going to|"
    r"i am going to|might|could be|probably|perhaps|maybe|possibly|likely)\b"
)


def submission_note(a: Analysis) -> str:
    """The work handed over with a completion tool, and what it handed over: the files a
    submitted patch changes, or the answer it gave."""
    if a.submitted is None:
        return ""
    call, answer = a.submitted
    if not answer.strip():
        return f"The agent's last action was `{call}`; no answer to it is recorded in this range"
    patch = _patch_files(answer)
    if patch:
        return f"The work was handed over with `{call}`: the submitted patch changes {patch}"
    return f"The work was handed over with `{call}`, which answered: {one_line(answer, 160)}"


_DIFF_FILE_RE = re.compile(r"^diff --git a/(\S+) b/\S+", re.MULTILINE)


def _patch_files(diff: str) -> str:
    """ "`a.py` (+3 −1)" for each file of a unified diff."""
    parts = []
    chunks = _DIFF_FILE_RE.split(diff)
    for path, body in zip(chunks[1::2], chunks[2::2], strict=False):
        lines = body.splitlines()
        added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
        parts.append(f"`{path}` (+{added} −{removed} lines)")
    return ", ".join(parts)


def _note_line(note) -> str:
    # A diagnosis is something learned, not something finished: it says so.
    said_so = re.match(r"(?i)^(?:key |main )?(?:findings?|found|missing)\b", note.text)
    return f"Found: {note.text}" if note.kind == "diagnosis" and not said_so else note.text


def _notes_by_request(a: Analysis, notes: list) -> list[tuple]:
    """(request, its notes) in order, for the typed requests that led to any; notes before
    the range's first request come first, under None."""
    requests = [u for u in a.users if not u.queued and u.kind != "chatter" and not u.hook]
    groups: dict[int, tuple] = {}
    for note in notes:
        user = next((u for u in reversed(requests) if u.event < note.event), None)
        key = user.event if user else -1
        groups.setdefault(key, (user, []))[1].append(note)
    return [groups[k] for k in sorted(groups)]


STEP_KINDS = (
    (
        "started the issue",
        re.compile(r"\b(bd|gh issue|glab issue)\s+(update|edit)\b.*(--status[= ]in_progress|--add-assignee)"),
    ),
    (
        "installed dependencies",
        re.compile(
            r"\b(deps\.get|npm (install|i|ci)|pip install|uv (add|sync|pip)|yarn add|pnpm add|cargo add|"
            r"bundle install|poetry add|go get|composer require)\b"
        ),
    ),
    ("generated and ran migrations", re.compile(r"(?i)^(?!git\b).*(migrat|codegen|alembic|prisma migrate)")),
    ("ran the checks", TEST_RE),
    ("closed the issue", re.compile(r"\b(bd|gh issue|glab issue) close\b")),
)


def step_command(command: str, limit: int = 50) -> str:
    """A command as a step names it: without the `cd <dir> &&` it starts with (two runs read
    `cd /Users/me/project && npm run…` otherwise), cut between words, never inside one."""
    text = re.sub(r"^\s*cd\s+\S+\s*&&\s*", "", clean_command(command))
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" &|;") + " …"


def unit_steps(a: Analysis, unit: int, header: str = "") -> str:
    """How one piece of work was carried out, in the order the kinds of step first appear:
    what a successor repeats for the next piece (claim, migrate, check, close, push). What the
    piece's header line says already (its checks, the issue closed) is not said again."""
    found: dict[str, dict[tuple[str, ...], str]] = {}
    for cmd in a.commands:
        if cmd.unit != unit or not cmd.ok or is_probe_command(cmd.command):
            continue
        for label, pattern in STEP_KINDS:
            if pattern.search(cmd.command):
                # The latest run of each distinct check, at most three kinds per step.
                shown = found.setdefault(label, {})
                signature = command_signature(cmd.command)
                if signature in shown or len(shown) < 3:
                    shown.pop(signature, None)
                    shown[signature] = step_command(cmd.command)
                break
    for label, commands in found.items():
        for signature, shown in list(commands.items()):
            named = f"`{shown.removesuffix(' …')}" in header
            if named or (label == "closed the issue" and "closed `" in header):
                del commands[signature]
    found = {label: commands for label, commands in found.items() if commands}
    if len(found) < 2:
        return ""
    parts = [f"{label} ({', '.join(f'`{c}`' for c in commands.values())})" for label, commands in found.items()]
    return "Steps taken: " + ", ".join(parts[:-1]) + " and " + parts[-1] + "."


def _last_runs(a: Analysis, keep) -> list[Command]:
    """The latest run of each check: the same program and subcommand in the same directory is
    one check, whatever is piped after it (`npm run check | grep error` is `npm run check`)."""
    last: dict[tuple[str, tuple[str, ...]], Command] = {}
    for cmd in a.commands:
        where = re.match(r"\s*cd\s+(\S+)\s*&&", cmd.command)
        key = (where.group(1) if where else "", command_signature(cmd.command) or (cmd.command,))
        last.pop(key, None)
        last[key] = cmd
    return [c for c in sorted(last.values(), key=lambda c: c.index) if keep(c)]


def work_since_request(a: Analysis, *, brief: bool = False, listed: str = "") -> list[str]:
    """What the calls since the user's latest request achieved: each changed file once (how
    it was changed last), each command's latest successful run not in `listed` already.
    `brief`: names only."""
    latest: dict[str, tuple[int, str]] = {}
    edits: dict[str, int] = {}
    created: set[str] = set()
    # A commit's work is reported with the commit; git and tracker runs by the repository
    # state and the issue states.
    since = max([0, *(c.event for c in a.commits)])
    for step in a.steps:
        if not step.ok or step.kind not in ("change", "run") or step.event <= since:
            continue
        if step.kind == "run" and BOOKKEEPING_CMD_RE.match(step.call[step.call.find("`") + 1 :]):
            continue
        if step.kind == "change":
            if step.empty:
                created.add(step.path)
                continue  # nothing in it yet: Next Steps says it is to be written
            else:
                edits[step.path] = edits.get(step.path, 0) + 1
            count = edits.get(step.path, 0)
            verb = "created" if step.path in created else "edited"
            if step.path in created and count:
                verb += " and edited" + (f" {count} times" if count > 1 else "")
            elif count > 1:
                verb += f" {count} times"
            state = _edit_told(step)
            state = f"latest change: {state}" if count > 1 and state else state
            detail = f" ({state})" if state and not brief else ""
            key, text = step.path, f"`{a.rel(step.path)}` {verb}{detail}"
        else:
            if step.call[step.call.find("`") :] in listed:
                continue  # its run is reported already (a passing check under Done)
            verb = "passed" if step.check else "succeeded"
            what = f": {step.what}" if step.what and not brief else ""
            key, text = step.call, f"{step.call} {verb}{what}"
        latest.pop(key, None)
        latest[key] = (step.event, text)
    entries = [text for _event, text in sorted(latest.values())]
    limit = 3 if brief else MAX_WORK_SINCE_REQUEST
    more = len(entries) - limit
    return ([f"(+{more} earlier)"] if more > 0 and not brief else []) + entries[-limit:]


def _outputs_missing(a: Analysis, issue: Issue) -> list[str]:
    """The files the issue lists as new that nothing in the range wrote, edited, read or showed
    as changed: the part of the issue still to do however far its other work has gone."""
    known = [*a.files, *a.read, *(path for path, _event, _command in a.command_changes), *(a.tree or {})]
    return [
        output
        for output in issue.outputs
        if not any(p == output or p.endswith("/" + output) or output.endswith("/" + p) for p in known)
    ]


def _edit_told(step: Step) -> str:
    """An edit as the agent said it before making it ("update app.js to add the highlighter
    hook"), then what it added: the names alone tell a reader who continues cold which code
    changed, not what the change was for."""
    purpose = lower_first(_ORDER_WORD_RE.sub("", step.purpose.rstrip(".")))
    if not purpose:
        return step.what
    return f"{one_line(purpose, 120)} — {step.what}" if step.what else one_line(purpose, 120)


def _latest_request_named(a: Analysis) -> str:
    """The latest request as a short quote, or how to refer to it when it is the task itself."""
    requests = [u for u in a.users if u.kind != "chatter" and not u.queued]
    latest = next((u for u in reversed(a.users) if u.kind != "chatter"), None)
    if latest is not None and latest.queued:
        # Typed while the assistant worked on the turn: the latest request, as Goal names it,
        # though the turn's work began with the message before it.
        began = "the task (see Goal)" if len(requests) <= 1 else f'"{one_line(requests[-1].text, 60)}"'
        return f'the latest request ("{one_line(latest.text, 90)}", sent while the assistant was working on {began})'
    if not requests:
        return "the latest request"
    if len(requests) == 1 and not a.users[-1].queued:
        return "the task (see Goal)"  # a harness's task prompt is the goal, not a step to quote
    if requests[-1].hook:
        demand = one_line(hook_demand(requests[-1].text) or requests[-1].text, 90)
        return f'the {requests[-1].hook} hook\'s demand (sent by the harness: "{demand}")'
    return f'the latest request ("{one_line(requests[-1].text, 90)}")'


# "Then stop.", "and stop there", "nothing else": the user bounded the work.
STOP_RE = re.compile(
    r"(?i)(?:^|[.;,!]\s*|\b(?:then|and)\s+)(stop(?: there| after that| here)?|do nothing else|nothing (?:else|more))\b[^.!?\n]*[.!]?"
)


def _stop_order(a: Analysis) -> str:
    """The user's own words telling the agent to stop once the request is done."""
    requests = [u for u in a.users if u.kind != "chatter" and not u.queued and not u.hook]
    if not requests:
        return ""
    text = requests[-1].text
    match = STOP_RE.search(text)
    if not match:
        return ""
    start = max(text.rfind(".", 0, match.start(1)), text.rfind("\n", 0, match.start(1))) + 1
    return one_line(text[start : match.end()].strip(), 120)


def in_progress_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Work started and not finished at the end of the range."""
    for item in previous.get("in_progress", []):
        if item.lower().startswith(STATE_PREFIXES) or (a.todos and item.startswith("Todo in progress:")):
            continue
        if any(similar(item, n.text) for n in a.notes if n.kind == "report"):
            continue
        if any(f"`{i.id}`" in item for i in a.issues.values() if i.status == "closed"):
            continue
        s.add("in_progress", item, 72)
    pending = pending_commit(a) if a.commits else []
    untested = a.edits_since_test if a.tests_seen else []
    for issue in a.issues.values():
        if issue.status != "in_progress":
            continue
        title = f" ({issue.title})" if issue.title else ""
        state = []
        if pending:
            state.append("uncommitted changes to " + ", ".join(f"`{a.rel(p)}`" for p in pending[:5]))
        if untested:
            state.append("not tested since those edits")
        tail = f": {'; '.join(state)}" if state else " (not closed yet)"
        s.add("in_progress", f"Issue `{issue.id}`{title} is in progress{tail}", 86)
    if pending and not any(i.status == "in_progress" for i in a.issues.values()):
        files = ", ".join(f"`{a.rel(p)}`" for p in pending[:6])
        tested = "; not tested since" if untested else ""
        s.add("in_progress", f"Uncommitted edits since the last commit: {files}{tested}", 84)
    for status, content in a.todos:
        if status == "in_progress":
            s.add("in_progress", f"Todo in progress: {content}", 86)
    # Reports of the unfinished stretch after the last commit; with nothing left pending
    # they are what was learned after it, not work under way.
    if a.commits:
        pending_work = bool(pending) or any(not c.ok and c.fixed_by is None for c in a.commands[-3:])
        for note in [n for n in a.notes if n.unit == a.unit and n.kind == "diagnosis"][-4:]:
            if pending_work:
                s.add("in_progress", note.text, 74)
            else:
                s.add("done", f"Found: {note.text}", 70)
    final = [t for t in a.last_intents if not JUNK_INTENT_RE.search(t) and not is_sign_off(t)]
    # Only open work has a place where it stopped; after a finished piece the assistant's last
    # words are a report, and listing them as "in progress" would reopen what they mention.
    open_work = bool(s.items["in_progress"]) or any(not c.ok and c.fixed_by is None for c in a.commands[-3:])
    done = s.text_of("done")
    # The last words already listed under Done (a report ending the range) say nothing new.
    # So are words that Done gives as the reasons of the edits they led into.
    told = [normalize(_edit_told(step).split(" — ")[0]) for step in a.steps if step.purpose]
    told = [t for t in told if t and t in normalize(done)]
    said_before = a.final_text and all(
        normalize(t) in normalize(done) or any(p in normalize(t) for p in told) or not normalize(t).strip("…. ")
        for t in sentences(a.final_text)
    )
    handed_over = a.submitted is not None and bool(a.submitted[1].strip())
    if a.submitted is not None and not handed_over:
        s.add("in_progress", submission_note(a), 82)
    elif a.request_done:
        # Done lists the calls and what they did: what is missing is the agent's own report.
        s.add(
            "in_progress",
            f"Nothing is under way: the range ends inside the assistant's turn, after {len(a.steps)} tool "
            "call(s) since the user's latest message that all succeeded (see Done); its report of them is not in the range",
            70,
        )
    elif not a.turn_ended and a.steps and a.submitted is None:
        # The range ends inside the assistant's turn: what it had just done, and what came back.
        total = len(a.steps)
        count = f"{total} tool calls" if total > 1 else "one tool call"
        if work_since_request(a):
            # What they achieved is under Done: here only where the turn stood.
            latest = f"; what they changed and ran is under Done, and the latest was: {a.steps[-1].shown}"
        else:
            calls = "; ".join(_runs([step.shown for step in a.steps[-5:]]))
            which = ", and the latest of them were" if total > 5 else ", which were" if total > 1 else ", which was"
            latest = f"{which}: {calls}"
        s.add(
            "in_progress",
            f"The range ends inside the assistant's turn, after {count} since the user's latest message{latest}",
            79,
        )
    if a.final_text and a.activity_after_latest and not said_before:
        said = f'"{one_line(a.final_text, 700)}"'
        latest_text = a.texts[-1][1] if a.texts else 0
        acted = [step for step in a.steps if step.event > latest_text and step.kind != "look"]
        if a.request_done:
            # Said before the calls that carried it out: why the work was done, not what is next
            # (its lead-in to them, "Let me fix this:", says nothing once they are listed).
            said = re.sub(r"(?<=[.!?])\s*[^.!?\"]{1,40}:\"$", '"', said)
            s.add("done", f"What the assistant said before those calls: {said}", 66)
        else:
            # Words followed by calls that all went through were said before that work.
            before_calls = bool(acted) and all(step.ok for step in acted) and not a.turn_ended
            _add_last_words(s, a, said, open_work, handed_over, before_calls=before_calls)
    elif final and not a.request_done:
        s.add("in_progress", f"Working on: {final[-1]}", 78)


def _add_last_words(
    s: Sections, a: Analysis, said: str, open_work: bool, handed_over: bool, *, before_calls: bool
) -> None:
    """The assistant's last words: where the work stopped, or its report of finished work."""
    # Without commits or issues to tell, the last words say whether the work is finished;
    # a turn that ended on them (no tool call after) handed the word back to the user.
    finished_by_words = not (a.commits or a.issues) and bool(FINISHED_RE.search(a.final_text))
    if open_work or not (a.commits or a.issues or finished_by_words or a.turn_ended or handed_over):
        if before_calls:
            s.add("in_progress", f"Before its latest calls the assistant said: {said}", 80)
        else:
            s.add("in_progress", f"Where the work stopped, in the assistant's words: {said}", 80)
    else:
        s.add("done", f"The assistant's last words in this range: {said}", 76)


def _runs(calls: list[str]) -> list[str]:
    """The same call made several times in a row, said once with its count."""
    out: list[str] = []
    counts: list[int] = []
    for call in calls:
        if out and out[-1] == call:
            counts[-1] += 1
        else:
            out.append(call)
            counts.append(1)
    return [f"{call} (×{n})" if n > 1 else call for call, n in zip(out, counts, strict=True)]


def settled_point(a: Analysis) -> int:
    """Before this event a failure nobody retried was worked around: the work was committed
    after it, or the user has since asked for something else."""
    commits = [c.event for c in a.commits if c.subject]
    requests = [u.event for u in a.users if u.kind != "chatter" and not u.queued]
    return max([0, *commits[-1:], *requests[-1:]])


def blocked_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Failures nothing later in the range fixed: the exact line and the command."""
    settled = settled_point(a)
    failing = _last_runs(a, lambda c: not c.ok and c.fixed_by is None and c.event > settled)
    failing = [c for c in failing[:-MAX_OPEN_ERRORS] if s.is_focus(c.command + " ".join(c.errors))] + failing[
        -MAX_OPEN_ERRORS:
    ]
    for index, cmd in enumerate(failing):
        line = cmd.errors[0] if cmd.errors else cmd.detail
        s.add(
            "blocked", f"`{one_line(cmd.shown, COMMAND_CHARS)}` failed: {line}", 80 + 10 * recency(index, len(failing))
        )
    succeeded = {tuple(c.command.split()[:2]) for c in a.commands if c.ok}
    for item in previous.get("blocked", []):
        command = re.match(r"^`([^`]+)`", item)
        if command and tuple(command.group(1).split()[:2]) in succeeded:
            continue  # fixed in this range
        s.add("blocked", item, 70)


def decisions_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Decisions with their reason; a later one on the same subject replaces the earlier."""
    decisions: list[str] = []
    for text in [*previous.get("decisions", []), *a.decisions]:
        decisions = [d for d in decisions if not _same_subject(d, text)]
        decisions.append(text)
    decisions = decisions[-MAX_DECISIONS:]
    for index, text in enumerate(decisions):
        s.add("decisions", text, 50 + 20 * recency(index, len(decisions)))
    if a.plan_title:
        steps = "; ".join(a.plan_steps[:6])
        s.add("decisions", f"Plan approved by the user: {a.plan_title}" + (f" — {steps}" if steps else ""), 76)


# Words every decision shares: they say nothing about its subject.
_DECISION_WORDS = frozenset(
    "from approved plan because instead rather than since keep use i'll will actually decided chose going".split()
)


def _same_subject(a: str, b: str) -> bool:
    """Two decisions about the same thing: the later one replaces the earlier."""
    wa, wb = content_words(a) - _DECISION_WORDS, content_words(b) - _DECISION_WORDS
    return bool(wa and wb) and len(wa & wb) / min(len(wa), len(wb)) >= 0.6


def next_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Next steps from what is open at the end of the range, never from what is done."""
    requests = [u for u in a.users if u.kind != "chatter"]
    closed = {i.id for i in a.issues.values() if i.status == "closed"}
    if requests and a.users and a.users[-1].kind != "chatter" and not a.activity_after_latest:
        latest = requests[-1]
        if latest.hook:
            s.add("next", f"Do what {latest.hook_asks(300)}", 90)
        else:
            s.add("next", f'Answer the user\'s latest message: "{quote(latest.text, 200)}"', 90)
    for issue in a.issues.values():
        if issue.status == "in_progress":
            # In Progress, just above, names it with its title.
            title = f" ({issue.title})" if issue.title and issue.title not in s.text_of("in_progress") else ""
            steps = []
            missing = _outputs_missing(a, issue)
            if missing:
                names = ", ".join(f"`{p}`" for p in missing)
                steps.append(f"create {names} (the issue lists {'it' if len(missing) == 1 else 'them'} as new)")
            if (a.edits_since_test or missing) and a.tests_seen:
                steps.append("run the checks")
            if (pending_commit(a) or missing) and a.commits:
                steps.append("commit")
            steps.append(f"close `{issue.id}`")
            # The agent's practice: commits it pushed before, it pushes again (the branch is
            # under Repository State; its name may be a closed issue's).
            if "commit" in steps and any(c.pushed_to for c in a.commits):
                steps.append("push (as the earlier commits were)")
            s.add("next", f"Finish `{issue.id}`{title}: " + ", then ".join(steps), 88)
    if a.request_done:
        done = "; ".join(work_since_request(a, brief=True))
        stop = _stop_order(a)
        then = "report the result to the user" + (
            f'; the user said "{stop}": do nothing further' if stop else " and wait for the user's next message"
        )
        # Edited since the request with no test or build after: "finished" is the agent's
        # guess, and the reader must know nothing confirmed it.
        edited = {step.path for step in a.steps if step.kind == "change" and step.ok}
        unchecked = [p for p in a.edits_since_test if p in edited]
        checked = ""
        if unchecked:
            files = ", ".join(f"`{a.rel(p)}`" for p in unchecked[:5])
            checked = f" but is not checked (no test or build ran after the edits to {files})"
        s.add(
            "next",
            f"The work for {_latest_request_named(a)} appears finished ({done}; see Done){checked}: "
            f"check it against the request, {then}",
            92,
        )
    owed = owed_git_steps(a) if a.steps and not a.turn_ended else []
    if owed and any(step.ok and step.kind == "change" for step in a.steps):
        latest = [u for u in a.users if not u.queued and u.kind != "chatter"][-1]
        what = "the commits" if owed == ["push"] else "the changes"
        if latest.hook:
            demand = one_line(hook_demand(latest.text), 200)
            s.add(
                "next",
                f"{' and '.join(owed).capitalize()} {what}: the {latest.hook} hook (sent by the harness) "
                f'blocks the stop until then ("{demand}")',
                90,
            )
        else:
            asked = one_line(latest.text, 120)
            s.add("next", f'{" and ".join(owed).capitalize()} {what}, as the user asked ("{asked}")', 90)
    filled = {step.path for step in a.steps if step.kind == "change" and step.ok and not step.empty}
    for step in a.steps:
        if step.kind == "change" and step.ok and step.empty and step.path not in filled:
            s.add("next", f"Write the content of `{a.rel(step.path)}` (created by the latest calls, still empty)", 89)
    for status, content in a.todos:
        if status not in ("completed", "in_progress"):
            s.add("next", f"Todo: {content}", 85)
    failing = [i for i in s.items["blocked"] if i.text.startswith("`")]
    if failing:
        names = ", ".join(i.text.split(" failed:")[0] for i in failing[-3:])
        s.add("next", f"Fix what still fails: {names}", 84)
    if not any(i.status == "in_progress" for i in a.issues.values()):
        tests = [c for c in a.commands if TEST_RE.search(c.command)]
        tests = [c for c in tests if re.search(r"\btest", c.command)] or tests
        if a.edits_since_test and tests:
            files = ", ".join(f"`{a.rel(p)}`" for p in a.edits_since_test[:6])
            s.add(
                "next", f"Re-run the checks (last: `{one_line(tests[-1].command, 120)}`) for the edits to {files}", 80
            )
        if pending_commit(a) and a.commits:
            files = ", ".join(f"`{a.rel(p)}`" for p in pending_commit(a)[:6])
            s.add("next", f"Commit the changes made after the last commit: {files}", 78)
    plan = [
        t
        for t in a.last_intents
        if not JUNK_INTENT_RE.search(t) and len(t) >= 25 and FUTURE_RE.search(t) and not _mentions_only(t, closed)
    ]
    for text in plan[-3:]:
        s.add("next", text, 79)
    for issue in open_issues_in_order(a)[:6]:
        title = f" ({issue.title})" if issue.title else ""
        waiting = [b for b in issue.blocked_by if b in a.issues and a.issues[b].status != "closed" and b != issue.id]
        # Its epic is no blocker to speak of: the child is part of it.
        waiting = [b for b in waiting if not issue.id.startswith(b + ".")]
        after = f" (after {', '.join(f'`{b}`' for b in waiting)})" if waiting else ""
        children = [i.id for i in open_issues_in_order(a) if i.id.startswith(issue.id + ".")]
        children += [i for i in a.issues if i.startswith(issue.id + ".") and a.issues[i].status == "in_progress"]
        if children:
            names = ", ".join(f"`{c}`" for c in children)
            s.add("next", f"Then the open issue `{issue.id}`{title}, once its open children ({names}) are closed", 70)
            continue
        s.add("next", f"Then the open issue `{issue.id}`{title}{after}", 70)
    own_plan = bool(s.items["next"])
    for item in previous.get("next", []):
        if item.lower().startswith(STATE_PREFIXES) or _mentions_only(item, closed):
            continue
        if not own_plan or item.startswith("Todo: "):
            s.add("next", item, 40)
    finished = FINISHED_RE.search(a.final_text)
    settled = not s.items["in_progress"] and not s.items["blocked"]
    if a.submitted is not None and not a.submitted[1].strip():
        s.add("next", f"Find out whether `{a.submitted[0]}` went through (its answer is not in this range)", 86)
    elif not s.items["next"] and a.submitted is not None and settled:
        s.add(
            "next",
            f"Nothing is left for the agent: the work was handed over with `{a.submitted[0]}`; "
            "what follows is the user's (or the harness's) verdict on it",
            72,
        )
    elif not s.items["next"] and (finished or a.turn_ended) and settled:
        count = len(a.edits_since_commit)
        files = f"{count} edited {'file' if count == 1 else 'files'}"
        # Finished is not committed: an engineer checks git before touching it. Without a
        # commit or git in sight, "not committed" would be a guess.
        if not count:
            pending = ""
        elif a.commits or a.git_seen:
            pending = f" ({files} {'is' if count == 1 else 'are'} not committed)"
        else:
            pending = f" ({files}, no commit seen)"
        how = "reported the work finished" if finished else "ended its turn with the reply quoted above"
        s.add("next", f"Nothing is left open: the assistant {how}{pending}; wait for the user's next message", 72)
    elif not s.items["next"] and requests:
        if len([u for u in requests if not u.queued]) == 1 and not requests[-1].queued:
            # The only request is the task itself (a harness's prompt, quoted under Goal):
            # quoting it again says nothing about where the work stands.
            submit = handover_command(a)
            then = f"; when it is done, hand it over with `{submit}`, as the task says" if submit else ""
            s.add(
                "next", f"Continue the task stated under Goal from where the work stopped (see In Progress){then}", 72
            )
        elif requests[-1].hook:
            # The harness's words, not the user's: what the hook demands, as the hook's.
            s.add("next", f"Do what {requests[-1].hook_asks(300)}", 72)
        else:
            s.add("next", f'Continue with the user\'s latest request: "{one_line(requests[-1].text, 200)}"', 72)


def open_issues_in_order(a: Analysis) -> list:
    """The open issues in the order they come up: the children of an epic before the epic (it
    closes when they are done), those nothing open blocks first, then by their number."""
    unfinished = {i.id for i in a.issues.values() if i.status != "closed"}

    def has_open_children(issue_id: str) -> bool:
        return any(other.startswith(issue_id + ".") for other in unfinished)

    def blocked(issue) -> bool:
        return any(b in unfinished and not issue.id.startswith(b + ".") for b in issue.blocked_by)

    def number(issue_id: str) -> list[int]:
        return [int(part) if part.isdigit() else 0 for part in issue_id.split(".")[1:]]

    opened = [i for i in a.issues.values() if i.status in ("open", "ready", "blocked")]
    children = [i for i in opened if not has_open_children(i.id)]
    epics = [i for i in opened if has_open_children(i.id)]
    return sorted(children, key=lambda i: (blocked(i) or i.status == "blocked", number(i.id))) + epics


# The assistant's last words report the work finished.
FINISHED_RE = re.compile(
    r"(?i)\b(complete[ds]?|done|finished|all .{0,40}\b(pass|passing|green)|committed|pushed|created|"
    r"ha(?:s|ve) been (?:\w+ly )?\w+(?:ed|en|ne)|has been .{0,30}(ported|fixed|implemented|resolved))\b"
)


def _mentions_only(text: str, closed: set[str]) -> bool:
    """A step about issues that are all closed by now."""
    ids = re.findall(r"[A-Za-z][\w-]*-[\w]+(?:\.\d+)*", text)
    mentioned = [i for i in ids if i in closed]
    return bool(mentioned) and len(mentioned) == len([i for i in ids if "." in i or i in closed])


def repo_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Commits with hashes, what is pushed, what is not committed, the branch."""
    for item in previous.get("repo", []):
        if item.lower().startswith(("commit", "earlier commit")):
            s.add("repo", item if item.lower().startswith("earlier") else f"Earlier {item[0].lower()}{item[1:]}", 58)
    if a.branch:
        s.add("repo", f"Branch: `{a.branch}`", 75)
    for commit in a.commits:
        subject = f' "{commit.subject}"' if commit.subject else ""
        pushed = f" (pushed to `{commit.pushed_to}`)" if commit.pushed_to else " (not pushed)"
        s.add("repo", f"Commit `{commit.hash}`{subject}{pushed}", 82 if s.focus else 74)
    since = max([0, *(c.event for c in a.commits)])
    deleted = [w.path for w in a.files.values() if w.deleted and not w.written and w.last_event > since]
    deleted += [path for path, event in a.deleted if event > since]
    tree = uncommitted_changes(a)
    if tree is not None and a.submitted is None:
        s.add("repo", _tree_line(a, tree), 83)
        shown = {a.rel(p).lstrip("./") for p, _state in tree}
        deleted = [p for p in deleted if a.rel(p).lstrip("./") not in shown]
        if deleted:
            s.add("repo", "Deleted: " + ", ".join(f"`{a.rel(p)}`" for p in deleted[:10]), 80)
    elif a.commits or a.edits_since_commit or deleted:
        pending = a.edits_since_commit if a.commits else [p for p in a.edits_since_commit if not a.files[p].deleted]
        files = ", ".join(f"`{a.rel(p)}`" for p in pending[:10])
        files += f" (+{len(pending) - 10} more)" if len(pending) > 10 else ""
        if pending and a.commits:
            s.add("repo", f"Uncommitted edits: {files}", 83)
        elif pending and a.submitted is not None and _patch_files(a.submitted[1]):
            s.add("repo", f"No commit in this range; the changes went out with `{a.submitted[0]}`: {files}", 83)
        elif pending:
            # Without a commit in sight, "uncommitted" would be a guess about git.
            git = "" if a.git_seen else " (no git command was run)"
            s.add("repo", f"Changed in this range, no commit seen{git}: {files}", 83)
        elif a.commits:
            s.add("repo", "No edits after the last commit.", 70)
        if deleted:
            s.add("repo", "Deleted: " + ", ".join(f"`{a.rel(p)}`" for p in deleted[:10]), 80)
    for edits, tracked in a.stashed:
        # Put away, not gone: `git stash pop` brings them back.
        stashed = list(dict.fromkeys([*edits, *tracked]))
        if stashed:
            files = ", ".join(f"`{a.rel(p)}`" for p in stashed[:10])
            s.add("repo", f"Stashed (`git stash`, not popped in this range): {files}", 82)


_TREE_STATES = ("staged", "modified", "deleted", "untracked")


def _tree_line(a: Analysis, tree: list[tuple[str, str]]) -> str:
    """What is not committed, in git's words: the latest `git status` (or `git diff --stat`)
    of the range, less what later commits took, then the files edited after it."""

    def names(paths: list[str]) -> str:
        more = f" (+{len(paths) - 10} more)" if len(paths) > 10 else ""
        return ", ".join(f"`{a.rel(p)}`" for p in paths[:10]) + more

    later = ", minus what later commits took" if any(c.event > a.tree_event for c in a.commits) else ""
    source = f"per the latest `{a.tree_source}`{later}"
    groups = [f"{state} {names(paths)}" for state in _TREE_STATES if (paths := [p for p, st in tree if st == state])]
    later_parts = [f"edited {names(edited)}"] if (edited := [p for p, st in tree if st == "edited"]) else []
    # Changed by a command after it (`npm install x`): named with the command.
    for state in dict.fromkeys(st for _p, st in tree if st.startswith("changed by ")):
        later_parts.append(f"{state}: {names([p for p, st in tree if st == state])}")
    if not groups:
        if not later_parts:
            return f"Nothing uncommitted ({source})"
        return f"Uncommitted changes: {'; '.join(later_parts)}; nothing else was pending {source}"
    after = f"; after it: {'; '.join(later_parts)}" if later_parts else ""
    return f"Not committed ({source}): " + "; ".join(groups) + after


def pending_commit(a: Analysis) -> list[str]:
    """Tracked files whose changes are not committed: git's latest word on them when the range
    shows one, else the files edited since the last commit. Untracked files are no part of it:
    they may be build output to ignore rather than commit."""
    tree = uncommitted_changes(a)
    if tree is None:
        return a.edits_since_commit
    return [path for path, state in tree if state != "untracked"]


_CHANGE_TOOL_RE = re.compile(r"(?i)edit|write|replace|patch|create|insert")


def errors_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Each failure once: its exact error lines, what the agent concluded, how it was fixed."""
    blocked = s.text_of("blocked")
    settled = settled_point(a)
    entries: list[tuple[str, bool]] = []  # (text, fixed)
    for cmd in a.commands:
        if cmd.ok:
            continue
        lines = list(dict.fromkeys(cmd.errors))[:2] or ([cmd.detail] if cmd.detail else [])
        if not lines:
            continue
        said = " | ".join(lines)
        if cmd.fixed_by is None and said in blocked:
            continue
        why = f" — {cmd.diagnosis.rstrip('.')}" if cmd.diagnosis else ""
        code = EXIT_CODE_RE.search(cmd.output_head)
        status = f" (exit code {code.group(2)})" if code else ""
        if cmd.fixed_by is not None:
            fixed = "; ".join(cmd.fix_notes)
            entries.append((f"`{one_line(cmd.shown, 100)}` failed{status}: {said}{why} — fixed: {fixed}", True))
        elif cmd.event <= settled:
            moved_on = (
                f"`{one_line(cmd.shown, 100)}` failed{status}: {said}{why} — not retried; the work went on past it"
            )
            entries.append((moved_on, True))
        else:
            entries.append((f"Still failing: `{one_line(cmd.shown, 100)}`{status}: {said}{why}", False))
    printed: set[tuple[str, str]] = set()
    passing: list[str] = []
    for error in a.errors:
        if error.command is not None and error.command.ok:
            # The program, not its arguments: `python3 -c "…"` on two files, one missing module.
            seen = (error.command.command.split(maxsplit=1)[0], error.line)
            if seen in printed:
                continue  # the same line printed again says nothing new
            printed.add(seen)
            # Printed by a command that exited cleanly: a real error line all the same.
            state = f" — {error.how}" if error.how else ""
            entries.append((f"`{one_line(error.command.shown, 100)}` printed: {error.line}{state}", error.resolved))
        elif error.command is None:
            if not _CHANGE_TOOL_RE.search(error.tool) and (error.resolved or error.event <= settled):
                # A read refused (too large: read in parts) or a helper that failed once, with
                # the work carried on past it: no error to fix, so not among them; its line
                # stays findable in one line of its own. A refused edit is kept: it says what
                # the change had to get right.
                how = f" ({error.how})" if error.resolved and error.how else ""
                context = f"{one_line(error.context, 90)} → " if error.context else ""
                passing.append(f"{error.tool or 'tool'}: {context}{one_line(error.line, 110)}{how}")
                continue
            state = f" — {error.how}" if error.resolved else ""
            tool = f"The {error.tool} tool" if error.tool else "A tool call"
            context = f"{error.context} → " if error.context else ""
            entries.append((f"{tool} failed: {context}{error.line}{state}", error.resolved))
    fixed = [t for t, ok in entries if ok]
    open_ = [t for t, ok in entries if not ok]
    fixed = [t for t in fixed[:-MAX_FIXED_ERRORS] if s.is_focus(t)] + fixed[-MAX_FIXED_ERRORS:]
    open_ = [t for t in open_[:-MAX_OPEN_ERRORS] if s.is_focus(t)] + open_[-MAX_OPEN_ERRORS:]
    for index, text in enumerate(fixed):
        s.add("errors", text, 50 + 15 * recency(index, len(fixed)))
    for index, text in enumerate(open_):
        s.add("errors", text, 62 + 20 * recency(index, len(open_)))
    for item in previous.get("errors", [])[-MAX_PREVIOUS_CRITICAL:]:
        s.add("errors", item, 45)
    if passing:
        listed = "; ".join(dict.fromkeys(passing[-4:]))
        s.add("critical", f"Tool calls refused along the way, with no consequence: {listed}", 40)


def files_section(s: Sections, a: Analysis, previous: dict[str, list[str]]) -> None:
    """Files changed, each with what was done to it and why (the agent's stated purpose)."""
    for item in previous.get("files", [])[-MAX_PREVIOUS_CRITICAL:]:
        s.add("files", item, 42)
    works = sorted(a.files.values(), key=lambda w: w.last_event)[-MAX_FILES:]
    committed_at = {c.unit: c.hash for c in a.commits if c.subject}
    for index, work in enumerate(works):
        # One sentence: what was done to the file, where it stands, and what it was for —
        # "`a.ex` was edited twice and is committed in `3bb8701`, to extract a helper".
        if not work.edits:
            refused = "once" if work.rejected == 1 else f"{work.rejected} times"
            s.add("files", f"`{a.rel(work.path)}`: an edit was refused {refused}; the file is unchanged", 50)
            continue
        times = {1: "once", 2: "twice"}.get(work.edits, f"{work.edits} times")
        more = work.edits - 1
        then = f", then edited {'once more' if more == 1 else f'{more} more times'}" if more else ""
        what = f"written{then}" if work.written else f"edited {times}"
        if work.rejected:
            what += f" (after {work.rejected} refused attempt{'s' if work.rejected > 1 else ''})"
        if work.deleted:
            what += ", then deleted: nothing of it remains" if work.written else ", then deleted"
        in_repo = not a.root or work.path.startswith(a.root + "/") or not work.path.startswith(("/", "~"))
        if a.commits and in_repo:
            commits = [committed_at[u] for u in sorted(work.units) if u in committed_at]
            pending = work.path in a.edits_since_commit
            if commits:
                what += " and is committed in " + ", ".join(f"`{h}`" for h in commits)
                what += ", with uncommitted changes since" if pending else ""
            elif pending:
                what += " and is not committed yet"
        purposes = [lower_first(_ORDER_WORD_RE.sub("", p.rstrip("."))) for p in work.purposes[-2:]]
        said = ", to " + ", and to ".join(purposes) if purposes else ""
        names = [n for n in work.added if len(n) >= 5][:4]
        if said and not work.written:
            # What the edits were for leads; a few of the names they added follow, so a reader
            # who searches the code finds where ("to add thinking rows (`thinking_row`)"). A
            # written file's names are all it defines: its module, not what the words were about.
            unsaid = [n for n in names if n.lower() not in said.lower()][:MAX_NAMES_AFTER_PURPOSE]
            said += " (" + ", ".join(f"`{n}`" for n in unsaid) + ")" if unsaid else ""
        noted = _mention(a, work.path)
        if noted and not said:
            said = f'; the agent noted: "{noted}"'
        if work.latest_code and work.edits == 1 and not work.written and not said:
            said = f"; the edit adds `{work.latest_code}`"
        elif names and not said:
            said = "; it adds " + ", ".join(f"`{n}`" for n in names)
        s.add("files", f"`{a.rel(work.path)}` was {what}{said}", 52 + 14 * recency(index, len(works)))
    reads = [(p, a.read_purposes.get(p, "")) for p in a.read if p not in a.files]
    reads = [(p, why, _mention(a, p)) for p, why in reads if why or _mention(a, p)][-10:]
    for path, why, noted in reads:
        said = f'; the agent noted: "{noted}"' if noted else f", to {lower_first(why)}"
        s.add("files", f"`{a.rel(path)}` was read, not changed{said}", 44)


# "Add the attribute first": the order word belonged to the moment, not to the file's purpose.
_ORDER_WORD_RE = re.compile(r"(?i),?\s+(first|now|next|then|too|as well|again)$")


def _mention(a: Analysis, path: str) -> str:
    """The agent's latest statement naming this file, if it made one."""
    return a.file_mentions.get(path.rsplit("/", 1)[-1].lower(), "")


_HOME_PATH_RE = re.compile(r"^(?:/Users|/home)/[^/]+/")


def _elsewhere_home(a: Analysis, path: str) -> bool:
    """A path in someone's home directory outside the project (the reporter's machine in a
    pasted traceback): no file the agent can open, and the project has its own copy."""
    if not _HOME_PATH_RE.match(path):
        return False
    here = [d for d in (a.root, a.cwd) if d]
    touched = {*a.read, *a.modified, *a.files}
    return not any(path.startswith(d.rstrip("/") + "/") for d in here) and path not in touched


def critical_section(s: Sections, a: Analysis, previous: dict[str, list[str]], instructions: str | None) -> None:
    """Everything else an agent needs verbatim: focus, issue states, paths, URLs, events."""
    if instructions and instructions.strip():
        note = " (items about it are listed first and kept first when trimming)" if s.focus else ""
        s.add("critical", f"Compaction focus requested: {one_line(instructions, 300)}{note}", 100, protected=True)
    prev_critical = [
        i
        for i in previous.get("critical", [])
        if not i.lower().startswith(("commands run", "other commands", "issue states", "compaction focus requested"))
    ][-MAX_PREVIOUS_CRITICAL:]
    for index, item in enumerate(prev_critical):
        s.add("critical", item, 42 + 8 * recency(index, len(prev_critical)))
    for issue in a.issues.values():
        if issue.status != "closed" and issue.description:
            s.add("critical", f"Open issue `{issue.id}`: {issue.description}", 74)
    if a.issues:
        # A title is said once: In Progress and Next Steps name the open issues with theirs.
        titled = s.text_of("in_progress", "next", "done")
        states = ", ".join(
            f"`{i.id}` {i.status or 'seen'}"
            + (f" ({i.title})" if i.title and i.status != "closed" and i.title not in titled else "")
            for i in a.issues.values()
        )
        s.add("critical", f"Issue states at the end of this range: {states}", 72)
    for what in dict.fromkeys(a.rejections):
        s.add("critical", f"The user rejected the {what}; it did not run", 58)
    if a.interruptions:
        times = "once" if a.interruptions == 1 else f"{a.interruptions} times"
        s.add("critical", f"The user interrupted the assistant's request {times} (Request interrupted by user)", 50)
    user_paths = [p for p in dict.fromkeys(a.user_paths) if not _elsewhere_home(a, p)]
    if user_paths:
        s.add("critical", "Paths named by the user: " + ", ".join(user_paths), 88)
    if a.urls:
        urls = list(dict.fromkeys(u.rstrip(".,") for u in a.urls))[:8]
        s.add("critical", "URLs mentioned: " + ", ".join(urls), 56)
    if a.env:
        values = ", ".join(f"`{k}={v}`" for k, v in list(a.env.items())[:8])
        s.add("critical", f"Environment values the commands used: {values}", 56)
    shown = s.text_of("done", "blocked", "errors", "repo")
    every_section = s.text_of(*s.items).lower()
    latest: dict[tuple[str, ...], str] = {}
    for cmd in reversed(a.commands):
        head = command_signature(cmd.command)
        # Named already, by its first words, where it was run for a reason: no second listing.
        opening = " ".join(cmd.full.split()[:2]).lower()
        listed_already = step_command(cmd.command) in shown or cmd.shown in shown or opening in every_section
        # An issue closed is stated with the issue (Done, issue states): not a command to list.
        listed_already = listed_already or bool(dict(STEP_KINDS)["closed the issue"].search(cmd.command) and cmd.ok)
        if head and head not in latest and not GIT_COMMIT_RE.search(cmd.full) and not listed_already:
            latest[head] = cmd.shown
    if latest:
        listed = "; ".join(f"`{one_line(c, 70)}`" for c in list(latest.values())[:MAX_COMMANDS])
        more = f" (+{len(latest) - MAX_COMMANDS} more)" if len(latest) > MAX_COMMANDS else ""
        s.add("critical", f"Other commands run (latest of each kind, newest first): {listed}{more}", 35)


# "`mdLink`: `#b5bd68`", "`mdLink` is now `#666666`", "Changed `dimGray` from `#585858` to `#666666`".
_SETTING_RE = re.compile(
    r"`([\w.-]+)`\s*(?::|=|→| is now| now uses| set to)\s*`?(#?[\w.#-]+)`?"
    r"|`([\w.-]+)`\s+from\s+`?[^`\s]+`?\s+to\s+`?(#?[\w.#-]+)`?"
)


def _settings_in(text: str) -> list[tuple[str, str]]:
    return [
        (m.group(1) or m.group(3), (m.group(2) or m.group(4)).strip("`.,").lower()) for m in _SETTING_RE.finditer(text)
    ]


def drop_superseded_values(s: Sections) -> None:
    """A setting reported done twice with different values ("`mdLink`: `#b5bd68`", later
    "`mdLink` is now `#666666`") keeps only its newest value: the older report of it goes,
    list item by list item; a line left with nothing goes, and a lead-in left without lines."""
    newest: dict[str, str] = {}
    kept: list[Item] = []
    for item in reversed(s.items["done"]):
        parts = item.text.split("; ")
        keep = []
        for index, part in enumerate(parts):
            found = _settings_in(part)
            if found and all(key in newest and newest[key] != value for key, value in found):
                lead = re.match(r"^([^`;]{3,80}?):\s+`", part) if index == 0 else None
                if lead:
                    keep.append(lead.group(1) + ":")  # the list's lead-in stays with the rest
                continue
            keep.append(part)
        for key, value in _settings_in(item.text):
            newest.setdefault(key, value)
        if len(keep) < len(parts) or (keep != parts):
            if not [p for p in keep if not p.endswith(":")]:
                continue  # every value it reported was changed again later
            item.text = "; ".join(keep).replace(":; ", ": ")
        kept.append(item)
    kept.reverse()
    s.items["done"] = [
        item
        for index, item in enumerate(kept)
        if item.nested or not item.text.endswith(":") or (index + 1 < len(kept) and kept[index + 1].nested)
    ]


def build_sections(a: Analysis, *, previous_summary: str | None, instructions: str | None) -> Sections:
    s = Sections(focus_words(instructions))
    previous = parse_summary_sections(previous_summary) if previous_summary else {}
    _merge_previous_issues(a, previous.get("critical", []))
    goal_section(s, a, previous)
    user_messages_section(s, a, previous)
    constraints_section(s, a, previous)
    done_section(s, a, previous)
    in_progress_section(s, a, previous)
    drop_superseded_values(s)
    blocked_section(s, a, previous)
    decisions_section(s, a, previous)
    next_section(s, a, previous)
    repo_section(s, a, previous)
    errors_section(s, a, previous)
    files_section(s, a, previous)
    critical_section(s, a, previous, instructions)
    return s


_PREV_ISSUE_RE = re.compile(r"`([^`]+)` (\w+)(?: \(([^)]*)\))?")


def _merge_previous_issues(a: Analysis, critical: list[str]) -> None:
    """Issue states a previous summary recorded, updated by what this range did."""
    from compaction.core.summarizers.extractive.analysis import Issue

    for item in critical:
        if item.startswith(("Issue states", "Issue states at the end of this range")):
            for issue_id, status, title in _PREV_ISSUE_RE.findall(item.split(":", 1)[1]):
                if issue_id not in a.issues:
                    a.issues[issue_id] = Issue(issue_id, status, -1, title=title)
    # Previous states first, this range's after them.
    a.issues = dict(sorted(a.issues.items(), key=lambda kv: kv[1].event))


# ---------------------------------------------------------------------------- rendering


def _ordered(items: list[Item]) -> list[Item]:
    # Focus items first (best match first); otherwise in the order added (chronological).
    return sorted(items, key=lambda i: -i.focus_score) if any(i.focus_score for i in items) else items


def render(s: Sections) -> str:
    def bullets(key: str, prefix: str = "- ", empty: str = "- (none)") -> list[str]:
        out = []
        for i in _ordered(s.items[key]):
            out.append(f"  - {i.text}" if i.nested else f"{prefix}{i.text}")
        return out or ([empty] if empty else [])

    goal = s.items["goal"]
    lines = ["## Goal", *([i.text for i in goal[:1]] + [f"- {i.text}" for i in goal[1:]] or ["(not stated)"])]
    if s.items["user_messages"] or s.users_not_shown:
        # Whenever messages are left out the reader is told so: a rule among them is not lost
        # without trace.
        hidden = s.users_not_shown
        marker = [f"- ({hidden} of the user's messages in this range are not shown here)"] if hidden else []
        lines += ["", "### User Messages (oldest first)", *marker, *bullets("user_messages", empty="")]
    lines += ["", "## Constraints & Preferences", *bullets("constraints", empty="- (none stated by the user)"), ""]
    lines += ["## Progress", "### Done", *bullets("done"), ""]
    lines += ["### In Progress", *bullets("in_progress"), ""]
    lines += ["### Blocked", *bullets("blocked"), ""]
    lines += ["## Key Decisions", *bullets("decisions"), ""]
    lines += ["## Next Steps", *[f"{n}. {i.text}" for n, i in enumerate(_ordered(s.items["next"]), 1)]]
    if not s.items["next"]:
        lines.append("1. (none recorded)")
    lines += ["", "## Critical Context"]
    for key, heading in (("repo", "Repository State"), ("errors", "Errors and Fixes"), ("files", "Files")):
        if s.items[key]:
            lines += [f"### {heading}", *bullets(key), ""]
    if s.items["critical"]:
        if any(s.items[k] for k in ("repo", "errors", "files")):
            lines.append("### Other")
        lines += bullets("critical")
    elif not any(s.items[k] for k in ("repo", "errors", "files")):
        lines.append("- (none)")
    return "\n".join(lines).rstrip()


def _size(s: Sections) -> tuple[int, int]:
    text = render(s)
    return count_text(text), len(text)


def _apply_drops(s: Sections, dropped: set[int]) -> None:
    for key in s.items:
        kept: list[Item] = []
        parent_dropped = False
        for item in s.items[key]:
            nested = item.nested
            if not nested:
                parent_dropped = id(item) in dropped
            # A nested line goes with its parent line.
            if id(item) in dropped or (nested and parent_dropped):
                continue
            kept.append(item)
        # A lead-in ("For "make it dimmer":") whose lines all went says nothing on its own.
        s.items[key] = [
            item
            for index, item in enumerate(kept)
            if item.nested or not item.text.endswith(":") or (index + 1 < len(kept) and kept[index + 1].nested)
        ]


def _drop_until(s: Sections, budget: int, max_chars: int, candidates: list[Item]) -> bool:
    """Drop `candidates` in order until the rendering fits; True when it does."""
    tokens, chars = _size(s)
    dropped: set[int] = set()
    for item in candidates:
        if tokens <= budget and chars <= max_chars:
            _apply_drops(s, dropped)
            tokens, chars = _size(s)
            if tokens <= budget and chars <= max_chars:
                return True
        dropped.add(id(item))
        tokens -= item.tokens
        chars -= len(item.text) + 3
    _apply_drops(s, dropped)
    tokens, chars = _size(s)
    return tokens <= budget and chars <= max_chars


def fit_budget(s: Sections, budget: int, max_chars: int = MAX_BODY_CHARS) -> str:
    """Fit the summary into `budget` tokens and `max_chars` characters.

    1. drop ordinary items, least important (then oldest) first;
    2. shorten long quotes and goal lines to their first SHORT_QUOTE_CHARS characters;
    3. drop the user's rules too, oldest and least important first — a summary over its
       budget is worse than one that lost an old rule (the chain would reject it);
    4. as a last resort cut even the goal lines.
    """
    tokens, chars = _size(s)
    if tokens <= budget and chars <= max_chars:
        return render(s)
    order = 0
    ordinary: list[tuple[float, int, Item]] = []
    rules: list[tuple[float, int, Item]] = []
    for items in s.items.values():
        for item in items:
            item.tokens = count_text(item.text) + 3
            if item.protected:
                continue
            (rules if item.priority >= RULE_PRIORITY else ordinary).append((item.priority, order, item))
            order += 1
    ordinary.sort(key=lambda c: (c[0], c[1]))
    if _drop_until(s, budget, max_chars, [c[2] for c in ordinary]):
        return render(s)
    for item in sorted((i for v in s.items.values() for i in v), key=lambda i: -len(i.text)):
        if len(item.text) > SHORT_QUOTE_CHARS + 20:
            was_quote = item.text.endswith('"')
            item.text = item.text[:SHORT_QUOTE_CHARS].rstrip() + ('…"' if was_quote else "…")
            item.tokens = count_text(item.text) + 3
    tokens, chars = _size(s)
    if tokens <= budget and chars <= max_chars:
        return render(s)
    rules.sort(key=lambda c: (c[0], c[1]))
    if _drop_until(s, budget, max_chars, [c[2] for c in rules]):
        return render(s)
    protected = sorted((i for v in s.items.values() for i in v if i.protected), key=lambda i: i.priority)
    _drop_until(s, budget, max_chars, protected)
    return render(s)
