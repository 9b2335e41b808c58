from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests
# make for set-up are still ordinary blocking calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# Module scope, not session: while Playwright runs, this thread has an event loop,
# which would break async_to_sync in the tests that come after.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is missing: `make setup` installs Debian's chromium when run as root")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # Playwright evaluates a string predicate (wait_for_function, evaluate) in the page, which
    # the site's CSP forbids (no 'unsafe-eval'): these tests drive pages, so the CSP is lifted
    # for their driver. tests/browser/test_csp.py checks the CSP itself on `strict_page`.
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def strict_page(browser: Any) -> Iterator[Any]:
    """A page under the site's own Content-Security-Policy, as a real browser sees it."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def asgi_server() -> Iterator[str]:
    """Daphne serving the real ASGI app (HTTP and WebSocket) on the test database."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
        "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    # Ready means the login page answers, not just that the port is open: on a busy machine
    # Django may still be importing when the socket already accepts.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/login/", timeout=5) as response:  # noqa: S310 - our own http URL
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        # Daphne can hang at shutdown with a request in flight; a hung server would keep the
        # test database in use and break the teardown of every test after it.
        proc.kill()
        proc.wait(timeout=10)
