"""The daemon's web page in a real browser (Debian's Chromium, headless, through Selenium).

One story a state backend: `syncd serve` as a process with four jobs against two emulators (one
of them rate limited, so that a scheduled sync runs long enough for its progress to be watched),
driven by a person's clicks: a wrong token and a right one; a scheduled run appearing on the jobs
page and its progress moving, without a reload; a trigger from the page; a job paused (its
trigger refused, saying how to resume), resumed, and its run cancelled from the page; a failed run's error; a
mirror job's plan made from the page and filtered; a space titled like a script shown as text;
the pages at a phone's width; a cross-site form and another Host refused. With PostgreSQL state
the daemon is a fleet replica, and the fleet page lists it and the run it holds.

Screenshots of every page go outside the repository (tests/browser_support.py says where).
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from aiohttp import web
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from syncd.emulator.process import EmulatorProcess
from syncd.emulator.server import serve_app
from tests import cli_zygote
from tests.browser_support import (
    browser,
    console_errors,
    screenshot,
    text_of,
    wait_until,
)
from tests.daemon_support import DaemonProcess, toml_value
from tests.loopback import http, in_thread, wait_for
from tests.pg_support import fresh_schema

TOKEN = "ui-test-token"
CONTROL = "ui-control-secret-5678"
XSS = "<script>alert(1)</script>"
SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=4"
SLOW_SPEC = "orgs=1,collections=1,spaces=2,pages=3"
SLOW_RATE = 12.0
"""Requests a second on the slow emulator: its sync takes seconds, long enough to watch."""
PAGE_BUDGET = 200 * 1024
"""What a page may weigh on first load, everything it loads included."""


@dataclass
class Site:
    daemon: DaemonProcess
    url: str
    backend: str
    turn_off: Callable[[], object]
    """Write the configuration again with `daemon.ui = false` (a SIGHUP reads it)."""
    slow_url: str
    """The rate-limited emulator's (its faults set a latency to make a run long)."""


def _config(tmp: Path, fast: EmulatorProcess, slow: EmulatorProcess, source: str, empty: str, *, ui: bool = True) -> Path:
    lines = [f"state_dir = {toml_value(tmp / 'state')}"]
    for tenant, url, token in (("src", fast.url, TOKEN), ("dst", fast.url, TOKEN), ("slow", slow.url, TOKEN), ("bad", fast.url, "not-the-token")):
        lines += [f"[tenants.{tenant}]", f"base_url = {toml_value(url)}", f"token = {toml_value(token)}"]
    lines += ["[retry]", "max_attempts = 2", 'initial_wait = "0.1s"', 'max_wait = "0.5s"']
    lines += ["[daemon]", "port = 0", f"token = {toml_value(CONTROL)}", 'shutdown_deadline = "10s"', 'failure_backoff = "1s"', f"ui = {toml_value(ui)}"]
    jobs = [
        {"name": "nightly", "kind": "sync", "source": "slow", "schedule": {"every": "12s"}, "timezone": "Europe/Berlin"},
        {"name": "backup", "kind": "backup", "source": f"src:{source}"},
        {"name": "broken", "kind": "sync", "source": "bad"},
        {"name": "mirror", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{empty}"},
    ]
    for job in jobs:
        lines.append("[[jobs]]")
        lines += [f"{key} = {toml_value(value)}" for key, value in job.items()]
    path = tmp / "syncd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _title_a_space(emulator: EmulatorProcess, org: str, title: str) -> None:
    status, listing = http("GET", f"{emulator.url}/v1/orgs/{org}/spaces", TOKEN)
    assert status == 200, listing
    space = listing["items"][0]["id"]
    status, body = http("PATCH", f"{emulator.url}/v1/spaces/{space}", TOKEN, body={"title": title})
    assert status == 200, body


@contextmanager
def _state_env(backend: str, request: pytest.FixtureRequest) -> Iterator[None]:
    """The environment the daemon starts with: SYNCD_STATE_URL set to a fresh schema for a
    PostgreSQL state (the daemon is then a fleet replica), unset for SQLite."""
    saved = os.environ.pop("SYNCD_STATE_URL", None)
    try:
        if backend == "postgresql":
            with fresh_schema(request.getfixturevalue("pg_server")) as url:
                os.environ["SYNCD_STATE_URL"] = url
                yield
        else:
            yield
    finally:
        os.environ.pop("SYNCD_STATE_URL", None)
        if saved is not None:
            os.environ["SYNCD_STATE_URL"] = saved


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    with (
        cli_zygote.emulator_process(token=TOKEN, spec=SPEC, rate=0) as fast,
        cli_zygote.emulator_process(token=TOKEN, spec=SLOW_SPEC, rate=SLOW_RATE, burst=2) as slow,
        _state_env(request.param, request),
    ):
        source, empty = (org["id"] for org in fast.report["organizations"])
        _title_a_space(fast, source, XSS)
        daemon = DaemonProcess.start(_config(tmp_path, fast, slow, source, empty), tmp_path / "state", token=CONTROL)
        try:
            turn_off = partial(_config, tmp_path, fast, slow, source, empty, ui=False)
            yield Site(daemon, daemon.url + "/ui/", request.param, turn_off, slow.url)
        finally:
            daemon.stop()


# ----- steps --------------------------------------------------------------------------------------


def _log_in(driver: WebDriver, site: Site, token: str) -> None:
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.ID, "login-submit").click()


