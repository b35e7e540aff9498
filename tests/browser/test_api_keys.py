"""API keys page in a real browser: post/redirect/get, one-time key with a Copy button, Revoke asks first."""

from __future__ import annotations

import pytest

from sessions.models import ApiKey
from tests.browser.conftest import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_create_copy_reload_and_confirm_revoke(live_server, browser, user):
    base = live_server.url
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        log_in(page, base, "alice", "alice-password")
        page.goto(f"{base}/keys/")
        page.get_by_label("Key name").fill("laptop agent")
        page.get_by_role("button", name="Create key").click()
        page.wait_for_url(f"{base}/keys/")  # redirected: the POST is not in the history to resend
        field = page.locator("#new-key")
        secret = field.input_value()
        key = ApiKey.objects.get(owner=user, name="laptop agent")
        assert secret.startswith(key.prefix + ".") and ApiKey.objects.is_valid(secret)
        assert field.get_attribute("readonly") is not None
        font = field.evaluate("el => getComputedStyle(el).fontFamily")
        assert "monospace" in font or "Menlo" in font or "Consolas" in font, font

        page.get_by_role("button", name="Copy").click()
        page.locator("#copy-status").filter(has_text="Copied").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == secret
        shot(page, "07-api-key-created")

        page.reload()
        assert page.locator("#new-key").count() == 0  # shown once
        assert ApiKey.objects.filter(owner=user).count() == 1  # the reload created nothing

        # Revoke asks first; cancelling changes nothing.
        asked: list[str] = []

        def cancel(dialog):
            asked.append(dialog.message)
            dialog.dismiss()

        page.once("dialog", cancel)
        page.get_by_role("button", name="Revoke key laptop agent").click()
        page.wait_for_timeout(300)
        assert asked and "laptop agent" in asked[0]
        key.refresh_from_db()
        assert not key.revoked

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Revoke key laptop agent").click()
        page.get_by_text("revoked: agents using it get 401").wait_for()
        key.refresh_from_db()
        assert key.revoked
        assert not errors
    finally:
        context.close()
