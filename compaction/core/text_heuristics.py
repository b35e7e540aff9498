"""Text heuristics shared by the ledger and the summarizers.

What counts as the user's own words (harness wrappers, slash commands, queued messages),
which of them are rules, which lines of a tool's output are errors, what a command was.
Regexes only, no state: the ledger and the extractive summarizer must agree on every one
of these judgements, or the fidelity check measures something the summary never tried to keep.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from compaction.core.blocks import TOOL_RESULT
from compaction.core.prompts import is_error_line, text_of
from compaction.core.provenance import (
    COMMAND,
    COMMAND_CAVEAT,
    COMMAND_OUTPUT,
    COMPACT_PROMPT,
    COMPACT_SUMMARY,
    DEMONSTRATION,
    HOOK,
    INTERRUPT,
    NOTIFICATION,
    PERSON,
    QUEUED,
    QUEUED_RE,
    SKILL,
    TASK_TEMPLATE,
    split_text,
    stated_harness,
    text_block_parts,
)
from compaction.core.tool_vocabulary import is_output_tool, is_shell_tool
from compaction.core.types import Msg
from compaction.core.vocabulary import COMMIT_OUTPUT_RE, GIT_PUSH_RE, PLUMBING, PUSH_OUTPUT_RE, is_probe

MAX_INSTRUCTION_CHARS = 500
MAX_ERROR_LINE_CHARS = 300

PATH_RE = re.compile(
    r"(?<![\w/.@:-])((?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+\.[A-Za-z0-9]{1,10}|/(?:[\w.@+-]+/)+[\w.@+-]+)(?![\w/])"
)
_BARE_EXIT_RE = re.compile(r"(?i)^exit (code|status):? ?\d+$")
# What runners print around a failure without saying what failed: npm echoing the script it runs
# ("> pkg@1.0.0 test", "> node build.js"), Node's pointer to its warnings.
_NOISE_LINE_RE = re.compile(
    r"^(?:> [\w@/.-]+@[\w.-]+ \S+$|> (?:node|npm|npx|tsx|vitest|jest)\b|\(Use `node --trace-warnings)"
)
# A diagnostic as compilers and linters print it: a file, a line number, the message
# (`lib/a.ex:12: no local return`, `src/x.ts(3,1): …`, `a.py:4:1: E501 …`).
DIAGNOSTIC_LINE_RE = re.compile(r"^\S+\.\w{1,6}(?::\d+(?::\d+)?:|\(\d+,\d+\):)\s*\S")
_NAMED_DIAGNOSTIC_RE = re.compile(r"(?i)\b(?:error|warning)\b|\b[A-Z]{1,4}\d{3,5}\b")
_ENDED_RE = re.compile(r"(?i)\bexit(?:ed)? (?:with )?(?:code|status)\b")
# A progress banner, not what went wrong: a bare tag ("[DIALYZER]"), an announcement that
# trails off ("Finding suitable PLTs...", "Running checks…"), a heading ("# Quality checks").
BANNER_LINE_RE = re.compile(r"^(?:\[[^\]]{1,40}\]|#+ .*|.*(?:\.\.\.|…))$")
# How a harness says it stopped a command: the call's outcome when no error line says more.
_STOPPED_RE = re.compile(
    r"(?i)^(?:command )?(?:aborted|timed out|killed|terminated|interrupted|cancell?ed)\b|\btimed out after\b"
)
# Also a lower-case word's full stop straight before a capitalised word (a sentence that lost its
# space: "…the upload form.Let's create…"), not before an identifier ("models.Model.objects").
# The space after a sentence's end (. ! ?): split on it for a text's sentences, its last for its
# question. _SENTENCE_SPLIT_RE below also splits at line ends and run-on sentences.
SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
# A blank line: the end of a paragraph (or of a markdown block).
PARAGRAPH_BREAK_RE = re.compile(r"\n\s*\n")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+|(?<=[a-z]{3}[.!?])(?=[A-Z][a-z]*(?:'[a-z]+)?[\s,])")
CONSTRAINT_RE = re.compile(
    r"(?i)\b(always|never|must|mustn't|don't|do not|dont|should|shouldn't|should not|prefer|make sure|"
    r"avoid|instead of|only use|no need to|required?|requirement|not allowed|please use|keep)\b"
)
DECISION_RE = re.compile(
    r"(?i)\b(decided|decision|chose|choose|chosen|instead of|rather than|going with|go with|"
    r"approach|trade-?off|opted|we'll use|i'll use|let's use|strategy)\b"
)
# Short acknowledgements and chatter: the user's words, but no rule an agent must keep.
_ACK_RE = re.compile(
    r"(?i)^(ok(ay)?|k|kk|thanks?( you)?( so much)?|thx|ty|yes|yep|yeah|yup|no|nope|sure|great|cool|nice|good|"
    r"perfect|awesome|excellent|lgtm|looks good|got it|sounds good|go( ahead| on)?|continue|proceed|carry on|"
    r"done|right|alright|fine|ok,? thanks|ok,? go( ahead)?|ok,? continue|yes,? please|please continue|"
    r"keep going|next)[\s.!,]*(thanks?|please|:\)|!)*[\s.!]*$"
)
# "/mode", "/clear": a harness command without arguments, not a request.
_BARE_SLASH_RE = re.compile(r"^/[\w:-]+$")
# Corrections: the user telling the agent it went wrong. They bind what follows.
CORRECTION_RE = re.compile(
    r"(?i)^(no[,.!:]|nope\b|actually\b|wait\b|stop\b|instead\b|that'?s (wrong|not|incorrect)|this is (wrong|not)|"
    r"not (like )?th(at|is)\b|wrong\b|you (should|must|forgot|missed|broke|didn'?t)|why did you|undo\b|revert\b|"
    r"don'?t\b|do not\b|never\b|always\b|please (don'?t|do not|never|always|use|stop|keep)\b)"
)
# A rule or preference inside a message: imperatives the agent must keep obeying.
INSTRUCTION_RE = re.compile(
    # "don't"/"do not" as an order, not "I don't understand".
    r"(?i)(?<!\bi )(?<!\bwe )\b(always|never|must|mustn't|must not|don't|do not|dont|shouldn't|should not|prefer|"
    r"make sure|ensure|"
    r"avoid|instead of|only use|no need to|not allowed|please use|use only|stick to|from now on|going forward|"
    r"remember to|remember that|keep (the|it|all|every|them|using)|without (changing|touching|breaking)|"
    r"do(n'?t| not) (touch|change|edit|modify|delete|remove|add|use|commit|push))\b"
)

# A rule said without a rule word: "use X, not Y", a prohibition shouted on its own ("no console
# logs!"); after at most two words of opener ("ok so use …", "please just use …").
IMPERATIVE_RULE_RE = re.compile(
    r"(?i)^(?:[\w']+[,!.]?\s+){0,2}?(?:use\b[^?]{3,160}?(?:,\s*|\s+)(?:no|not|never)\b[^?]*|no\s+[\w .'-]{2,40}!+)$"
)
# "I think X is broken", "hm, I selected the theme and got a crash, that should never happen":
# what the user saw or believes, a bug report — its "must" and "never" describe the bug.
_OBSERVATION_RE = re.compile(
    r"(?i)^(?:(?:ok|okay|hm+|so|well|yeah|and|but)[,.]?\s+)*"
    # What the person did or saw, in the past tense ("I selected", "I clicked", "I ran"), but not
    # what they asked for ("I asked you to never …", "I said …" restate a rule).
    r"(?:i (?:think|guess|believe|suspect|notice|see|saw|ran|got|just|don'?t (?:think|understand|know)|"
    r"(?!(?:asked|told|said|wanted|meant|needed|expected|decided)\b)[a-z]+ed)|"
    r"it (?:seems|looks)|looks like|seems like)\b"
)
# Openers that say "that was wrong" without saying what to do: "actually, it's the bg color
# that doesn't change" reports a bug; "no, the block should stay as is" sets a rule.
_SOFT_CORRECTION_RE = re.compile(r"(?i)^(no[,.!:]|nope\b|actually\b|wait\b)")
_DIRECTIVE_RE = re.compile(
    r"(?i)\b(should|must|needs? to|has to|have to|shall)\b"
    r"|^(?:no|nope|actually|wait)[,.!:]?\s+(?:please\s+)?(?:just\s+)?"
    r"(?:use|keep|make|put|leave|do|remove|revert|undo|change|rename|move|add|call|set|go|try|stop|drop)\b"
)


def answers_a_step(text: str) -> bool:
    """Whether the person's words answer what the agent just did ("no, keep the block as is",
    "what's footer using? should be dimmer"): a correction or a question about it, bound to that
    step rather than a rule for all the work."""
    said = text.strip()
    return bool(_SOFT_CORRECTION_RE.match(said)) or any(s.rstrip().endswith("?") for s in sentences(said))


def is_rule_sentence(sentence: str) -> bool:
    """A sentence that states a standing rule for the work, not a question or a report of what
    the user saw."""
    said = sentence.strip()
    if said.endswith("?") or _OBSERVATION_RE.match(said):
        return False
    return bool(INSTRUCTION_RE.search(said) or IMPERATIVE_RULE_RE.match(said))


def _directs(text: str) -> bool:
    """A correction that says what to do instead ("no, keep the block as is")."""
    return any(
        _DIRECTIVE_RE.search(sentence) and not sentence.rstrip().endswith("?") and not _OBSERVATION_RE.match(sentence)
        for sentence in sentences(text)
    )


# What the summarizers have always dropped of a text, or the whole text when it opens with it.
_DROPPED_WHOLE = frozenset({COMPACT_SUMMARY, COMPACT_PROMPT, NOTIFICATION, INTERRUPT, COMMAND_CAVEAT, SKILL})
# Harness text they keep, and label themselves: a hook's report (its demands are next steps), a
# task template's instructions (quoted as the template's, not the user's).
_KEPT_HARNESS = frozenset({HOOK, TASK_TEMPLATE, COMMAND_OUTPUT, ""})


@lru_cache(maxsize=8192)
def clean_user_text(text: str) -> str:
    """A user message as the summarizers read it, by the shapes of compaction.core.provenance:
    wrapped harness text (reminders, local command output, caveats) and worked examples
    removed, slash commands kept as "/name args"; "" when the text is a compact summary, a
    skill body, a notification or an interrupt marker. A hook's report and a task template
    stay (the summarizer labels them as the harness's)."""
    commands: list[str] = []
    kept: list[str] = []
    for part in split_text(text):
        if part.provenance == PERSON:
            if part.kind == COMMAND:
                commands.append(part.words)
            elif part.kind != QUEUED:
                kept.append(part.text)
        elif part.text.lstrip().startswith("<") or part.kind == DEMONSTRATION:
            continue
        elif part.kind in _DROPPED_WHOLE and not "".join(kept).strip() and not commands:
            return ""
        elif part.kind in _KEPT_HARNESS:
            kept.append(part.text)
    return "\n".join(c for c in [*commands, "".join(kept).strip()] if c)


def queued_texts(text: str) -> list[str]:
    """Messages the user queued while the agent worked, found in harness text."""
    if "The user sent the following message" not in text:
        return []
    return [q for q in (clean_user_text(m.group(1)) for m in QUEUED_RE.finditer(text)) if q]


def user_messages(msg: Msg) -> list[tuple[str, bool]]:
    """The user's own words in a message as (text, queued): typed messages, and messages
    queued while the agent was busy (delivered inside tool results or beside them). A block
    stated to be the harness's (a skill body Claude Code marks as meta) gives none."""
    if msg.role != "user":
        return []
    out: list[tuple[str, bool]] = []
    blocks = msg.blocks
    harness = {
        index
        for index, parts in text_block_parts(msg.content, msg.provenance)
        if stated_harness(text_of(blocks[index], "text"), parts)
    }
    for index, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text" and index not in harness:
            raw = text_of(block, "text")
            out.extend((q, True) for q in queued_texts(raw))
            cleaned = clean_user_text(raw)
            if cleaned:
                out.append((cleaned, False))
        elif kind == TOOL_RESULT:
            out.extend((q, True) for q in queued_texts(tool_result_text(block.get("content"))))
    return out


def user_texts(msg: Msg) -> list[str]:
    """The user's own words in a message (not tool results, not harness notes)."""
    return [text for text, _queued in user_messages(msg)]


@lru_cache(maxsize=8192)
def classify_user_text(text: str) -> str:
    """ "chatter" (ok, thanks), "instruction" (a rule, preference or correction) or "request"."""
    stripped = text.strip()
    if not stripped or _ACK_RE.match(stripped) or _BARE_SLASH_RE.match(stripped):
        return "chatter"
    if CORRECTION_RE.match(stripped) and (not _SOFT_CORRECTION_RE.match(stripped) or _directs(stripped)):
        return "instruction"
    if any(is_rule_sentence(sentence) for sentence in sentences(stripped)):
        return "instruction"
    return "request"


def instruction_texts(texts: list[str]) -> list[str]:
    """The user messages a summary must quote: the first and latest request and every rule.

    Requests in between ("did you push?", "now the tests") are progress, not standing orders;
    acknowledgements are neither.
    """
    wanted = [t for t in texts if classify_user_text(t) != "chatter"]
    if not wanted:
        return []
    out = [
        instruction_quote(t) if classify_user_text(t) == "instruction" else t
        for i, t in enumerate(wanted)
        if i in (0, len(wanted) - 1) or classify_user_text(t) == "instruction"
    ]
    return list(dict.fromkeys(out))


LONG_INSTRUCTION_CHARS = 300


def _list_after(said: list[str], index: int, most: int = 5) -> list[str]:
    """The items of the list a sentence ending in ":" introduces: the short sentences after it,
    up to the next heading ("SIMULATION OUTPUT:")."""
    items = []
    for sentence in said[index + 1 : index + 1 + most]:
        if sentence.endswith(":") or len(sentence) > 200:
            break
        items.append(sentence)
    return items


def instruction_quote(text: str) -> str:
    """What to quote of a rule-bearing message: all of a short one; of a long one (a bug
    report with a pasted log) the sentences that state rules or corrections."""
    if len(text) <= LONG_INSTRUCTION_CHARS:
        return text
    said = sentences(text)
    rules = []
    for index, sentence in enumerate(said):
        if 8 <= len(sentence) <= 400 and (is_rule_sentence(sentence) or CORRECTION_RE.match(sentence)):
            # "Generated system must:" is said by the list items after it.
            items = _list_after(said, index) if sentence.endswith(":") else []
            rules.append(f"{sentence} {'; '.join(items)}" if items else sentence)
    if not rules:
        return text
    quote = " … ".join(dict.fromkeys(rules))
    return quote if len(quote) <= MAX_INSTRUCTION_CHARS else quote[:MAX_INSTRUCTION_CHARS].rstrip() + "…"


_REJECTION_RE = re.compile(
    r"(?i)(the user doesn't want to proceed with this tool use|the tool use was rejected|"
    r"user rejected (the|this) tool|sibling tool call errored)"
)


def is_tool_rejection(text: str) -> bool:
    """Harness text of a rejected/cancelled tool call: a past event, not an error to fix or an order."""
    return bool(_REJECTION_RE.search(text[:400]))


def tool_result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(text_of(b, "text") for b in content if isinstance(b, dict) and b.get("type") == "text")


def output_is_program_output(tool_name: str, is_error: bool) -> bool:
    """Whether error-looking lines in this tool's result are real errors (not file text)."""
    return is_error or not tool_name or is_shell_tool(tool_name) or is_output_tool(tool_name)


def is_probe_command(command: str) -> bool:
    return is_probe(command)


def command_error_lines(tool_name: str, command: str | None, output: str, *, is_error: bool) -> list[str]:
    """Exact error lines of one tool result, shared by the summarizer and the ledger."""
    if not output_is_program_output(tool_name, is_error) or is_tool_rejection(output):
        return []
    if command and is_probe_command(command):
        # Only real error lines of a failed probe ("No such file or directory"), never its content.
        return error_lines_of(output, is_error=False) if is_error else []
    return error_lines_of(output, is_error=is_error)


_COMMAND_NOISE_RE = re.compile(r"\s*(2>&1|2>/dev/null|\|\s*(tail|head)(\s+-n)?\s+-?\d+)\s*")


def clean_command(command: str) -> str:
    """A command's first line without output plumbing (2>&1, | tail -5): what was run."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    return _COMMAND_NOISE_RE.sub(" ", first).strip()


_ERROR_TAG_RE = re.compile(r"</?[a-z]+(?:_[a-z]+)*_error>")


def strip_error_tags(text: str) -> str:
    """ "<tool_use_error>File does not exist.</tool_use_error>": the wrapper is markup, not the error."""
    return _ERROR_TAG_RE.sub("", text)


def error_lines_of(text: str, *, is_error: bool) -> list[str]:
    """Exact error lines of one tool output.

    A failed call whose output has no recognizable error line contributes its first line
    (tool-level failures such as "File content exceeds maximum allowed tokens").
    """
    lines: list[str] = []
    first: str | None = None
    text = strip_error_tags(text)
    raw_lines = [raw.strip() for raw in strip_ansi(text).splitlines()]
    raw_lines = [
        line for line in raw_lines if line and not _BARE_EXIT_RE.match(line) and not _NOISE_LINE_RE.match(line)
    ]
    joined = -1  # the line a ":" before it took in: told already
    for index, line in enumerate(raw_lines):
        if index == joined:
            continue
        # "Error: ** (EXIT) an exception was raised:" says what kind, the next line what; "The
        # following paths are ignored by one of your .gitignore files:" is nothing without the path.
        told = f"{line} {raw_lines[index + 1]}" if line.endswith(":") and index + 1 < len(raw_lines) else line
        # A bare "Exit code 1" says nothing the next line doesn't; keep the line that explains it.
        if first is None:
            first = told[:MAX_ERROR_LINE_CHARS]
        if len(line) >= 8 and is_error_line(line):
            lines.append(told[:MAX_ERROR_LINE_CHARS])
            joined = index + 1 if told != line else joined
    located = [line[:MAX_ERROR_LINE_CHARS] for line in raw_lines if DIAGNOSTIC_LINE_RE.match(line)]
    if is_error and not lines and first:
        # No line says "error": a tool reports where (`lib/a.ex:12: …`), or a program says how it
        # ended last — its first line is often a progress banner ("[DIALYZER]", "Running checks…").
        stopped = [line for line in raw_lines if _STOPPED_RE.search(line)]
        if stopped:
            lines.append(stopped[-1][:MAX_ERROR_LINE_CHARS])
        elif not located:
            said = [i for i, line in enumerate(raw_lines) if not BANNER_LINE_RE.match(line)]
            if said and said[0] > 0:
                index = said[0]
                line = raw_lines[index]
                told = f"{line} {raw_lines[index + 1]}" if line.endswith(":") and index + 1 < len(raw_lines) else line
                lines.append(told[:MAX_ERROR_LINE_CHARS])
            else:
                lines.append(first)
    # A diagnostic that names an error and where (`src/a.ts(3,1): error TS2353: …`) says more than a
    # runner's wrapper saying the script failed ("npm error Lifecycle script `build` failed").
    named = [line for line in located if _NAMED_DIAGNOSTIC_RE.search(line) and line not in lines]
    if is_error and named and not any(line in located for line in lines):
        lines = named[:2] + lines
    elif is_error and located and lines and all(_ENDED_RE.search(line) for line in lines):
        # Only how it ended ("Halting VM with exit status 2"): where the tool said what is wrong
        # (a file and a line) comes first.
        lines = located[:2] + lines
    # "Traceback (most recent call last):" only announces the exception line that follows.
    announced = [line for line in lines if not line.startswith("Traceback (most recent call last)")]
    return announced or lines


# Terminal colour codes, with their ESC byte or with it already stripped ("[22m[39mWARN").
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]|\[(?:\d{1,3};)*\d{1,3}m")


def strip_ansi(text: str) -> str:
    return _ANSI_RE.sub("", text) if "\x1b" in text or "m" in text else text


def commits_in_output(command: str, output: str) -> list[tuple[str, str, str]]:
    """(branch, hash, subject) of each commit a `git commit` (or merge, cherry-pick...) printed."""
    if "git" not in command:
        return []
    return [(m.group(1), m.group(2), m.group(3).strip()) for m in COMMIT_OUTPUT_RE.finditer(strip_ansi(output))]


def pushes_in_output(command: str, output: str) -> list[tuple[str, str]]:
    """(new hash or "", destination ref) of each ref a `git push` updated."""
    if not GIT_PUSH_RE.search(command):
        return []
    return [(m.group(2) or "", m.group(4)) for m in PUSH_OUTPUT_RE.finditer(strip_ansi(output))]


_CODE_SPAN_RE = re.compile(r"`[^`\n]+`")
_SPAN_MARK_RE = re.compile(r"\x00(\d+)\x00")  # where sentences() hid the code span numbered N
_WHITESPACE_RE = re.compile(r"\s+")


def sentences(text: str) -> list[str]:
    """Sentences and lines of a text; a code span ("`ALTER TABLE ... modify`") is never split."""
    spans: list[str] = []

    def hide(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    hidden = _CODE_SPAN_RE.sub(hide, text) if "`" in text else text
    out = []
    for part in _SENTENCE_SPLIT_RE.split(hidden):
        part = part.strip(" -*•\t")
        if part:
            out.append(_SPAN_MARK_RE.sub(lambda m: spans[int(m.group(1))], part) if spans else part)
    return out


def paths_in(text: str) -> list[str]:
    found = []
    for match in PATH_RE.finditer(text):
        path = match.group(1).rstrip(".,;:)")
        # "and/or", "1/2" and URLs are not file paths.
        if "//" in path or path.count("/") == 0 or len(path) < 4 or path.startswith("http"):
            continue
        found.append(path)
    return found


def normalize(text: str) -> str:
    text = text.lower().replace("`", "").replace("**", "").replace('"', "").replace("'", "")
    return _WHITESPACE_RE.sub(" ", text).strip()


def chain_links(line: str) -> list[tuple[str, str]]:
    """The commands of one shell line chained by `&&`, `||` or `;`, each with the separator
    before it ("" for the first), not splitting inside quotes (`curl -d "a\";print \"b"` is one
    command). `a && b`: b runs only if a exited 0; `a || b` only if it did not; `a; b` always."""
    links: list[tuple[str, str]] = []
    start = index = 0
    quote = sep = ""
    while index < len(line):
        char = line[index]
        if char == "\\" and quote != "'":
            index += 2  # an escaped character, quote or separator
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == ";" or line.startswith(("&&", "||"), index):
            links.append((sep, line[start:index].strip()))
            sep = ";" if char == ";" else line[index : index + 2]
            index += len(sep)
            start = index
            continue
        index += 1
    links.append((sep, line[start:].strip()))
    return links


def _split_chain(line: str) -> list[str]:
    return [part for _sep, part in chain_links(line)]


def _part_signature(part: str) -> tuple[str, ...]:
    part = part.split("|", 1)[0]  # what a pipe feeds (tail, grep) is plumbing
    words = [w for w in part.split() if ("=" not in w or w.startswith("-")) and not w.startswith("-")]
    if not words or words[0] in PLUMBING:
        return ()
    if len(words) >= 3 and words[1] in ("run", "exec", "-m"):
        return tuple(words[:3])
    return tuple(words[:2])


def command_signatures(command: str) -> list[tuple[str, ...]]:
    """The checks a command line runs, one per chained command (`cd x && npm run check` →
    [("npm", "run", "check")]; `git add -A && git commit -m m` → git add, git commit)."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    return [sig for sig in (_part_signature(p) for p in _split_chain(first)) if sig]


def chain_parts(command: str) -> list[str]:
    """The commands a command line chains (`a && b; c`), each with its spacing normalized."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    return [" ".join(part.split()) for part in _split_chain(first) if part.strip()]


def command_signature(command: str) -> tuple[str, ...]:
    """What makes two runs "the same check": program and subcommand, not paths or flags
    (`mix test a.exs` and `mix test` are one check; `git push` and `git push -u origin x` too).
    For a chain, its last command: the one the chain exists to run."""
    signatures = command_signatures(command)
    return signatures[-1] if signatures else ()


# Words that name what a check runs on rather than which check it is: a path, a test id.
_OPERAND_RE = re.compile(r"/|::|\.\w{1,5}$|^\.+$")
_REDIRECT_RE = re.compile(r"\s*(?:\d?>>?|<)\s*\S+")


def check_scope(part: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """A check as (runner, targets): `mix test a.exs` → (("mix", "test"), {"a.exs"});
    `pytest tests/x.py -k slow` → (("pytest",), {"tests/x.py", "slow"}); `cargo test` runs the
    whole suite, so its targets are empty. The runner is the program and its subcommands up to
    the first path-like word; every later word that is not a flag is a target."""
    part = _REDIRECT_RE.sub("", part.split("|", 1)[0])
    words = [w.strip("'\"") for w in part.split() if "=" not in w and not w.startswith("-")]
    runner: list[str] = []
    for word in words:
        if _OPERAND_RE.search(word) or len(runner) >= len(_part_signature(part) or ("",)):
            break
        runner.append(word)
    return tuple(runner), frozenset(w.rstrip("/") for w in words[len(runner) :])


def _target_covers(wide: str, narrow: str) -> bool:
    """`tests` covers `tests/x.py`, `tests/x.py` covers `tests/x.py::test_y`, `./...` covers
    `./pkg/a`."""
    if wide == narrow:
        return True
    base = wide.removesuffix("/...").removesuffix("...").rstrip("/")
    if base in ("", "."):
        return True
    return narrow.startswith((base + "/", base + "::", "./" + base + "/"))


def run_covers(success: str, failure: str) -> bool:
    """Whether a passing check ran everything a failing one ran: the same targets or more (the
    whole suite after one file, a directory after a file in it). `mix test b.exs` passing says
    nothing of `mix test a.exs`. A runner that reads one word longer than the other's (`pytest
    tests` beside `pytest tests/x.py`) is the shorter one with that word as a target."""
    failed_parts = chain_parts(failure)
    failed_runner, failed_targets = check_scope(failed_parts[-1] if failed_parts else "")
    if not failed_runner:
        return False
    for part in chain_parts(success):
        runner, targets = check_scope(part)
        common = min(len(runner), len(failed_runner))
        if runner[:common] != failed_runner[:common]:
            continue
        wide = targets | set(runner[common:])
        narrow = failed_targets | set(failed_runner[common:])
        if not wide or (narrow and all(any(_target_covers(t, f) for t in wide) for f in narrow)):
            return True
    return False