def _marked(driver: WebDriver) -> None:
    """Mark the document: a reload would lose the mark (the live parts must not reload)."""
    driver.execute_script("document.documentElement.dataset.sameDocument = 'yes'")


def _same_document(driver: WebDriver) -> bool:
    return bool(driver.execute_script("return document.documentElement.dataset.sameDocument === 'yes'"))


def _page_weight(driver: WebDriver) -> int:
    """Bytes the page loaded: the document and everything it fetched (Resource Timing)."""
    return int(driver.execute_script(
        "const n = performance.getEntriesByType('navigation')[0];"
        "return n.transferSize + performance.getEntriesByType('resource').reduce((s, r) => s + r.transferSize, 0);"
    ))  # fmt: skip


def _fits(driver: WebDriver, width: int) -> bool:
    """Whether the page is as wide as the window or narrower: nothing scrolls sideways (the
    scroll width is within the width left beside the scrollbar)."""
    return bool(driver.execute_script(
        f"const e = document.documentElement; return window.innerWidth === {width} && e.scrollWidth <= e.clientWidth"
    ))  # fmt: skip


def _runs_of(site: Site, job: str) -> list[dict[str, object]]:
    return site.daemon.job(job)["runs"]  # type: ignore[no-any-return]


def _login_and_watch_a_scheduled_run(driver: WebDriver, site: Site) -> None:
    driver.get(site.url)
    wait_until(driver, lambda d: d.find_element(By.ID, "token"), what="the login form")
    _log_in(driver, site, "a-wrong-token")
    error = wait_until(driver, lambda d: text_of(d, "#login-error"), what="the wrong token's error")
    assert "wrong token" in error
    screenshot(driver, f"{site.backend}-01-login-refused")
    assert all("401" in line for line in console_errors(driver))  # the refused login's own answer, nothing else
    _log_in(driver, site, CONTROL)
    wait_until(driver, lambda d: d.find_element(By.ID, "jobs"), what="the jobs page")
    assert driver.current_url.rstrip("/").endswith("/ui")
    for name in ("nightly", "backup", "broken", "mirror"):
        assert driver.find_element(By.ID, f"job-{name}")
    assert "Europe/Berlin" in text_of(driver, "#job-nightly")
    assert _page_weight(driver) < PAGE_BUDGET
    # A run of the scheduled job appears on the page without a reload (first run: at start;
    # waited for here in case it ended before the page was opened: the next comes 12 s later).
    _marked(driver)
    wait_until(
        driver,
        lambda d: d.find_element(By.CSS_SELECTOR, "#job-nightly .state-running a"),
        timeout=40, what="a scheduled run of nightly to show as running",
    )  # fmt: skip
    assert _same_document(driver), "the jobs page was reloaded"
    screenshot(driver, f"{site.backend}-02-jobs-running")
    # Found and clicked in one attempt: the live page may redraw the row in between (a stale link).
    run_link = wait_until(driver, _click_the_running_run, timeout=40, what="the running run's link to be clicked")
    wait_until(driver, lambda d: d.find_element(By.ID, "run-live"), what="the run page")
    _marked(driver)
    first = wait_until(driver, lambda d: int(text_of(d, "#progress-done")) > 0 and int(text_of(d, "#progress-done")), what="progress")
    screenshot(driver, f"{site.backend}-03-run-progress")
    wait_until(driver, lambda d: int(text_of(d, "#progress-done")) > first, timeout=30, what="the progress to move")
    wait_until(driver, lambda d: text_of(d, "#run-live .outcome") == "succeeded", timeout=60, what="the run to succeed")
    assert _same_document(driver), "the run page was reloaded"
    assert driver.find_element(By.ID, "run-facts")
    screenshot(driver, f"{site.backend}-04-run-succeeded")
    assert run_link and run_link.rsplit("/", 1)[-1].isdigit() and driver.current_url == run_link


