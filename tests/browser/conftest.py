"""Real-browser fixtures: Debian Chromium driven by Playwright against pytest-django's live_server."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from tests.services import require_chromium

SCREENSHOTS = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser(monkeypatch):
    chromium = require_chromium()
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still synchronous, so Django's async-safety guard must be told so (for this test only).
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            yield instance
        finally:
            instance.close()
            # While Playwright's loop runs, asgiref sees another context, so the test's ORM calls
            # opened connections of their own; close them here, or PostgreSQL refuses to drop
            # the test database at the end ("being accessed by other users").
            from django.db import connections

            connections.close_all()


@pytest.fixture
def page_factory(browser):
    """New pages (own cookie jar each) that record every JS dialog and page error."""
    contexts = []

    def make(width: int = 1280, height: int = 900):
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.dialogs = []
        page.errors = []
        # What the Content-Security-Policy blocked (Chromium reports each on the console).
        page.csp_violations = []
        page.on(
            "console",
            lambda msg: page.csp_violations.append(msg.text) if "Content Security Policy" in msg.text else None,
        )

        def on_dialog(dialog):
            page.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def eager_tasks():
    """Run Celery tasks in-process (no broker in this test), as the import command does."""
    from project.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


def screenshot(page, name: str, *, full_page: bool = True) -> Path:
    """Writes NAME.png (the whole page, or the viewport); the flow also calls shot() for both."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def shot(page, name: str) -> None:
    """NAME.png: what the screen shows; NAME-full.png: the whole page."""
    screenshot(page, name, full_page=False)
    screenshot(page, f"{name}-full")


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user("root", password="root-password", is_staff=True, is_superuser=True)
