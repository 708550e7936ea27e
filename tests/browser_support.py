"""Real-browser tests of the web UI: Debian's Chromium, headless, driven through Selenium.

Why a real browser: what the UI promises a person (a click changes what the page says, the page
fits a phone's width, the Content-Security-Policy lets every script and style it needs run) is
only shown by a browser that runs the page, not by reading the HTML it is served.

Why Debian's binaries: `chromium` and `chromium-driver` come from the same Debian release, so the
driver always matches the browser, and they install from the distribution's packages
(.ci/run installs them where missing). Selenium is handed both paths (`Service(executable_path=)`
and `options.binary_location`), so Selenium Manager never runs and nothing is downloaded: the
machines reach only package registries. A machine without them fails the browser tests with
the install command; they are never skipped, so a green run always ran them.

Why screenshots outside the repository: they are for a person (or the session's image viewer)
to look at, never to commit: `SYNCD_SCREENSHOTS` if set, else one folder a test process under
the system's temporary directory (`syncd-screenshots/<YYYYmmdd-HHMMSS-pid>`).

Binaries: `SYNCD_CHROMIUM` / `SYNCD_CHROMEDRIVER` if set (then they must exist), else
/usr/bin/chromium and /usr/bin/chromedriver, else `chromium` and `chromedriver` on PATH.
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import re
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

INSTALL = "apt-get install chromium chromium-driver"
"""What a machine without the browser needs (Debian's packages)."""

PAGE_LOAD_TIMEOUT = 30.0
"""Seconds a navigation may take before the test fails."""

QUIT_GRACE = 5.0
"""Seconds the browser's processes have to end after a quit, before they are killed."""

MAX_SCREENSHOT_HEIGHT = 16384
"""CSS pixels: a full-page screenshot of a longer page is cut there (Chromium's texture limit)."""

T = TypeVar("T")

# Flags beside the essential ones (chromium_driver): no first-run or default-browser dialogs, no
# extensions, and none of Chromium's background calls to Google's services (component updates,
# sync, Safe Browsing lists, metrics, translation, domain reliability): a test run talks only to
# the loopback servers its tests start.
_QUIET = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--safebrowsing-disable-auto-update",
    "--metrics-recording-only",
    "--no-pings",
    "--password-store=basic",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
)


def _binary(variable: str, debian: str, name: str) -> str:
    """The path of one binary: `variable` if set (it must name an executable file), else
    Debian's path, else `name` on PATH; none of them is a test failure that says what to install."""
    chosen = os.environ.get(variable)
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise AssertionError(f"{variable}={chosen} is not an executable file: unset it, or {INSTALL}")
        return chosen
    if os.path.isfile(debian) and os.access(debian, os.X_OK):
        return debian
    found = shutil.which(name)
    if found:
        return found
    raise AssertionError(f"no {name} ({debian}, or on PATH, or ${variable}): the browser tests need it: {INSTALL}")


def chromium_path() -> str:
    return _binary("SYNCD_CHROMIUM", "/usr/bin/chromium", "chromium")


def chromedriver_path() -> str:
    return _binary("SYNCD_CHROMEDRIVER", "/usr/bin/chromedriver", "chromedriver")


class _Chromium(webdriver.Chrome):
    """A Chrome driver whose quit also sees the browser's processes end (those still running
    `QUIT_GRACE` seconds later are killed) and removes its fresh profile folder."""

    profile: Path

    def quit(self) -> None:
        process = getattr(self.service, "process", None)
        below = _descendants(process.pid) if process is not None and process.poll() is None else {}
        try:
            super().quit()
        finally:
            deadline = time.monotonic() + QUIT_GRACE
            while (left := _running(below)) and time.monotonic() < deadline:
                time.sleep(0.02)
            if left:
                _kill(left)
                warnings.warn(f"{len(left)} browser processes still ran {QUIT_GRACE:g}s after chromium quit; killed them", stacklevel=2)
            shutil.rmtree(self.profile, ignore_errors=True)


def chromium_driver(width: int = 1280, height: int = 900, scripts: bool = True) -> webdriver.Chrome:
    """Headless Debian Chromium whose page is `width` x `height` CSS pixels (window.innerWidth
    and innerHeight, what media queries see), a fresh profile (removed at quit), the browser
    console's log kept (`console_errors`). Quit it, or use `browser(...)`.

    `scripts=False` turns JavaScript off in the profile's settings, as a user does in
    chrome://settings, so every page of every site opens without it. (DevTools' script
    emulation, set on the blank page before the first navigation, once took the renderer down
    in CI: "Unable to receive message from renderer".)

    The size holds in the window the driver starts with (not in windows a test opens): the
    window itself is `--window-size`, but headless Chromium keeps the height of a toolbar it
    does not draw (a 900 px window shows a 757 px page) and makes no window narrower than 500
    px, so DevTools' device metrics override (as its device mode does, desktop not mobile, one
    device pixel a CSS pixel) sets the page's size exactly."""
    binary, driver_binary = chromium_path(), chromedriver_path()
    profile = Path(tempfile.mkdtemp(prefix="syncd-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-dev-shm-usage",  # /dev/shm of containers is small; Chromium crashes when it fills
        "--disable-gpu",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
        *_QUIET,
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not scripts:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    service = Service(executable_path=driver_binary)
    try:
        driver = _Chromium(service=service, options=options)
    except BaseException:
        service.stop()  # a started chromedriver whose session did not start
        shutil.rmtree(profile, ignore_errors=True)
        raise
    driver.profile = profile
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
        driver.implicitly_wait(0)
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})  # fmt: skip
    except BaseException:
        _close(driver)
        raise
    return driver


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent PID, start time) of a process (Linux /proc), None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0].decode(), int(fields[1]), int(fields[19])


