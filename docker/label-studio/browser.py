"""Label Studio in headless Debian Chromium (Playwright; no browser is downloaded: `executable_path` is the
system's), logged in through the login form as a person is: the one login the page scripts share
(annotate.py, screenshot.py)."""

from __future__ import annotations

from contextlib import contextmanager

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def logged_in(url: str, email: str, password: str):
    """A page of a fresh browser, logged in to the Label Studio at `url`; the browser closes on exit."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
            page.goto(f"{url}/user/login/")
            page.fill("input[name=email]", email)
            page.fill("input[name=password]", password)
            page.click("button[type=submit], input[type=submit]")
            page.wait_for_load_state("networkidle")
            yield page
        finally:
            browser.close()
