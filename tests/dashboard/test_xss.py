"""User content (titles, message text, tool input/output, summaries, files) is rendered inert."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from sessions.dashboard.present import render_markdown
from tests.dashboard.factories import add_messages, make_compaction, make_session

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "<img src=x onerror=\"alert('xss-img')\">"
PAYLOAD = f"{SCRIPT}{IMG}"


def assert_inert(body: str) -> None:
    """No payload became markup: no script element from content, no event-handler attribute,
    no javascript: URL in any real tag; the payload text is still visible, escaped."""
    tags = re.findall(r"<[a-zA-Z][^>]*>", body)
    assert not [t for t in tags if re.search(r"\son\w+\s*=", t)], "event handler attribute rendered"
    assert not [t for t in tags if "javascript:" in t.lower()], "javascript: URL rendered"
    assert not [t for t in tags if t.lower().startswith("<img")], "img element rendered"
    scripts = [t for t in tags if t.lower().startswith("<script")]
    assert all("src=" in t for t in scripts), "inline script element rendered"
    assert "&lt;script&gt;" in body


@pytest.fixture
def hostile(user):
    session = make_session(user, title=f"Title {PAYLOAD}", agent=f"agent{IMG}", model=f"m{SCRIPT}")
    add_messages(
        session,
        [
            {"role": "user", "content": f"text {PAYLOAD}"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"think {PAYLOAD}", "signature": "s"},
                    {"type": "text", "text": f"{PAYLOAD} " + "x" * 2000},
                    {"type": "tool_use", "id": "toolu_1", "name": f"Bash{SCRIPT}", "input": {"command": PAYLOAD}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": f"out {PAYLOAD}"}],
            },
        ]
        + [{"role": "user", "content": "pad"}] * 8,
    )
    compaction = make_compaction(
        session,
        summary=f"## Summary {SCRIPT}\n\n{IMG}\n\n[click](javascript:alert('xss-link'))\n\n<b onmouseover=alert(1)>b</b>",
        turn_prefix_summary=f"prefix {PAYLOAD}",
        read_files=[f"a{IMG}.py"],
        modified_files=[f"b{SCRIPT}.py"],
        instructions=f"focus {PAYLOAD}",
        fallbacks=[{"strategy": f"anthropic{SCRIPT}", "reason": f"bad {IMG}"}],
        error=PAYLOAD,
        detail=f"d {IMG}",
    )
    return session, compaction


def test_session_list_escapes_titles_agents_models(logged_in, hostile):
    body = logged_in.get(reverse("dashboard:session-list")).content.decode()
    assert_inert(body)
    assert "Title &lt;script&gt;alert(&#x27;xss-script&#x27;)&lt;/script&gt;" in body


def test_detail_escapes_messages_tool_io_and_thinking(logged_in, hostile):
    session, _ = hostile
    body = logged_in.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    assert_inert(body)
    assert "text &lt;script&gt;" in body and "out &lt;script&gt;" in body and "think &lt;script&gt;" in body
    assert "Bash&lt;script&gt;" in body


def test_compaction_detail_sanitizes_summary(logged_in, hostile):
    session, compaction = hostile
    body = logged_in.get(reverse("dashboard:compaction-detail", args=[session.pk, compaction.pk])).content.decode()
    assert_inert(body)
    assert 'href="javascript' not in body
    assert "<h2>Summary &lt;script&gt;" in body  # markdown still rendered


def test_render_markdown_strips_active_content():
    html = str(render_markdown(f"# t\n\n{PAYLOAD}\n\n[x](javascript:alert(1)) <a href='javascript:alert(2)'>y</a>"))
    tags = re.findall(r"<[a-zA-Z][^>]*>", html)
    assert {t.split()[0].strip("<>") for t in tags} <= {"h1", "p"}
    assert "&lt;script&gt;" in html
    assert "<h1>t</h1>" in html
