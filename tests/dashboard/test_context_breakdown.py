"""The session page's "What the context holds" card (templates/dashboard/_context_breakdown.html)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse
from django.utils.html import escape

from sessions import services
from sessions.breakdown import usage_warning
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = pytest.mark.django_db


class Rows(HTMLParser):
    """Each breakdown table row's segment key → its cells' text."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self.key: str | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-segment" in attrs:
            self.key = attrs["data-segment"]
            self.rows[self.key] = []
        elif self.key and tag in ("th", "td"):
            self.cell = []

    def handle_endtag(self, tag):
        if self.key and tag in ("th", "td") and self.cell is not None:
            self.rows[self.key].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tr":
            self.key = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def rows(body: str) -> dict[str, list[str]]:
    parser = Rows()
    parser.feed(body)
    return parser.rows


def tokens(cells: list[str]) -> int:
    return int(cells[1].replace(",", ""))


def page(client, session) -> str:
    response = client.get(reverse("dashboard:session-detail", args=[session.pk]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def reported(user):
    """A session built through the services: system prompt, messages, one provider report."""
    session = services.session_create(
        owner=user, title="Port the parser", model="claude-sonnet-4-5", system_prompt="Be careful. " * 50
    )
    services.messages_append(session=session, messages=conversation(12))
    services.usage_report(session=session, input_tokens=2_000, cache_read_input_tokens=28_000)
    return session


def test_the_card_lists_every_part_and_they_add_up_to_the_gauge(logged_in, reported):
    body = page(logged_in, reported)
    table = rows(body)
    assert list(table) == ["system", "fixed", "summary", "messages", "free", "reserve"]
    usage = services.session_usage(reported)
    used = sum(tokens(table[k]) for k in ("system", "fixed", "summary", "messages"))
    assert used == usage.tokens and usage.reported_tokens == 30_000
    assert used + tokens(table["free"]) + tokens(table["reserve"]) == usage.context_window
    assert tokens(table["system"]) == reported.system_prompt_tokens
    # The fixed part is marked as an inference, in words (not only by colour).
    assert "inferred" in table["fixed"][0] and "Inferred from 1 provider report" in table["fixed"][0]
    assert "Stored with the session" in table["system"][0]
    left = usage.trigger_tokens - usage.tokens
    assert f"{left:,} tokens left before auto-compact ({100 * left / usage.context_window:.1f} % of the window)" in body
    # The report and the estimate side by side, with the report's time.
    assert "Reported by the provider" in body and "Estimated by Compactor" in body
    assert re.search(r'<time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>', body)
    assert f"{usage.estimated_tokens:,}" in body
    assert 'class="usage-warning"' not in body


def test_a_new_session_says_the_fixed_part_is_not_known_yet(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(6), tokens=500)
    body = page(logged_in, session)
    table = rows(body)
    assert tokens(table["messages"]) == 3_000 and tokens(table["fixed"]) == 0
    assert "Not known until the agent reports" in table["fixed"][0]
    assert "No usage report yet" in body and "No summary: nothing compacted yet" in table["summary"][0]


def test_a_compacted_session_shows_its_summary_and_kept_range(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(40), tokens=400)
    tokenizer = services.session_tokenizer(session).name
    make_compaction(
        session, first_kept_seq=21, messages_summarized=20, summary_message_tokens=900, summary_tokenizer=tokenizer
    )
    session.context_tokens = 900 + 20 * 400
    session.save(update_fields=["context_tokens"])
    table = rows(page(logged_in, session))
    assert (
        tokens(table["summary"]) == 900
        and "Stands for messages #1–#20 (summarized by extractive)" in table["summary"][0]
    )
    assert tokens(table["messages"]) == 8_000 and "#21–#40: 20 messages" in table["messages"][0]


def test_an_implausible_report_shows_a_warning_line(logged_in, reported):
    """A client that forwards input_tokens but drops the cache figures: the report is flagged
    by the meter (sessions.services.usage_report) and the card says why."""
    result = services.usage_report(session=reported, input_tokens=12)
    assert result.usage.implausible and result.usage.implausible["code"] == "below_served"
    assert usage_warning(result.usage) == result.usage.implausible["reason"]
    body = page(logged_in, reported)
    reason = re.escape(str(escape(result.usage.implausible["reason"])))
    assert re.search(rf'class="usage-warning"><strong>Warning: [^<]+</strong> {reason}', body), body


def test_no_warning_once_a_report_passes(logged_in, reported):
    assert usage_warning(services.session_usage(reported)) == ""
    assert 'class="usage-warning"' not in page(logged_in, reported)


def test_the_overview_fragment_carries_the_card_for_live_updates(logged_in, reported):
    response = logged_in.get(reverse("dashboard:session-overview", args=[reported.pk]))
    assert response.status_code == 200
    assert 'id="context-breakdown"' in response.content.decode()


def test_the_card_reads_no_message_but_one_aggregate_under_a_prune(logged_in, user):
    """5,000 messages under a prune overlay: the card costs one SUM over the kept messages' sizes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from compaction.models import Compaction

    session = make_session(user)
    add_messages(session, conversation(5000), tokens=40)
    job = make_compaction(session, first_kept_seq=1000, usage={})
    url = reverse("dashboard:session-overview", args=[session.pk])
    with CaptureQueriesContext(connection) as plain:
        logged_in.get(url, HTTP_HX_REQUEST="true")
    Compaction.objects.filter(pk=job.pk).update(prune_before_seq=3000)
    with CaptureQueriesContext(connection) as pruned:
        body = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    before = {q["sql"] for q in plain.captured_queries}
    extra = [q["sql"] for q in pruned.captured_queries if q["sql"] not in before and "django_session" not in q["sql"]]
    assert len(pruned.captured_queries) == len(plain.captured_queries) + 1
    assert len(extra) == 1 and "SUM(" in extra[0] and '"seq" >= 1000' in extra[0], extra
    assert "tool outputs before #3,000" in body
