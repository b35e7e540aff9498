"""What the extractive summarizer recognises in agent text and command lines."""

from __future__ import annotations

import re

TEST_RE = re.compile(
    r"\b(pytest|mix test|npm (run )?test|yarn test|pnpm test|cargo test|go test|jest|vitest|rspec|"
    r"make test|phpunit|tox|unittest|mix credo|ruff|mypy|eslint|tsc|mix compile|cargo build|npm run build|"
    r"make|mix ecto\.migrate|mix ash\.codegen|manage\.py (test|migrate|makemigrations)|docker build|go build|go vet|"
    r"just (test|check|lint|build|ci)|npm run (lint|check|typecheck)|cargo (clippy|check)|bun test|deno test|gradle|mvn|"
    r"node \S*build\S*)\b"
)
TRACKER_RE = re.compile(
    r"\b(bd|gh|glab|jira|linear)\s+(close|create|merge|issue close|issue create|pr create|pr merge)\b"
)
TRACKER_CMD_RE = re.compile(r"\b(bd|gh|glab|jira|linear)\s")
TEST_OUTCOME_RE = re.compile(
    r"(?i)(\b\d+ (tests?|examples?|doctests?|properties|passed|failed|failures?|errors?)\b.*|"
    r"\bfound no offenses\b.*|\ball checks passed\b.*|\bno issues\b.*)"
)
FAILED_COUNT_RE = re.compile(r"(?i)\b([1-9]\d*) (failed|failures?|errors?)\b")
EXIT_CODE_RE = re.compile(r"(?i)\bexit (code|status)[: ]+([1-9]\d*)")