def _click_the_running_run(driver: WebDriver) -> str:
    link = driver.find_element(By.CSS_SELECTOR, "#job-nightly .state-running a")
    href = str(link.get_attribute("href"))
    link.click()
    return href


def _trigger_from_the_page(driver: WebDriver, site: Site) -> None:
    driver.get(site.url)
    before = len(_runs_of(site, "backup"))
    driver.find_element(By.ID, "trigger-backup").click()
    wait_until(driver, lambda d: "/ui/runs/" in d.current_url, what="the triggered run's page")
    wait_until(driver, lambda d: text_of(d, "#run-live .outcome") == "succeeded", timeout=60, what="the backup to succeed")
    assert text_of(driver, "#run-file").endswith(".db")
    facts = text_of(driver, "#run-facts")
    for figure in ("requests", "retries", "429s", "objects"):
        assert figure in facts, facts
    assert len(_runs_of(site, "backup")) == before + 1
    screenshot(driver, f"{site.backend}-05-backup-triggered")


def _pause_resume_and_cancel(driver: WebDriver, site: Site) -> None:
    """Pause the scheduled job from the jobs page, see its trigger refused, resume it from its
    own page, and cancel the run a trigger starts from the run page."""
    driver.get(site.url)
    driver.find_element(By.ID, "pause-nightly").click()
    wait_until(driver, lambda d: d.find_element(By.ID, "resume-nightly"), what="the Resume button")
    assert driver.current_url.rstrip("/").endswith("/ui")  # back on the jobs page
    assert "by the web page" in text_of(driver, "#paused-nightly")
    # A run in progress goes on (a pause holds the schedule); then the job shows as paused.
    wait_until(driver, lambda d: text_of(d, "#job-nightly .state").startswith("paused"), timeout=60, what="the job to show as paused")
    screenshot(driver, f"{site.backend}-05a-job-paused")
    driver.find_element(By.ID, "trigger-nightly").click()
    refusal = wait_until(driver, lambda d: "is paused" in text_of(d, "#error-message") and text_of(d, "#error-message"), what="the refusal")
    assert "syncd resume nightly" in refusal and "Resume" in refusal, refusal
    assert all("409" in line for line in console_errors(driver))  # the refusal's own answer, nothing else
    assert site.daemon.job("nightly")["state"] == "paused"
    driver.get(site.url + "jobs/nightly")
    assert text_of(driver, "#job-state").startswith("paused")
    driver.find_element(By.ID, "resume-nightly").click()
    wait_until(driver, lambda d: d.find_element(By.ID, "pause-nightly"), what="the Pause button again")
    assert driver.current_url.endswith("/ui/jobs/nightly") and site.daemon.job("nightly")["paused"] is None
    # A later sync of the slow tenant takes about 2 s: slowed down, the run lasts until it is cancelled.
    assert http("PUT", site.slow_url + "/_emulator/faults", body={"latency": 500})[0] == 200
    driver.find_element(By.ID, "trigger-nightly").click()
    wait_until(driver, lambda d: "/ui/runs/" in d.current_url, what="the triggered run's page")
    wait_until(driver, lambda d: d.find_element(By.ID, "cancel-nightly"), timeout=30, what="the run to run, with its Cancel button")
    driver.find_element(By.ID, "cancel-nightly").click()
    wait_until(driver, lambda d: text_of(d, "#run-live .outcome") == "cancelled", timeout=30, what="the run to end cancelled")
    assert "cancelled by the operator (the web page" in text_of(driver, "#run-live"), text_of(driver, "#run-live")
    assert http("PUT", site.slow_url + "/_emulator/faults", body={"latency": 0})[0] == 200
    screenshot(driver, f"{site.backend}-05b-run-cancelled")