def _descendants(pid: int) -> dict[int, int]:
    """The processes below `pid`, each with its start time (which tells it from a later process
    that got the same PID)."""
    known = {int(entry): _stat(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()}
    found: dict[int, int] = {}
    frontier = {pid}
    while frontier:
        children = {child: stat[2] for child, stat in known.items() if stat is not None and stat[1] in frontier}
        found.update(children)
        frontier = set(children)
    return found


def _running(processes: dict[int, int]) -> list[int]:
    """Those of `processes` still running: a zombie has exited (only its parent, once chromedriver
    is gone PID 1, has yet to reap it)."""
    alive = []
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == started and stat[0] not in ("Z", "X"):
            alive.append(pid)
    return alive


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _close(driver: webdriver.Chrome) -> None:
    """Quit `driver`; if quitting fails, kill the chromedriver it started and every process
    below it (the browser's) by PID. Never raises: the test's own outcome stands."""
    process = getattr(driver.service, "process", None)
    pid = process.pid if process is not None and process.poll() is None else None
    below = _descendants(pid) if pid is not None else {}
    try:
        driver.quit()
    except Exception as error:  # noqa: BLE001 - any failure to quit ends in the kill below
        _kill(([pid] if pid is not None else []) + _running(below))
        if process is not None:
            with contextlib.suppress(Exception):
                process.wait(10)
        profile = getattr(driver, "profile", None)
        if profile is not None:
            shutil.rmtree(profile, ignore_errors=True)
        warnings.warn(f"chromium did not quit ({error!r}); killed chromedriver {pid} and the {len(below)} processes below it", stacklevel=3)


@contextlib.contextmanager
def browser(width: int = 1280, height: int = 900, scripts: bool = True) -> Iterator[webdriver.Chrome]:
    """`chromium_driver(width, height, scripts)` for the block; it always quits (or is killed) after."""
    driver = chromium_driver(width, height, scripts)
    try:
        yield driver
    finally:
        _close(driver)


_session_dir: Path | None = None


def screenshot_dir() -> Path:
    """Where `screenshot` saves: `SYNCD_SCREENSHOTS`, else one folder a test process under the
    system's temporary directory, made on first use."""
    global _session_dir
    chosen = os.environ.get("SYNCD_SCREENSHOTS")
    if chosen:
        folder = Path(chosen)
    else:
        if _session_dir is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            _session_dir = Path(tempfile.gettempdir()) / "syncd-screenshots" / f"{stamp}-{os.getpid()}"
        folder = _session_dir
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _file_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-") or "screenshot"
    return cleaned if cleaned.lower().endswith(".png") else cleaned + ".png"


def _full_page_png(driver: webdriver.Chrome) -> bytes | None:
    """The whole page (not only the window) as PNG, through the DevTools protocol; None where
    the driver has no CDP or the command fails."""
    execute_cdp_cmd = getattr(driver, "execute_cdp_cmd", None)
    if execute_cdp_cmd is None:
        return None
    try:
        metrics = execute_cdp_cmd("Page.getLayoutMetrics", {})
        content = metrics.get("cssContentSize") or metrics["contentSize"]
        viewport = metrics.get("cssLayoutViewport") or metrics["layoutViewport"]
        width = max(math.ceil(content["width"]), viewport["clientWidth"])
        height = min(max(math.ceil(content["height"]), viewport["clientHeight"]), MAX_SCREENSHOT_HEIGHT)
        shot = execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        })  # fmt: skip
        return base64.b64decode(shot["data"])
    except (WebDriverException, KeyError, TypeError, ValueError):
        return None


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """Save a PNG of the page (the whole page where the browser can) as `name` (characters
    other than A-Z a-z 0-9 . _ - become _) in `screenshot_dir()`; returns its path."""
    path = screenshot_dir() / _file_name(name)
    png = _full_page_png(driver)
    if png is not None:
        path.write_bytes(png)
    elif not driver.save_screenshot(str(path)):
        raise AssertionError(f"the browser took no screenshot {name!r} (at {driver.current_url})")
    return path


def wait_until(driver: webdriver.Chrome, predicate: Callable[[webdriver.Chrome], T], timeout: float = 20.0,
               what: str = "the page") -> T:  # fmt: skip
    """Poll `predicate(driver)` until it returns something truthy, and return that; a timeout is
    a test failure naming `what`, the page the browser is on and the predicate's last error (an
    element not there yet, or gone: `text_of`'s AssertionError, a stale element, is polled on)."""
    last: list[BaseException] = []

    def attempt(d: webdriver.Chrome) -> T | bool:
        try:
            return predicate(d)
        except (AssertionError, NoSuchElementException, StaleElementReferenceException) as error:
            last[:] = [error]
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(attempt)  # type: ignore[return-value]
    except TimeoutException:
        error = f" (last: {last[0]!s})" if last else ""
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (at {driver.current_url}){error}") from None


def text_of(driver: webdriver.Chrome, css: str) -> str:
    """The visible text of the first element `css` selects; none is a test failure."""
    try:
        return str(driver.find_element(By.CSS_SELECTOR, css).text)
    except NoSuchElementException:
        raise AssertionError(f"no element {css!r} (at {driver.current_url})") from None


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """The browser console's SEVERE entries since the last call (the log is read once): failed
    loads, uncaught exceptions, Content-Security-Policy violations."""
    entries: list[dict[str, Any]] = driver.get_log("browser")
    return [str(entry.get("message", "")) for entry in entries if entry.get("level") == "SEVERE"]
