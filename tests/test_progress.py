"""Progress on stderr: bars with done/total and time left where the total is known (file
downloads, operations applied, spaces exported), live counts where not (a crawl); only on a
terminal, a log line every few seconds elsewhere, never on stdout."""

from __future__ import annotations

import io
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from syncd.commands.progress import CopyDisplay, StepDisplay
from syncd.logging import configure_logging
from tests.hostile.cli_support import clean_env
from tests.terminal import CSI, SYNCD, on_a_terminal
from tests.thread_emulator import TOKEN, ThreadEmulator, thread_emulator

BAR = "━"


@dataclass
class Applied:
    """What `apply_plan` hands its `on_progress` (syncd.copy.apply.ApplyProgress)."""

    done: int
    total: int
    writes: int = 0
    failures: int = 0
    reads: int = 0


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=140, color_system=None), buffer


def test_apply_is_a_bar_with_done_total_and_time_lefton_a_terminal() -> None:
    console, buffer = _terminal()
    with CopyDisplay("copy a -> b", console=console) as display:
        assert display.interactive
        for done in range(0, 7):
            display.applying(Applied(done, 10, writes=done * 2))
        display._progress.refresh()  # type: ignore[union-attr]
        shown = CSI.sub("", buffer.getvalue())
        assert "copy a -> b: applying" in shown and "6/10" in shown and "12 write calls" in shown
        assert re.search(r"ETA \d+:\d\d:\d\d", shown), shown
        display.applying(Applied(1, 3))  # the next round: the bar starts again at its own total
        display._progress.refresh()  # type: ignore[union-attr]
        assert "1/3" in CSI.sub("", buffer.getvalue())


def test_not_on_a_terminal_a_log_line_says_where_each_step_is(capsys: pytest.CaptureFixture[str]) -> None:
    logged = io.StringIO()
    configure_logging("console", "info", stream=logged)
    try:
        with StepDisplay("export b.db", console=Console(file=io.StringIO()), log_every=0) as display:
            assert not display.interactive
            display.step("spaces", 0, 4)
            display.step("spaces", 2, 4, note="9 files written")
    finally:
        configure_logging()
    text = logged.getvalue()
    assert "progress" in text and "export b.db" in text and "spaces: 2/4, ETA " in text and "9 files written" in text
    assert BAR not in text and capsys.readouterr().out == ""


@pytest.fixture(scope="module")
def emulator() -> Iterator[ThreadEmulator]:
    with thread_emulator("orgs=1,collections=2,spaces=4,pages=2,files=3,sites=0") as running:
        yield running


def test_backup_and_export_draw_bars_on_a_terminal_and_nothing_on_stdout(emulator: ThreadEmulator, tmp_path: Path) -> None:
    env = clean_env(SYNCD_TENANTS__SRC__BASE_URL=emulator.url, SYNCD_TENANTS__SRC__TOKEN=TOKEN, SYNCD_STATE_DIR=str(tmp_path))
    env.pop("NO_COLOR")
    env["COLUMNS"] = "140"
    backup = tmp_path / "b.db"
    code, err, out = on_a_terminal(["backup", "src", "--out", str(backup), "--with-files"], env)
    assert code == 0, err
    assert "backup src: reading" in err and BAR in err and re.search(r"\d+ objects, \d+ requests", err), err
    files = re.findall(r"backup src: files\s+━+ (\d+)/(\d+)", err)
    assert files and files[-1][0] == files[-1][1] != "0", err
    assert "ETA" in err and "downloaded" in err
    assert "\x1b" not in out and BAR not in out and out.startswith("backup of src written to")

    code, err, out = on_a_terminal(["export", str(backup), str(tmp_path / "out")], env)
    assert code == 0, err
    assert re.search(r"export b\.db: spaces\s+━+ 4/4\s+\d+ files written", err), err
    assert "\x1b" not in out and out.startswith("exported 1 organization(s), 4 spaces")

    # Not on a terminal: no bar, whatever the command prints.
    piped = subprocess.run([str(SYNCD), "export", str(backup), str(tmp_path / "out")], env=env, capture_output=True, text=True)
    assert piped.returncode == 0 and BAR not in piped.stderr and "\x1b" not in piped.stderr