def _read_a_failed_run(driver: WebDriver, site: Site) -> None:
    driver.get(site.url)
    driver.find_element(By.ID, "trigger-broken").click()
    wait_until(driver, lambda d: text_of(d, "#run-live .outcome") == "failed", timeout=60, what="the broken job to fail")
    error = text_of(driver, "#run-error")
    assert "401" in error or "token" in error.lower(), error
    (run,) = (r for r in _runs_of(site, "broken") if r["outcome"] == "failed")
    assert error == str(run["error"]).strip()  # the error in full, as the API holds it
    screenshot(driver, f"{site.backend}-06-run-failed")
    driver.get(site.url + "jobs/broken")
    bar = wait_until(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#history-chart rect.bar-failed"), what="the failed run in the chart")
    assert bar.get_attribute("height")
    screenshot(driver, f"{site.backend}-07-job-history")


def _plan_and_filter(driver: WebDriver, site: Site) -> None:
    driver.get(site.url + "plans")
    driver.find_element(By.ID, "plan-mirror").click()
    wait_until(driver, lambda d: d.find_element(By.ID, "plan-filter"), timeout=60, what="the plan page")
    rows = driver.find_elements(By.CSS_SELECTOR, "tr.change")
    assert rows and "create" in {row.get_attribute("data-action") for row in rows}
    kinds = {row.get_attribute("data-kind") for row in rows}
    assert "space" in kinds and len(kinds) > 1
    # The space titled like a script: its title is text on the page, and nothing ran.
    titles = [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "tr.change[data-kind=space] td.title")]
    assert XSS in titles
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.accept()
    screenshot(driver, f"{site.backend}-08-plan")
    Select(driver.find_element(By.ID, "kind")).select_by_value("space")  # the script submits the filter
    wait_until(driver, lambda d: "kind=space" in d.current_url, what="the filter to apply")
    shown = driver.find_elements(By.CSS_SELECTOR, "tr.change")
    assert shown and {row.get_attribute("data-kind") for row in shown} == {"space"}
    assert len(shown) < len(rows)
    assert text_of(driver, "#plan-shown").startswith(f"{len(shown)} of {len(rows)}")
    Select(driver.find_element(By.ID, "action")).select_by_value("create")
    wait_until(driver, lambda d: "action=create" in d.current_url and "kind=space" in d.current_url, what="both filters")
    both = driver.find_elements(By.CSS_SELECTOR, "tr.change")
    assert both and {(row.get_attribute("data-kind"), row.get_attribute("data-action")) for row in both} == {("space", "create")}
    screenshot(driver, f"{site.backend}-09-plan-filtered")


