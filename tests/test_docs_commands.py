"""Every command block of the documentation runs, as a user would paste it (issue 42, item 4).

One test a page (tests/docs_commands.py says the format): the page's commands run in order
against the installed `syncd` and the emulator over loopback, and a command that exits
otherwise than the page says, or does not show the lines the page shows, fails the page's
test with its line, the command, the lines expected and the output's tail. The other tests
hold the harness to its word: a wrong command fails, ports are each page's own, the format's
rules (continuations, here-documents, `...`, exit comments, jobs, cd and export) are read and
run as written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.docs_commands import (
    PAGE_PORTS,
    DocsCommandFailed,
    PageRun,
    first_missing,
    page_ports,
    pages_with_commands,
    parse_page,
    run_page,
)

REPO = Path(__file__).resolve().parent.parent
PAGES = pages_with_commands(REPO)
@pytest.mark.parametrize("page", PAGES)
def test_page_commands_do_what_the_page_says(page: str, tmp_path: Path) -> None:
    failure = None
    try:
        run_page(page, (REPO / page).read_text(encoding="utf-8"), tmp_path, REPO)
    except DocsCommandFailed as failed:
        failure = str(failed)
    if failure is not None:  # outside the except: the report is the page's message alone
        pytest.fail(failure, pytrace=False)


def test_the_guides_of_the_three_stories_have_commands() -> None:
    for page in ("README.md", "docs/getting-started.md", "docs/guides/backup-restore.md", "docs/guides/mirror.md", "docs/guides/daemon.md"):
        assert page in PAGES, f"{page} has no ```console block: its commands would run nowhere"


def test_pages_use_ports_of_their_own() -> None:
    """Pages run at once on separate workers: each names only ports of its range, and no two
    ranges meet, so no two pages ever share a port."""
    ranges = sorted(PAGE_PORTS.items(), key=lambda item: item[1].start)
    for (page_a, a), (page_b, b) in zip(ranges, ranges[1:]):
        assert a.stop <= b.start, f"{page_a} and {page_b} share ports {b.start}..{min(a.stop, b.stop) - 1}"
    for page in PAGES:
        ports = page_ports(parse_page((REPO / page).read_text(encoding="utf-8")))
        if not ports:
            continue
        assert page in PAGE_PORTS, f"{page} names ports {sorted(ports)}: give it a range of its own in PAGE_PORTS"
        outside = sorted(port for port in ports if port not in PAGE_PORTS[page])
        assert not outside, f"{page} names ports {outside}, outside its range {PAGE_PORTS[page]}"


def test_a_page_with_a_wrong_command_fails(tmp_path: Path) -> None:
    page = "Verify a restore:\n\n```console\n$ syncd mirror verify --no-such-option\n```\n"
    with pytest.raises(DocsCommandFailed) as failed:
        run_page("docs/guides/broken.md", page, tmp_path, REPO)
    message = str(failed.value)
    print(message)  # the report shows what a broken guide looks like in the suite's output
    assert message.startswith("docs/guides/broken.md:4 (block at line 3): exit status 2, the page expects 0")
    assert "$ syncd mirror verify --no-such-option" in message
    assert "No such option: --no-such-option" in message


def test_the_lines_a_page_shows_are_checked(tmp_path: Path) -> None:
    wrong = "```console\n$ echo 'syncd 0.1.0'\nsyncd 0.0.0-not-this-one\n```\n"
    with pytest.raises(DocsCommandFailed, match="the output lacks the line 'syncd 0.0.0-not-this-one'"):
        run_page("wrong.md", wrong, tmp_path / "wrong", REPO)
    ran = run_page("right.md", "```console\n$ echo 'syncd 0.1.0'\nsyncd ...\n```\n", tmp_path / "right", REPO)
    assert ran[0].output == "syncd 0.1.0\n"


def test_an_exit_comment_sets_the_last_commands_status(tmp_path: Path) -> None:
    page = (
        "<!-- exit: 2 -->\n"
        "```console\n$ true\n$ echo 'Error: No such option: --x' >&2; exit 2\n...\n"
        "... No such option: ...\n```\n"
    )
    run_page("exit.md", page, tmp_path / "exit", REPO)
    with pytest.raises(DocsCommandFailed, match="exit status 0, the page expects 2"):
        run_page("exit.md", "<!-- exit: 2 -->\n```console\n$ true\n```\n", tmp_path / "zero", REPO)
    with pytest.raises(DocsCommandFailed, match="exit status 2, the page expects 0"):
        run_page("first.md", "<!-- exit: 2 -->\n```console\n$ exit 2\n$ true\n```\n", tmp_path / "first", REPO)


def test_first_missing_keeps_the_order_and_reads_dots() -> None:
    output = "a first line\n  round 1: 41 operations, 2.5s; left: nothing  \nequal\n"
    assert first_missing(["a first line", "...", "round 1: ... left: nothing", "equal"], output) is None
    assert first_missing(["equal", "a first line"], output) == "a first line"
    assert first_missing(["round 1"], output) == "round 1"  # a line is compared whole, not as a part


def test_blocks_are_read_as_a_shell_reads_them() -> None:
    page = "\n".join([
        "```bash",
        "$ not-a-command",
        "```",
        "- in a list:",
        "",
        "  <!-- exit: 3 -->",
        "  ```console",
        "  $ syncd emulator serve --port 8991 \\",
        "      --generate orgs=1 &",
        "  emulator serving ...",
        "",
        "  $ cat > config/syncd.toml <<'EOF'",
        "  [tenants.src]",
        "  $ not a command: inside the here-document",
        "  EOF",
        "  $ syncd orgs src",
        "  ```",
        "```console",
        "$ syncd --version",
        "```",
    ])
    first, second = parse_page(page)
    serve, heredoc, orgs = first.commands
    assert (first.line, serve.line, heredoc.line, orgs.line) == (7, 8, 12, 16)
    assert serve.background and serve.run_text == "syncd emulator serve --port 8991 \\\n    --generate orgs=1"
    assert serve.shown == ["emulator serving ..."]
    assert heredoc.text.splitlines()[-1] == "EOF" and heredoc.shown == []
    assert [c.exit_status for c in first.commands] == [0, 0, 3]
    assert [c.text for c in second.commands] == ["syncd --version"] and second.commands[0].exit_status == 0
    assert page_ports([first, second]) == {8991}


def test_a_page_runs_in_a_folder_and_session_of_its_own(tmp_path: Path) -> None:
    page = "\n".join([
        "```console",
        "$ ls config",
        "...",
        "syncd.example.toml",
        "$ mkdir -p notes/today && cd notes",
        "$ export GUIDE_WORD=carried",
        "$ cd today && echo \"$GUIDE_WORD in $(basename \"$PWD\")\"",
        "carried in today",
        "$ command -v syncd; echo \"$HOME\"; env | grep -c '^SYNCD_' || true",
        "```",
    ])
    os.environ["SYNCD_FROM_OUTSIDE"] = "1"
    try:
        ran = run_page("session.md", page, tmp_path, REPO)
    finally:
        del os.environ["SYNCD_FROM_OUTSIDE"]
    where, home, syncd_variables = ran[-1].output.split()
    assert where == str(tmp_path / "bin" / "syncd")  # the zygote's (tests/cli_zygote.py write_command)
    assert Path(home).is_relative_to(tmp_path)
    assert syncd_variables == "0"


def test_a_job_is_waited_for_and_stopped_by_its_pid(tmp_path: Path) -> None:
    """A job's port is open before the next command runs; `kill %1` stops it and checks how
    it ended; a job still running at the end of the page is stopped with its group."""
    page = "\n".join([
        "```console",
        "$ syncd emulator serve --port 8992 --generate orgs=1,spaces=1,pages=1 --rate-limit 0 &",
        "emulator serving http://127.0.0.1:8992/v1 (admin: http://127.0.0.1:8992/_emulator), profile default",
        "$ sleep 600 &",
        "$ python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8992/_emulator/info').status)\"",
        "200",
        "$ kill -INT %1",
        "emulator serving ...",
        "```",
    ])
    run = PageRun("jobs.md", tmp_path, REPO)
    ran = run.run(parse_page(page))
    assert ran[-2].output.strip() == "200"
    assert all(job.reaped for job in run.jobs)
    for job in run.jobs:
        with pytest.raises(ProcessLookupError):
            os.kill(job.process.pid, 0)
