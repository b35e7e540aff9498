"""What the agent's last reply asked the person: a reply that asks the person something leaves
the request open until the person answers. It is not done and the work is not finished: the
next step is the person's answer, to the question quoted verbatim."""

from __future__ import annotations

import re

from compaction.core.summarizers.extractive.view import View
from compaction.core.text_heuristics import CODE_SPAN_RE, FENCED_BLOCK_RE, sentences
from compaction.core.work.state import Person

# A list item's marker: the item belongs to the line that introduced the list.
_ITEM_RE = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
# A title of the report's own structure: a Markdown heading, or a bold question the same line
# answers ("**Ready to use immediately?** No."): the report asks itself.
_TITLE_RE = re.compile(r"^\s*(?:#{1,6}\s|(?:(?:[-*+•]|\d+[.)])\s+)?\*\*[^*\n]*\?[^*\n]*\*\*\s*\w)")
# Words that address the person: "you", "your", or asking their leave ("should I", "want me to",
# "shall we"). A question without them (an edge case a review lists) asks the reader nothing.
_TO_PERSON_RE = re.compile(r"(?i)\b(?:you|your|yours|yourself)\b|\b(?:should|shall|may|can) (?:I|we)\b|\bwant me\b")
# A closing courtesy ("Is there anything else you'd like me to do?", "Any questions?"): it offers
# more, it does not ask about the request, which stays done.
_COURTESY_RE = re.compile(r"(?i)\banything else\b|\bany (?:other |more |further )?questions\b|\banything more\b")
# A sentence that asks: it ends with a question mark (closing quotes, brackets or emphasis after it).
_ASKS_RE = re.compile(r"\?[\"')\]*_]*$")
MAX_QUESTIONS = 3


def questions_to_person(text: str) -> list[str]:
    """The questions an agent's reply puts to the person, verbatim: each sentence that ends in a
    question mark outside code and titles, addressed to the person (its own words, or the line
    that introduced the list it is an item of, say "you" or ask the person's leave). An item is
    told with that line ("Let me check your settings: … What is it set to?")."""
    out: list[str] = []
    lead = ""  # the latest line that is no list item: what a list's items answer to
    for raw in FENCED_BLOCK_RE.sub("", text).splitlines():
        line = raw.strip()
        if not line:
            continue
        item = _ITEM_RE.match(raw)
        if not item:
            lead = line
        if _TITLE_RE.match(raw) or "?" not in CODE_SPAN_RE.sub("", line):
            continue
        words = _ITEM_RE.sub("", line, count=1)
        asked = [s for s in sentences(words) if _ASKS_RE.search(CODE_SPAN_RE.sub("", s).strip())]
        asked = [s for s in asked if not _COURTESY_RE.search(s)]
        addressed = [s for s in asked if _TO_PERSON_RE.search(CODE_SPAN_RE.sub("", s))]
        if not addressed and item and asked and _TO_PERSON_RE.search(lead):
            addressed = [f"{lead} … {asked[0]}"]
        out += [s for s in addressed if s not in out]
    return out[-MAX_QUESTIONS:]


def open_question(v: View) -> list[str]:
    """The questions the reply that ended the latest turn put to the person, verbatim (no answer
    came after it: the history ends there); [] when it asked none."""
    turn = v.state.turn
    if not turn.ended or turn.report is None or turn.submitted is not None:
        return []
    return questions_to_person(turn.report.text)


def waits_for_answer(v: View, person: Person) -> bool:
    """Whether `person`'s request was answered by the reply that ended the history's last turn
    and asks the person something: the request is open until the person answers."""
    turn = v.state.turn
    answered = person.answer is not None and turn.report is not None and person.answer.seq == turn.report.seq
    return answered and bool(open_question(v))


def waiting(v: View) -> list[str]:
    """In Progress: the latest request, open while the question of the reply that answered it waits."""
    request = v.latest_request
    if request is None or not waits_for_answer(v, request):
        return []
    return [
        f"The latest request ({v.cite(request.seq)}): open until the person answers the question the "
        "agent's reply asked (quoted under Where Things Stand)"
    ]
