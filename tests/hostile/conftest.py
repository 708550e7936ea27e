"""The hostile suite (issue 11): each case is named after the item it keeps fixed, and the run
ends with one line per case, so `pytest tests/hostile -q` shows every case by name."""

from __future__ import annotations

from typing import Any

import pytest

_OUTCOMES: list[tuple[str, str]] = []


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid.startswith("tests/hostile/") and (report.when == "call" or (report.when == "setup" and report.outcome != "passed")):
        _OUTCOMES.append((report.nodeid.split("::", 1)[-1], report.outcome))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _OUTCOMES:
        return
    terminalreporter.section("hostile cases")
    for name, outcome in _OUTCOMES:
        terminalreporter.write_line(f"{outcome.upper():8} {name}")
