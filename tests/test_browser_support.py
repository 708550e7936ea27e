"""The browser-test harness (tests/browser_support.py) against a tiny page: Debian's Chromium
starts headless, runs an external script under a strict Content-Security-Policy, shows a click's
effect, takes a screenshot outside the repository, and reports the console's errors; a narrow
window is a phone's width."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web
from selenium.webdriver.common.by import By

from syncd.emulator.server import serve_app
from tests.browser_support import (
    browser,
    console_errors,
    screenshot,
    text_of,
    wait_until,
)
from tests.loopback import in_thread

REPO = Path(__file__).resolve().parents[1]
CSP = "default-src 'none'; script-src 'self'"
PNG = b"\x89PNG\r\n\x1a\n"

PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8>
<meta name=viewport content="width=device-width">
<title>harness</title>
<script src="/app.js" defer></script>
</head><body>
<button id=go type=button>Go</button>
<p id=said>waiting</p>
</body></html>
"""

APP_JS = """document.getElementById("go").addEventListener("click", () => {
  document.getElementById("said").textContent = "clicked";
});
"""

INLINE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>inline</title></head>
<body><script>document.title = "ran";</script></body></html>
"""


def page_app() -> web.Application:
    """The page, its script, and a page whose inline script the policy refuses; each answer
    carries the policy."""

    def answer(body: str, content_type: str) -> Any:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=body, content_type=content_type, headers={"Content-Security-Policy": CSP})

        return handler

    async def no_icon(request: web.Request) -> web.Response:
        return web.Response(status=204)  # not a 404: a failed load is a console error

    app = web.Application()
    app.router.add_get("/", answer(PAGE, "text/html"))
    app.router.add_get("/app.js", answer(APP_JS, "text/javascript"))
    app.router.add_get("/inline", answer(INLINE, "text/html"))
    app.router.add_get("/favicon.ico", no_icon)
    return app


@contextmanager
def served(app: web.Application) -> Iterator[str]:
    """`app` on a free loopback port, served by a thread of the test process (as
    tests/thread_emulator.py serves the emulator); yields its base URL."""
    with in_thread(lambda: serve_app(app), "browser-page") as (url, _loop):
        yield url


def test_a_click_runs_the_pages_own_script_under_its_policy_and_a_screenshot_lands_outside_the_repo() -> None:
    with served(page_app()) as url, browser() as driver:
        driver.get(url + "/")
        assert text_of(driver, "#said") == "waiting"
        driver.find_element(By.ID, "go").click()
        wait_until(driver, lambda d: text_of(d, "#said") == "clicked", timeout=10, what="the click's text")
        shot = screenshot(driver, "harness: clicked/page")
        assert shot.name == "harness_clicked_page.png"
        assert shot.is_file() and shot.read_bytes().startswith(PNG)
        assert not shot.resolve().is_relative_to(REPO), shot
        assert console_errors(driver) == []

        # The check is not empty by construction: an inline script is refused and reported.
        driver.get(url + "/inline")
        assert driver.title == "inline"
        errors = console_errors(driver)
        assert any("Content Security Policy" in error for error in errors), errors


def test_a_narrow_window_is_a_phones_width() -> None:
    with served(page_app()) as url, browser(width=375, height=740) as driver:
        driver.get(url + "/")
        assert driver.execute_script("return window.innerWidth") == 375
        assert console_errors(driver) == []


def test_a_browser_without_scripts_runs_none_of_the_pages_own() -> None:
    with served(page_app()) as url, browser(scripts=False) as driver:
        driver.get(url + "/")
        driver.find_element(By.ID, "go").click()
        assert text_of(driver, "#said") == "waiting"  # the click's handler was never attached
        driver.get(url + "/inline")
        assert driver.title == "inline"  # the inline script did not run (nor was it refused: never read)
