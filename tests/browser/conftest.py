"""
Fixtures for the tests that drive a real headless Chromium through Playwright
against pytest-django's live server.

Debian's Chromium is used (``apt-get install -y chromium``); where it (or
Playwright) is missing, every browser test is reported as SKIPPED with the
reason, never passed.
"""

import os
import shutil
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 900}
PASSWORD = "correct horse battery staple"


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium_path():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): browser tests cannot run")
    return path


# Module scope, not session: Playwright's sync API keeps an event loop running in
# this thread until it stops, and tests after these ones may run their own loops.
@pytest.fixture(scope="module")
def browser(chromium_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - playwright is pinned in requirements.txt
        pytest.skip("playwright is not importable: %s" % exc)
    # Playwright's sync API runs an event loop in this thread; the ORM calls the
    # tests make alongside it are plain synchronous ones.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(browser, live_server):
    """Open a page in a fresh browser context: ``new_page(color_scheme="dark", user=...)``."""
    contexts = []

    def open_page(color_scheme="light", user=None):
        context = browser.new_context(
            color_scheme=color_scheme, viewport=VIEWPORT, base_url=live_server.url
        )
        context.set_default_timeout(15000)
        contexts.append(context)
        if user is not None:
            context.add_cookies([session_cookie(user, live_server.url)])
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def session_cookie(user, url):
    """Return a cookie logging ``user`` in, as the test client's force_login makes it."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {
        "name": settings.SESSION_COOKIE_NAME,
        "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
        "url": url,
    }


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)


@pytest.fixture
def screenshot():
    """Save a full-page screenshot under test-artifacts/screenshots/ and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def save(page, name):
        path = ARTIFACTS / ("%s.png" % name)
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
