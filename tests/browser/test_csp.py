"""The pages work under the Content-Security-Policy (htmx, dashboard.js, the usage bars, the
admin and the API docs) and the browser reports no violation."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in
from tests.dashboard.factories import add_messages, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_dashboard_admin_and_docs_work_under_the_policy(live_server, page_factory, user, staff_user):
    session = make_session(user, title="Under CSP")
    add_messages(session, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], tokens=900)
    base = live_server.url
    page = page_factory()
    response = page.goto(f"{base}/accounts/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    log_in(page, base, "alice", "alice-password")
    # The usage bar's inline width applies; htmx loaded from static/ and is active.
    width = page.locator(".bar-fill").first.evaluate("el => el.getBoundingClientRect().width")
    assert width > 0
    assert page.evaluate("typeof window.htmx") == "object"

    page.goto(f"{base}/sessions/{session.pk}/")
    page.evaluate("window.__noReload = true")
    page.get_by_role("button", name="Preview").click()  # dashboard.js → the REST API → fragment
    page.locator("#compact-preview").get_by_text("Nothing to compact:").wait_for()
    assert page.evaluate("window.__noReload") is True
    page.goto(f"{base}/keys/")

    admin = page_factory()
    log_in_admin = f"{base}/admin/login/?next=/admin/"
    admin.goto(log_in_admin)
    admin.get_by_label("Username").fill("root")
    admin.get_by_label("Password").fill("root-password")
    admin.get_by_role("button", name="Log in").click()
    admin.wait_for_url(f"{base}/admin/")
    admin.goto(f"{base}/admin/agent_sessions/session/")
    admin.goto(f"{base}/api/v1/docs/")
    admin.locator(".swagger-ui .opblock").first.wait_for()  # the init script (a file) rendered the UI

    for p in (page, admin):
        assert p.errors == [], p.errors
        assert p.csp_violations == [], p.csp_violations
