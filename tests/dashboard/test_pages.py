from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.urls import reverse

from compaction.models import Compaction, Status
from sessions.dashboard.present import fmt_short
from sessions.models import ApiKey
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session, tool_pair

pytestmark = pytest.mark.django_db


def detail_url(session) -> str:
    return reverse("dashboard:session-detail", args=[session.pk])


def test_login_still_resolves_outside_the_namespace():
    assert reverse("login") == "/accounts/login/"
    assert reverse("dashboard:session-list") == "/"


@pytest.mark.parametrize("name", ["dashboard:session-list", "dashboard:api-keys"])
def test_it_requires_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_login_page_has_labelled_fields_and_viewport(client):
    body = client.get(reverse("login")).content.decode()
    assert '<meta name="viewport"' in body
    assert '<label for="id_username">' in body and '<label for="id_password">' in body


def test_login_redirects_to_the_sessions_list(client, user):
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-password"})
    assert response.status_code == 302 and response["Location"] == reverse("dashboard:session-list")


def test_list_shows_only_own_sessions(logged_in, user, other_user):
    make_session(user, title="Mine")
    make_session(other_user, title="Theirs")
    body = logged_in.get(reverse("dashboard:session-list")).content.decode()
    assert "Mine" in body and "Theirs" not in body


def test_staff_sees_everyone_s_sessions(client, user, other_user, staff_user):
    make_session(user, title="Alice's")
    make_session(other_user, title="Mallory's")
    client.force_login(staff_user)
    body = client.get(reverse("dashboard:session-list")).content.decode()
    assert "Alice&#x27;s" in body and "Mallory&#x27;s" in body


def test_other_owners_session_is_a_404(logged_in, other_user):
    theirs = make_session(other_user)
    c = make_compaction(theirs)
    assert logged_in.get(detail_url(theirs)).status_code == 404
    assert logged_in.get(reverse("dashboard:compaction-detail", args=[theirs.pk, c.pk])).status_code == 404
    assert logged_in.get(reverse("dashboard:compaction-progress", args=[theirs.pk, c.pk])).status_code == 404
    assert logged_in.get(reverse("dashboard:session-overview", args=[theirs.pk])).status_code == 404


def test_list_search_filter_and_row_contents(logged_in, user):
    near = make_session(user, title="Parser work", agent="claude-code", model="claude-sonnet-4-5")
    add_messages(near, conversation(12), tokens=15_000)  # 180,000 tokens: over the 183,616 trigger? no: near
    make_session(user, title="Docs", agent="codex", model="gpt-5")
    running = make_session(user, title="Busy one", model="gpt-5")
    Compaction.objects.create(session=running, reason="manual", status=Status.QUEUED)
    url = reverse("dashboard:session-list")

    body = logged_in.get(url, {"q": "codex"}).content.decode()
    assert "Docs" in body and "Parser work" not in body

    body = logged_in.get(url, {"model": "gpt-5"}).content.decode()
    assert "Docs" in body and "Busy one" in body and "Parser work" not in body

    body = logged_in.get(url, {"status": "compacting"}).content.decode()
    assert "Busy one" in body and "Docs" not in body and "compacting</span>" in body

    body = logged_in.get(url, {"status": "near"}).content.decode()
    assert "Parser work" in body and "Docs" not in body
    assert "180k / 200k · 90%" in body
    assert "bar-near" in body
    # the trigger marker sits at trigger/window = 183,616 / 200,000
    assert "left: 91.8%" in body


def test_list_over_trigger_sort_by_usage_and_last_compaction(logged_in, user):
    low = make_session(user, title="Low")
    add_messages(low, conversation(4), tokens=1000)
    high = make_session(user, title="High")
    add_messages(high, conversation(4), tokens=50_000)
    compacted = make_session(user, title="Compacted")
    add_messages(compacted, conversation(12), tokens=1000)
    make_compaction(compacted)
    url = reverse("dashboard:session-list")

    body = logged_in.get(url, {"sort": "usage"}).content.decode()
    assert body.index("High") < body.index("Low")
    body = logged_in.get(url, {"status": "over"}).content.decode()
    assert "High" in body and "Low" not in body and "bar-over" in body
    body = logged_in.get(url, {"status": "ok"}).content.decode()
    assert "Low" in body and "High" not in body
    body = logged_in.get(url).content.decode()
    assert "167k → 21k · 2 min ago" in body