# Sentences of the agent that state something finished.
DONE_START_RE = re.compile(
    r"(?i)^(now |ok,? |great[,!]? |good[,!]? |done[,!:]? |perfect[,!]? )?(i'?ve |i have |we'?ve )?(fixed|implemented|added|"
    r"created|updated|completed|committed|refactored|removed|resolved|renamed|extracted|replaced|wired|moved|"
    r"pushed|merged|wrote|rewrote|converted|migrated|all \d+ tests|all green|all clean|the tests? (now )?pass|"
    r"tests pass|clean compile|both|everything)\b"
    # "The code has been updated to …", "The `x.py` script has been removed": a report in the passive.
    r"|^(?:now,? )?(?:the|this|that|these|those|our|my|all)\b[^.;:!?]{1,80}?\b(?:has|have) (?:now )?been "
    r"(?:\w+ly )?(?:updated|changed|modified|fixed|added|removed|deleted|created|implemented|refactored|resolved|"
    r"corrected|applied|renamed|moved|replaced|rewritten|written|adjusted|extended|simplified|reverted)\b"
)
# A diagnosis: a stated cause or constraint, the richest thing an agent says.
DIAGNOSIS_RE = re.compile(
    r"(?i)\b(because|since|which (means|is|has|needs|requires|doesn'?t)|needs?|doesn'?t (support|exist|work|render|have|handle)|"
    r"does not|isn'?t|is not|aren'?t|can'?t|cannot|missing|requires?|must|needs? (to be|a|an|the)|"
    r"the (issue|problem|cause|bug|reason|root cause|fix) (is|was)|turns out|so that|instead of|rather than|"
    r"not supported|gitignored|is only|only in|already|reports?|warns?|complains?|too (deep|long|many|complex)|"
    r"conflicts?|mismatch|unused|undefined|not found)\b"
)
ANCHOR_RE = re.compile(
    r"`[^`]+`|\b\w+\.[a-z]{1,5}\b|\b\d+ (tests?|files?|failures?)\b|/\w|\b[a-z]+_\w+|\b[a-z]+[A-Z]\w+|\b[A-Z][a-z]+[A-Z]\w+"
)
INTENT_RE = re.compile(
    r"(?i)^(now,? |next,? |then,? |first,? |finally,? |ok,? |good\.? |great\.? )?(let me|let's|i'll|i will|i need to|"
    r"i'm going to|i am going to|we need to|next step|the next step|remaining)\b"
)
FUTURE_RE = re.compile(
    r"(?i)\b(next|then|after that|afterwards|finally|remaining|still need|still needs|later|follow-?up|once .* done)\b"
)
NEXT_RE = re.compile(r"(?i)^(now|next|then|after that|finally)\b|\bnext step\b")
# Narration of waiting and looking around: true at the time, useless to continue from.
JUNK_INTENT_RE = re.compile(
    r"(?i)^(now,? |ok,? |good,? |great,? )?(let me|i'll|let's|i will|now)\s+(just |also |first |quickly |now )?"
    r"(wait|check|look|read|see|verify|view|examine|inspect|explore|search|find|try|run|re-?run|confirm|"
    r"understand|investigate|review|get|take a look|open|start by|think|compile|test)\b"
)
SPECULATION_RE = re.compile(
    r"(?i)^(i bet|i think|i guess|i suspect|maybe|perhaps|probably|hmm|wait|it seems|possibly|actually,? let)\b"
)
# An edit announced as "Now add X to Y": what the edit that follows is for.
PURPOSE_RE = re.compile(
    r"(?i)^(?:now,? |next,? |then,? |ok,? |good\.? |great\.? )*(?:let me |i'll |i will |i need to |we need to |let's )?"
    r"(?:also |now |then )?((?:add|update|replace|create|remove|fix|extract|rewrite|write|implement|change|rename|"
    r"move|wire|register|rebuild|refactor|make|use|switch|convert|delete|drop|introduce|split|handle|apply|"
    r"modify|edit|adjust|correct|exclude|include|allow|restrict|guard|skip|insert|set|patch)\b.{8,})$"
)
# A file tool's answer that the edit was refused and the file left as it was (SWE-agent's
# lint gate, an editor's "no replacement was performed"): a failed attempt, not an edit.
EDIT_REJECTED_RE = re.compile(
    r"(?i)\b(your proposed edit has introduced|edit (?:was|has) not (?:been )?applied|(?:file|it) (?:was )?not modified|"
    r"no replacement was performed|did not appear verbatim|no changes? (?:was|were) made)\b"
)
# Purposes too vague to say what an edit was for.
VAGUE_PURPOSE_RE = re.compile(
    r"(?i)\b(both|all|these|those|everything|remaining|the changes|the rest|it all|in parallel)\b"
)
# A decision the assistant stated, with its reason or alternative.
DECISION_REASON_RE = re.compile(
    r"(?i)\b(because|since|instead of|rather than|so that|decided|decision|going with|go with|opted|chose|"
    r"trade-?off|in favou?r of|to avoid|to keep|backward[- ]compat\w*|unchanged|parallel|"
    # "I'll use an enum to represent either a value or a list": what the chosen means is for.
    r"to (?:represent|model|support|preserve|mirror|match|guarantee))\b"
)
IDENT_RE = re.compile(r"`([^`\n]{2,80})`")
# Names a new file defines (module, class, function), to say what a written file is.
DEFINES_RE = re.compile(
    r"^\s*(?:(?:pub(?:\([\w:]+\))?|export|default|async|public|private|protected|static|abstract|final)\s+)*"
    r"(?:defmodule|class|def|defp|function|func|fn|interface|struct|enum|trait|type|"
    r"create table|CREATE TABLE)\s+([\w.:]+)",
    re.MULTILINE,
)
CODE_IDENT_RE = re.compile(r"[:@]?[A-Za-z_][\w]*(?:[.:][A-Za-z_]\w*)*[?!]?")
URL_RE = re.compile(r"https?://[^\s`'\"<>)\]]+")
ENV_RE = re.compile(r"(?<![\w-])([A-Z][A-Z0-9_]{2,})=(\"[^\"]*\"|'[^']*'|[^\s;&|]+)")
COMMIT_MSG_RE = re.compile(r"""(?:^|\s)-[a-z]*m\s+(?:"([^"$][^"]*)"|'([^']+)')""")
HEREDOC_RE = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*\n(.*?)\n\s*\1\b", re.DOTALL)
STATUS_RE = re.compile(r"\bbd\s+update\s+([\w.-]+).*?--status[= ](\w+)")
CLOSE_RE = re.compile(r"\b(?:bd|gh issue)\s+close\s+([^\n;&|>]*)")
REOPEN_RE = re.compile(r"\b(?:bd|gh issue)\s+reopen\s+([\w.-]+)")
# An issue header in a tracker's output: "○ proj-abc.4 · Add lifecycle state   [● P2 · OPEN]".
ISSUE_TITLE_RE = re.compile(
    r"^\W{0,3}\s*([A-Za-z][\w-]*[-.][\w.]+)\s+(?:\[[A-Z]+\]\s+)?·\s+(.+?)(?:\s{2,}\[(.*?)\])?\s*$", re.MULTILINE
)
ISSUE_DESC_RE = re.compile(r"\nDESCRIPTION\n(.+?)(?:\n\s*\n|$)", re.DOTALL)
TASK_NOTE_RE = re.compile(r"<summary>(.*?)</summary>", re.DOTALL)
BRANCH_CMD_RE = re.compile(r"\bgit\s+(?:checkout\s+-[bB]|switch\s+-[cC]|worktree\s+add\s+(?:-b\s+)?)\s*([\w./-]+)")
# The user approving what the assistant proposed.
APPROVAL_RE = re.compile(
    r"(?i)^(yes|yeah|yep|ok(ay)?|sure|go( ahead)?|do it|sounds good|lgtm|approved?|agreed|please do|"
    r"option \w+|the (first|second|third|last) (one|option))\b"
)
FOCUS_STOPWORDS = frozenset(
    "focus focusing keep keeping only mostly mainly about please the and with what that this from into "
    "compact compaction summary summarize work working part parts things stuff every all that this these those "
    "with what which each when where they them their there have been were will would should could must "
    "make sure also just like want need created pushed contains kept".split()
)
# A sentence that leans on one before it for its subject ("It's only in `x` which has its own
# copy.", "This means the cache is stale."): alone, a reader cannot tell what it is about.
LEANS_ON_EARLIER_RE = re.compile(
    r"^(?:it|they|he|she|it's|they're|its)\b"
    r"|^(?:this|that|these|those)\s+(?:is|was|are|were|'s|has|have|had|means|meant|should|will|would|can|"
    r"could|might|may|does|did|doesn't|isn't|wasn't|seems|looks|needs|works|fixes|explains)\b",
    re.IGNORECASE,
)