def _fleet(driver: WebDriver, site: Site) -> None:
    driver.get(site.url + "fleet")
    if site.backend == "postgresql":
        row = wait_until(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#replicas tbody tr"), what="the replica")
        assert "this page" in row.text and "s ago" in row.text
    else:
        assert "runs alone" in text_of(driver, "#no-fleet")
    screenshot(driver, f"{site.backend}-10-fleet")


def _on_a_phone(site: Site, cookie: dict[str, object]) -> None:
    with browser(width=375, height=740) as phone:
        phone.get(site.url + "login")
        phone.add_cookie({key: cookie[key] for key in ("name", "value", "path")})
        for page, name in (("", "jobs"), ("runs", "runs"), ("jobs/nightly", "job"), ("plans", "plans")):
            phone.get(site.url + page)
            wait_until(phone, lambda d: d.find_element(By.TAG_NAME, "main"), what=f"the {name} page")
            assert "/login" not in phone.current_url
            assert _fits(phone, 375), f"the {name} page is wider than a phone"
            screenshot(phone, f"{site.backend}-11-phone-{name}")
        assert console_errors(phone) == []


def _without_javascript(site: Site) -> None:
    """Everything but the live parts works with scripts off: log in, trigger, read the run
    (reloading by hand), filter a plan with the form's button."""
    with browser(scripts=False) as plain:
        plain.get(site.url)
        _log_in(plain, site, CONTROL)
        wait_until(plain, lambda d: d.find_element(By.ID, "jobs"), what="the jobs page without scripts")
        plain.find_element(By.ID, "trigger-backup").click()
        wait_until(plain, lambda d: "/ui/runs/" in d.current_url, what="the run page without scripts")

        def reloaded_until_done(d: WebDriver) -> bool:
            d.refresh()
            return text_of(d, "#run-live .outcome") == "succeeded"

        wait_until(plain, reloaded_until_done, timeout=60, what="the run to succeed (reloaded by hand)")
        plain.get(site.url + "plans")
        plain.find_element(By.CSS_SELECTOR, "#plans a").click()
        Select(plain.find_element(By.ID, "action")).select_by_value("settle")
        time.sleep(0.5)  # with scripts on, the change would have sent the form by now
        assert "action=" not in plain.current_url  # scripts are off: no script submitted it
        plain.find_element(By.ID, "filter-submit").click()
        wait_until(plain, lambda d: "action=settle" in d.current_url, what="the filter's button")
        shown = plain.find_elements(By.CSS_SELECTOR, "tr.change")
        assert shown and {row.get_attribute("data-action") for row in shown} == {"settle"}
        screenshot(plain, f"{site.backend}-12-no-javascript-plan")


@contextmanager
def _other_site(target: str) -> Iterator[str]:
    """A page of another origin (localhost, another port) whose form posts to `target`."""
    page = (
        "<!doctype html><form id=f method=post action='" + target + "'><input name=csrf value=guess></form>"
        "<script src=/go.js></script>"
    )

    async def form(_request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    async def script(_request: web.Request) -> web.Response:
        return web.Response(text="document.getElementById('f').submit()", content_type="text/javascript")

    app = web.Application()
    app.router.add_get("/", form)
    app.router.add_get("/go.js", script)
    with in_thread(lambda: serve_app(app), "other-site") as (url, _loop):
        yield url.replace("127.0.0.1", "localhost") + "/"  # another site: another host name


def _post(site: Site, path: str, form: str, **headers: str) -> int:
    request = urllib.request.Request(site.url + path, data=form.encode(), method="POST", headers=headers)
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def _refused_from_elsewhere(driver: WebDriver, site: Site, cookie: str) -> None:
    before = len(_runs_of(site, "backup"))
    session = f"syncd_ui={cookie}"
    assert _post(site, "jobs/backup/run", "", Cookie=session) == 403  # no CSRF token
    assert _post(site, "jobs/backup/run", "csrf=" + "A" * 43, Cookie=session) == 403  # a guessed one
    assert _post(site, "jobs/backup/run", "csrf=x", Cookie=session, Origin="http://localhost:1") == 403  # another origin
    assert _post(site, "jobs/backup/run", "csrf=x", Cookie=session, **{"Sec-Fetch-Site": "cross-site"}) == 403
    assert _post(site, "jobs/backup/run", "csrf=x") == 401  # no session at all
    for action in ("pause", "resume", "cancel"):  # every form of the page is checked alike
        assert _post(site, f"jobs/backup/{action}", "csrf=" + "A" * 43, Cookie=session) == 403
    assert site.daemon.job("backup")["paused"] is None
    with _other_site(site.url + "jobs/backup/run") as evil:
        driver.get(evil)
        wait_until(driver, lambda d: "/ui/jobs/backup/run" in d.current_url, what="the cross-site form to be sent")
        assert driver.find_element(By.TAG_NAME, "body").text  # the refusal, not a run page
        assert "/ui/runs/" not in driver.current_url
    assert len(_runs_of(site, "backup")) == before, "a cross-site form started a run"
    # Another Host: refused before the page is looked at (DNS rebinding).
    request = urllib.request.Request(site.url, headers={"Host": "attacker.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403


# ----- the story ----------------------------------------------------------------------------------


@pytest.mark.long(seconds=50)
def test_an_operator_uses_the_page(site: Site) -> None:
    with browser() as driver:
        _login_and_watch_a_scheduled_run(driver, site)
        cookie = driver.get_cookie("syncd_ui")
        assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui/"
        _trigger_from_the_page(driver, site)
        _pause_resume_and_cancel(driver, site)
        _read_a_failed_run(driver, site)
        _plan_and_filter(driver, site)
        _fleet(driver, site)
        assert console_errors(driver) == []  # no script or style refused by the page's own policy
        _on_a_phone(site, cookie)
        _refused_from_elsewhere(driver, site, str(cookie["value"]))
        driver.get(site.url)
        driver.find_element(By.ID, "logout").click()
        wait_until(driver, lambda d: d.find_element(By.ID, "token"), what="the login form after logging out")
        driver.get(site.url + "runs")
        assert "/ui/login" in driver.current_url
    _without_javascript(site)  # its own browser, with the first one gone: one Chromium at a time
    # `daemon.ui = false`, read at a reload: the page is gone, the JSON API stays.
    site.turn_off()
    site.daemon.signal(signal.SIGHUP)
    wait_for("the page to be turned off", lambda: http("GET", site.url)[0] == 404, 20)
    assert site.daemon.get("/jobs")[0] == 200