def test_list_paginates_and_htmx_gets_the_table_only(logged_in, user):
    for i in range(30):
        make_session(user, title=f"S{i:02d}")
    url = reverse("dashboard:session-list")
    body = logged_in.get(url).content.decode()
    assert "Page 1 of 2" in body and "30 sessions" in body
    fragment = logged_in.get(url, {"page": 2}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and "Page 2 of 2" in fragment
    assert fragment.count("<tr>") == 5 + 1  # header row + 5 sessions


def test_detail_gauge_chart_timeline_and_history(logged_in, user):
    session = make_session(user, title="Gauge")
    add_messages(session, conversation(12), tokens=1000)
    add_messages(session, [{"role": "user", "content": "x"}], tokens=143_201 - 12_000 - 21_380 + 21_380)
    c = make_compaction(session, tokens_before=167_094, tokens_after=21_380, messages_summarized=412)
    session.context_tokens = 143_201
    session.save(update_fields=["context_tokens"])
    body = logged_in.get(detail_url(session)).content.decode()
    assert "143,201 / 200,000 tokens (72%) · auto-compact at 183,616" in body
    assert "<svg" in body and 'class="drop"' in body
    assert "Compacted · auto · 412 messages → summary · 167,094 → 21,380 tokens · 3.2 s" in body
    assert reverse("dashboard:compaction-detail", args=[session.pk, c.pk]) in body
    # tool calls collapsed to name + main argument, results with size
    assert '<span class="tool-name">Bash</span> <code>cat file_1.py</code>' in body
    assert re.search(r"Tool result · \d+ chars", body)
    # compacted region marked; kept messages not
    assert 'id="m-1"' in body and "msg-compacted" in body and "in summary" in body
    # history row with the undo button calling the REST endpoint
    assert reverse("compaction-revert", kwargs={"session_id": session.pk, "compaction_id": c.pk}) in body
    assert reverse("compaction-list", kwargs={"session_id": session.pk}) in body


def test_long_text_truncated_with_expand_and_thinking_collapsed(logged_in, user):
    session = make_session(user)
    long_text = "word " * 600
    add_messages(
        session,
        [
            {"role": "user", "content": long_text},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm " * 50, "signature": "x"}]},
        ],
    )
    body = logged_in.get(detail_url(session)).content.decode()
    assert '<details class="text-long">' in body and "Show all (3,000 chars)" in body
    assert "Thinking · 200 chars" in body


def test_timeline_is_paginated_with_htmx_load_more(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(250))
    body = logged_in.get(detail_url(session) + "?from=1").content.decode()
    assert 'id="m-100"' in body and 'id="m-101"' not in body
    assert "load-earlier" not in body  # nothing before #1
    more = reverse("dashboard:session-messages", args=[session.pk]) + "?from=101"
    assert more in body
    fragment = logged_in.get(more, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="m-101"' in fragment and 'id="m-200"' in fragment and "<html" not in fragment
    last = logged_in.get(
        reverse("dashboard:session-messages", args=[session.pk]) + "?from=201", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="m-250"' in last and "Load more" not in last


def test_big_session_opens_at_the_latest_messages_and_loads_earlier(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(5200), tokens=10)
    session.refresh_from_db()
    body = logged_in.get(detail_url(session)).content.decode()
    assert "5,200 messages" in body  # thousands separators
    assert 'id="m-5101"' in body and 'id="m-5200"' in body and 'id="m-5100"' not in body
    assert "Load more" not in body
    assert 'href="?from=1#timeline-h">First messages</a>' in body
    earlier = reverse("dashboard:session-messages", args=[session.pk]) + "?from=5001&amp;to=5101"
    assert earlier in body and "Load earlier messages (#5001–#5100)" in body
    fragment = logged_in.get(earlier.replace("&amp;", "&"), HTTP_HX_REQUEST="true").content.decode()
    assert 'id="m-5001"' in fragment and 'id="m-5100"' in fragment and 'id="m-5101"' not in fragment
    assert "Load more" not in fragment  # the rest is already on the page
    assert "?from=4901&amp;to=5001" in fragment  # and the page before that
    # Small sessions still open at #1.
    small = make_session(user, title="small")
    add_messages(small, conversation(30))
    assert 'id="m-1"' in logged_in.get(detail_url(small)).content.decode()


def test_pruned_tool_output_is_marked(logged_in, user):
    session = make_session(user)
    add_messages(session, tool_pair(1) + tool_pair(2) + conversation(8))
    make_compaction(
        session,
        first_kept_seq=None,
        first_summarized_seq=None,
        last_summarized_seq=None,
        prune_before_seq=4,
        strategy="prune",
        messages_summarized=0,
    )
    body = logged_in.get(detail_url(session)).content.decode()
    assert body.count("tool output pruned") == 1  # only #2 (#4 is the boundary, not before it)


def test_prune_only_boundary_sits_at_the_prune_point_without_a_summary_link(logged_in, user):
    session = make_session(user)
    add_messages(session, tool_pair(1) + tool_pair(2) + conversation(8))
    # As the engine stores a prune of an uncompacted session: first_kept_seq is the first message.
    make_compaction(
        session,
        reason="manual",
        first_kept_seq=1,
        first_summarized_seq=None,
        last_summarized_seq=None,
        prune_before_seq=4,
        strategy="prune",
        messages_summarized=0,
        summary="",
        tokens_before=408_104,
        tokens_after=207_737,
        duration_ms=None,
        usage={"tokens_saved_estimate": 200_000, "tool_results_pruned": 1},
    )
    body = logged_in.get(detail_url(session)).content.decode()
    line = "Tool output pruned · manual · 1 tool result before #4 · 408,104 → 207,737 tokens"
    assert line in body
    assert "0 messages → summary" not in body and "view summary" not in body
    # Right above message #4, after #3.
    assert body.index('id="m-3"') < body.index(line) < body.index('id="m-4"')


def test_staff_viewing_someone_else_gets_no_compact_buttons(client, other_user, staff_user):
    session = make_session(other_user)
    make_compaction(session)
    client.force_login(staff_user)
    body = client.get(detail_url(session)).content.decode()
    assert "Compact now" not in body and "/revert/" not in body


def test_compaction_detail_renders_markdown_files_range_and_fallbacks(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(12))
    c = make_compaction(
        session,
        summary="## Goal\n\nFix **the** bug in `parser.py`.\n\n- item one\n\n<read-files>\nsrc/a.py\n</read-files>",
        read_files=["src/a.py"],
        modified_files=["src/b.py"],
        fallbacks=[{"strategy": "anthropic", "reason": "no API key configured"}],
        usage={"input_tokens": 1200, "output_tokens": 300, "duration_ms": {"extractive": 3}},
        instructions="focus on the parser",
    )
    body = logged_in.get(reverse("dashboard:compaction-detail", args=[session.pk, c.pk])).content.decode()
    assert "<h2>Goal</h2>" in body and "<strong>the</strong>" in body and "<code>parser.py</code>" in body
    assert "<code>src/a.py</code>" in body and "<code>src/b.py</code>" in body
    assert "<strong>anthropic</strong>: no API key configured" in body
    assert f"{detail_url(session)}?from=1#m-1" in body and "#1–#8" in body
    usage_table = body[
        body.index('<table class="usage">') : body.index("</table>", body.index('<table class="usage">'))
    ]
    assert '<th scope="row">Input tokens</th><td></td><td class="num">1,200</td>' in usage_table
    assert '<th scope="row">Duration (ms)</th><td>extractive</td><td class="num">3</td>' in usage_table
    assert body.index('id="summary-h"') < body.index('id="files-h"')  # the summary comes first
    assert "3.2 s" in body and "focus on the parser" in body
    assert "read-files" not in body  # listed under Files, not as tag text in the summary
    assert "167,094 → 21,380" in body


def test_progress_fragment_polls_only_while_in_flight(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(12))
    job = Compaction.objects.create(session=session, reason="manual", status=Status.RUNNING)
    url = reverse("dashboard:compaction-progress", args=[session.pk, job.pk])
    response = logged_in.get(url, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'hx-trigger="every 1s"' in body and "Summarizing" in body
    assert "HX-Trigger" not in response

    Compaction.objects.filter(pk=job.pk).update(
        status=Status.SUCCEEDED, tokens_before=5000, tokens_after=900, messages_summarized=8, first_kept_seq=9
    )
    session.active_compaction_id = job.pk
    session.save(update_fields=["active_compaction"])
    response = logged_in.get(url, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "hx-trigger" not in body
    assert "Conversation compacted: 8 messages → summary, 5,000 → 900 tokens" in body
    assert response["HX-Trigger"] == "compactor:changed"

    Compaction.objects.filter(pk=job.pk).update(status=Status.SKIPPED, detail="nothing to compact: only 3 messages")
    body = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "Nothing to compact:</strong> Only 3 messages" in body  # the engine's own prefix said once
    assert body.lower().count("nothing to compact") == 1

    Compaction.objects.filter(pk=job.pk).update(status=Status.FAILED, error="summarizer exploded")
    body = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "Compaction failed:" in body and "summarizer exploded" in body


def test_api_keys_create_shows_once_then_revoke(logged_in, user, other_user):
    url = reverse("dashboard:api-keys")
    posted = logged_in.post(url, {"name": "laptop agent"})
    assert posted.status_code == 302 and posted["Location"] == url  # post/redirect/get
    key = ApiKey.objects.get(owner=user, name="laptop agent")
    response = logged_in.get(url)
    body = response.content.decode()
    match = re.search(r'id="new-key" class="key" type="text" readonly [^>]*value="([^"]+)"', body)
    assert match and match.group(1).startswith(key.prefix + ".")
    assert ApiKey.objects.is_valid(match.group(1))
    assert response["Cache-Control"] == "no-store"
    assert 'data-copy="#new-key"' in body and "data-confirm=" in body
    # A reload shows the key no more and creates nothing.
    again = logged_in.get(url).content.decode()
    assert match.group(1) not in again and f"{key.prefix}…" in again and "never" in again
    assert ApiKey.objects.filter(owner=user).count() == 1

    _, theirs = ApiKey.objects.create_key(owner=other_user, name="theirs")
    their_prefix = theirs.partition(".")[0]
    assert logged_in.post(reverse("dashboard:api-key-revoke", args=[their_prefix])).status_code == 404
    assert logged_in.get(reverse("dashboard:api-key-revoke", args=[key.prefix])).status_code == 405
    response = logged_in.post(reverse("dashboard:api-key-revoke", args=[key.prefix]))
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked
    assert not ApiKey.objects.get(prefix=their_prefix).revoked


def test_api_key_name_is_required(logged_in, user):
    response = logged_in.post(reverse("dashboard:api-keys"), {"name": ""})
    assert response.status_code == 200 and "This field is required" in response.content.decode()
    assert not ApiKey.objects.filter(owner=user).exists()


def test_list_row_and_gauge_show_the_same_hybrid_figure(logged_in, user):
    from sessions import services

    session = services.session_create(owner=user, title="Reported", model="claude-sonnet-4-5")
    services.messages_append(session=session, messages=conversation(10))
    # The provider saw far more than the local estimate at #8 (tool definitions etc.).
    services.usage_report(session=session, input_tokens=150_000, message_seq=8)
    session.refresh_from_db()
    tokens = services.session_usage(session).tokens
    assert tokens > 150_000  # the report plus what came after it
    list_body = logged_in.get(reverse("dashboard:session-list")).content.decode()
    assert f"{fmt_short(tokens)} / 200k · {round(100 * tokens / 200_000)}%" in list_body
    detail = logged_in.get(detail_url(session)).content.decode()
    assert f"{tokens:,} / 200,000 tokens ({round(100 * tokens / 200_000)}%)" in detail
    over = logged_in.get(reverse("dashboard:session-list"), {"status": "near"}).content.decode()
    assert "Reported" not in over  # ~150k is not within 20k of the 183,616 trigger


def test_logout_is_a_post_from_the_nav(logged_in):
    body = logged_in.get(reverse("dashboard:session-list")).content.decode()
    assert f'<form method="post" action="{reverse("logout")}"' in body
    response = logged_in.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert logged_in.get(reverse("dashboard:session-list")).status_code == 302


def test_long_file_lists_are_collapsed(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(12))
    many = [f"src/module_{i}.py" for i in range(20)]
    c = make_compaction(session, read_files=many, modified_files=["src/b.py"])
    body = logged_in.get(reverse("dashboard:compaction-detail", args=[session.pk, c.pk])).content.decode()
    assert '<details class="files-list"><summary><h3>Read <span class="muted small">(20 files)</span>' in body
    assert "<h3>Modified</h3>" in body and "<code>src/module_19.py</code>" in body


def test_progress_fragment_hints_at_a_missing_worker_when_queued_for_long(logged_in, user):
    from datetime import timedelta

    from django.utils import timezone

    session = make_session(user)
    add_messages(session, conversation(12))
    job = Compaction.objects.create(session=session, reason="manual", status=Status.QUEUED)
    url = reverse("dashboard:compaction-progress", args=[session.pk, job.pk])
    body = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "waiting for a worker" in body and "Still queued" not in body
    Compaction.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(seconds=40))
    body = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in body  # keeps polling: the hint goes away once a worker takes it
    assert "Still queued after 40 s — is a Celery worker running?" in body
    assert "<code>make run</code>" in body or "`make run`" in body
    assert str(settings.VAR_DIR / "worker.log") in body  # COMPACTOR_VAR_DIR's, as make run writes it
