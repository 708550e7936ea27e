"""The documentation's command blocks, run as a user would paste them (issue 42, item 4).

A guide whose command is wrong fails the suite: tests/test_docs_commands.py runs every page
of `docs/` and README.md that holds command blocks, one test a page, against the real CLI and
the emulator over loopback (no mocks).

The format (other writers follow it):

- A ```console fenced block (indented too, in a list item) is a command block; other fences,
  ```bash and ```toml among them, are never run (the README's first ```bash block is its
  set-up: the suite already runs in the venv it makes).
- A line starting with `$ ` is a command; a trailing `\\` continues it on the next line, and a
  here-document (`cat > config/syncd.toml <<'EOF'`) takes the lines up to its end word.
- The lines after a command, up to the next `$ `, are output it must show: each non-blank
  line, stripped, must be one of the lines of its stdout+stderr, in the order shown (the rest
  of the output may be anything). A line `...` stands for any lines, and `...` inside a line
  for any text (ids, times).
- A command must exit 0, unless an HTML comment right before the block, `<!-- exit: N -->`,
  says N: that applies to the block's last command.
- A command ending in ` &` runs in the background, like a shell's job. The harness keeps its
  PID, and waits like a user would before the next command: until the port its command line
  names (`--port N`, or `--listen HOST:PORT`) accepts connections, then until the lines
  shown under it have appeared in its output, 30 s at most each (a job that exits first
  fails the page). `kill %N` (optionally `kill -INT %N`, `kill -s TERM %N`) signals the
  page's Nth background job, waits for it to end (60 s) and checks its exit status and the
  lines shown under `kill` against the job's whole output. At the end of the page every job
  still running is stopped, with its process group (SIGTERM, then SIGKILL after 10 s), by
  its PID, never by name.
- Each page runs in a fresh temporary folder holding a copy of the repository's `config/`
  (without a local `config/syncd.toml`, which a page writes itself when it needs one), with
  this interpreter's bin folder first on PATH (the installed `moto_server`, `mkdocs`...), and
  before it a `syncd` that runs `syncd.cli.main` in a process forked by the test worker's CLI
  zygote (tests/cli_zygote.py `write_command`): its own process, exit status, signals, working
  directory and environment, only without an interpreter start each (0.7-1.3 s of CPU: the
  pages took 199 s of CPU with them, 74 s without; the installed console script's start is
  tested on its own, tests/console_script.py). HOME inside
  the temporary folder, no `SYNCD_*` variable from the outside, and COLUMNS=200: output
  goes to a file, and lines are wrapped as on a terminal that wide (rich's default
  elsewhere is 80), so a page shows a line whole, as most users' terminals do. Each command
  runs in its own `bash -c` from there; `cd` and `export` carry over to the next command as
  in one shell session (a plain `NAME=value` without `export` does not: export it, or put
  it before the command). A foreground command has COMMAND_TIMEOUT seconds, and what it leaves running in
  its process group is stopped when it ends. Processes are watched through pidfds (Linux).
- Pages run side by side (xdist workers), so each page uses ports of its own: PAGE_PORTS
  gives each page a range, and a test fails when a page names a port outside its range.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cli_zygote import write_command

COMMAND_TIMEOUT = 180.0
"""Seconds one foreground command may take (a first copy of a small organization takes a few)."""
READY_TIMEOUT = 30.0
"""Seconds a background job has to listen on its port, and again to show its lines."""
STOP_TIMEOUT = 60.0
"""Seconds a job stopped by `kill %N` has to end (a daemon drains its running runs)."""
TAIL_LINES = 40
NOT_HANDED_ON = frozenset({"COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START"})
"""A page's commands run as a user's would, not measured by coverage (which hands itself to
children through these): they check what the pages say, every path they take is measured by
the tests of its own, and coverage would cost the pages about 30% more CPU (0.3 s a command)."""
COLUMNS = 200
"""The terminal width commands write for (module docstring)."""

PAGE_PORTS: dict[str, range] = {
    "docs/getting-started.md": range(8800, 8810),
    "docs/guides/backup-restore.md": range(8810, 8820),
    "docs/guides/mirror.md": range(8820, 8830),
    "docs/guides/daemon.md": range(8830, 8840),
    "docs/guides/fleet.md": range(8840, 8850),
    "docs/guides/web-page.md": range(8850, 8860),
    "docs/guides/docker.md": range(8860, 8870),
    "docs/guides/tls-proxy.md": range(8870, 8880),
    "docs/guides/scoping.md": range(8880, 8890),
    "docs/guides/retention.md": range(8890, 8900),
    "README.md": range(8900, 8910),
    "docs/guides/object-storage.md": range(8910, 8920),
    "docs/guides/git-history.md": range(8920, 8930),
    "tests/test_docs_commands.py": range(8990, 9000),  # the harness's own pages, held in the tests
}
"""Each page's ports: pages run at once on separate workers, so no two may share one."""

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[\w+-]*)")
_EXIT = re.compile(r"^\s*<!--\s*exit:\s*(\d+)\s*-->\s*$")
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_KILL = re.compile(r"^kill(?:\s+-(?:s\s+)?(?:SIG)?([A-Z]+|\d+))?\s+%(\d+)$")
_PORT_OPTION = re.compile(r"--port[= ](\d+)\b")
_LISTEN_OPTION = re.compile(r"--listen[= ](\S+):(\d+)\b")
_PORTS_NAMED = (
    _PORT_OPTION,
    re.compile(r"--listen[= ]\S*:(\d+)\b"),
    re.compile(r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):(\d+)\b"),
    re.compile(r"^\s*port\s*=\s*(\d+)\b", re.MULTILINE),
    re.compile(r"\bSYNCD_\w*PORT=(\d+)\b"),
)


@dataclass
class Command:
    """One `$ ` command of a block: its text as bash reads it and what it must show."""

    text: str
    line: int
    block_line: int
    shown: list[str] = field(default_factory=list)
    exit_status: int = 0

    @property
    def background(self) -> bool:
        return self.text.rstrip().endswith("&") and not self.text.rstrip().endswith("&&")

    @property
    def run_text(self) -> str:
        """The command without its trailing `&` (the harness is the one that backgrounds it)."""
        return self.text.rstrip()[:-1].rstrip() if self.background else self.text


@dataclass
class Block:
    line: int
    commands: list[Command]


class DocsCommandFailed(AssertionError):
    """A page's command did not do what the page says: the message names the page, the
    block's and the command's lines, the command, what was expected and the output's tail."""


# -- reading a page --------------------------------------------------------------------------


def parse_page(text: str) -> list[Block]:
    """The ```console blocks of a markdown page, with their commands, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, info = len(opened["indent"]), opened["fence"], opened["info"]
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        if info == "console":
            body = [line[indent:] if line[:indent].isspace() else line.lstrip() for line in lines[i + 1 : end]]
            commands = _commands(body, first_line=i + 2, block_line=i + 1)
            if commands:
                status = _exit_before(lines, i)
                if status is not None:
                    commands[-1].exit_status = status
                blocks.append(Block(i + 1, commands))
        i = end + 1
    return blocks


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}


def _exit_before(lines: list[str], fence_index: int) -> int | None:
    j = fence_index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    found = _EXIT.match(lines[j]) if j >= 0 else None
    return int(found[1]) if found else None


def _commands(body: list[str], first_line: int, block_line: int) -> list[Command]:
    commands: list[Command] = []
    i = 0
    while i < len(body):
        line = body[i]
        if not line.startswith("$ "):
            if commands and line.strip():
                commands[-1].shown.append(line.strip())
            i += 1
            continue
        start = i
        parts = [line[2:]]
        while parts[-1].endswith("\\") and i + 1 < len(body):
            i += 1
            parts.append(body[i])
        heredoc = _HEREDOC.search("\n".join(parts))
        if heredoc:
            word = heredoc[2]
            while i + 1 < len(body):
                i += 1
                parts.append(body[i])
                if body[i].strip() == word:
                    break
        commands.append(Command("\n".join(parts), first_line + start, block_line))
        i += 1
    return commands


def ports_named(text: str) -> set[int]:
    """The ports a page's commands name: options, loopback URLs, `port = N` in a file they
    write, `SYNCD_..._PORT=N`. Port 0 (a free one) is no one's."""
    found = {int(port) for pattern in _PORTS_NAMED for port in pattern.findall(text)}
    return {port for port in found if port}


def page_ports(blocks: list[Block]) -> set[int]:
    return ports_named("\n".join(c.text + "\n" + "\n".join(c.shown) for b in blocks for c in b.commands))


def pages_with_commands(repo: Path) -> list[str]:
    """Every page of docs/ and README.md that holds a command block, as repository paths."""
    candidates = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    return [
        path.relative_to(repo).as_posix() for path in candidates if path.is_file() and parse_page(path.read_text(encoding="utf-8"))
    ]


# -- comparing output ------------------------------------------------------------------------


def _line_pattern(shown: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part.strip()) for part in shown.split("...")) + r"\Z", re.DOTALL)


def first_missing(shown: list[str], output: str) -> str | None:
    """The first shown line the output lacks, in order (None: every one is there)."""
    lines = [line.strip() for line in output.splitlines()]
    at = 0
    for expected in shown:
        if expected == "...":
            continue
        pattern = _line_pattern(expected)
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        if at == len(lines):
            return expected
        at += 1
    return None


def _tail(output: str) -> str:
    lines = output.splitlines()
    cut = f"[... {len(lines) - TAIL_LINES} lines before]\n" if len(lines) > TAIL_LINES else ""
    return cut + "\n".join(lines[-TAIL_LINES:])


# -- processes -------------------------------------------------------------------------------


@dataclass
class Job:
    """A background command: the harness's own child, leader of its process group. It is
    reaped only once its group was stopped, so its PID (the group's id) cannot be reused."""

    command: Command
    process: subprocess.Popen[bytes]
    log: Path
    reaped: bool = False

    @property
    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def ended(self, timeout: float = 0.0) -> bool:
        return _ended(self.process.pid, timeout)

    def status(self) -> int:
        return _status(self.process.pid)

    def stop(self) -> None:
        if not self.reaped:
            _stop_group(self.process.pid, signal.SIGTERM, grace=10.0)
            self.process.wait()
            self.reaped = True


def _ended(pid: int, timeout: float) -> bool:
    """Whether `pid` (our child) has exited, waiting up to `timeout`, without reaping it."""
    fd = os.pidfd_open(pid)
    try:
        return bool(select.select([fd], [], [], max(timeout, 0.0))[0])
    finally:
        os.close(fd)


def _status(pid: int) -> int:
    """An exited, unreaped child's exit status as a shell's `$?` says it (128 + N when
    signal N ended it)."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    assert info is not None
    return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _stop_group(pgid: int, signum: int, grace: float) -> None:
    """Stop the group whose leader `pgid` is our unreaped child: `signum`, then SIGKILL for
    whatever is left after `grace` seconds. While the leader is unreaped the id is the group's."""
    _signal_group(pgid, signum)
    _ended(pgid, grace)
    _signal_group(pgid, signal.SIGKILL)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _listen_address(command: str) -> tuple[str, int] | None:
    listen = _LISTEN_OPTION.search(command)
    if listen:
        host = listen[1].strip("[]")
        return ("127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host), int(listen[2])
    option = _PORT_OPTION.search(command)
    if option and int(option[1]):
        return "127.0.0.1", int(option[1])
    return None


# -- running a page --------------------------------------------------------------------------


@dataclass
class Ran:
    """What one command took: for the report of a page's wall time."""

    command: Command
    seconds: float
    output: str


class PageRun:
    """One page's session: its folder, environment, working directory and jobs."""

    def __init__(self, page: str, root: Path, repo: Path) -> None:
        self.page, self.root = page, root
        self.work = root / "work"
        self.logs = root / "logs"
        home = root / "home"
        for folder in (self.work, self.logs, home):
            folder.mkdir(parents=True, exist_ok=True)
        if (repo / "config").is_dir():
            shutil.copytree(repo / "config", self.work / "config", ignore=shutil.ignore_patterns("syncd.toml"))
        env = {key: value for key, value in os.environ.items() if not key.upper().startswith("SYNCD_") and key not in NOT_HANDED_ON}
        command = write_command(root / "bin")  # `syncd`, forked by the zygote (module docstring)
        env["PATH"] = os.pathsep.join([str(command.parent), str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
        env["HOME"] = str(home)
        env["COLUMNS"] = str(COLUMNS)
        env.pop("PWD", None)
        env.pop("OLDPWD", None)
        self.env, self.cwd = env, self.work
        self.jobs: list[Job] = []
        self.ran: list[Ran] = []
        self._count = 0

    def run(self, blocks: list[Block]) -> list[Ran]:
        try:
            for block in blocks:
                for command in block.commands:
                    clock = time.monotonic()
                    output = self._one(command)
                    self.ran.append(Ran(command, time.monotonic() - clock, output))
        finally:
            self.close()
        return self.ran

    def close(self) -> None:
        for job in self.jobs:
            job.stop()

    def _fail(self, command: Command, problem: str, output: str) -> DocsCommandFailed:
        shown = "\n".join(f"    {line}" for line in command.shown) or "    (no lines)"
        return DocsCommandFailed(
            f"{self.page}:{command.line} (block at line {command.block_line}): {problem}\n"
            f"  command:\n" + "\n".join(f"    $ {line}" for line in command.text.splitlines()) + "\n"
            f"  the page shows:\n{shown}\n"
            f"  output (tail):\n" + "\n".join(f"    {line}" for line in _tail(output).splitlines())
        )

    def _one(self, command: Command) -> str:
        """Run `command`; its output (a job's: what it printed so far)."""
        self._count += 1
        kill = _KILL.match(command.text.strip())
        if kill:
            return self._kill(command, kill[1] or "TERM", int(kill[2]))
        if command.background:
            return self._background(command)
        return self._foreground(command)

    def _foreground(self, command: Command) -> str:
        log = self.logs / f"{self._count:03d}.out"
        state = self.logs / f"{self._count:03d}.state"
        # After the command: its working directory and exported variables, for the next one.
        script = (
            f"{command.run_text}\n__docs_status=$?\n"
            f"{{ printf '%s\\0' \"$PWD\"; env -0; }} > '{state}' 2>/dev/null\nexit $__docs_status\n"
        )
        with open(log, "wb") as out:
            process = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", script], cwd=self.cwd, env=self.env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        timed_out = not _ended(process.pid, COMMAND_TIMEOUT)
        _stop_group(process.pid, signal.SIGKILL if timed_out else signal.SIGTERM, grace=5.0)
        status = process.wait()
        status = status if status >= 0 else 128 - status  # as a shell's `$?` says it
        output = log.read_text(encoding="utf-8", errors="replace")
        if timed_out:
            raise self._fail(command, f"still running after {COMMAND_TIMEOUT:.0f} s (stopped)", output)
        self._carry_over(state)
        self._check(command, status, output)
        return output

    def _carry_over(self, state: Path) -> None:
        if not state.is_file():
            return
        cwd, *variables = state.read_bytes().decode("utf-8", "replace").split("\0")
        env = dict(item.split("=", 1) for item in variables if "=" in item)
        for key in ("_", "SHLVL", "PWD", "OLDPWD"):
            env.pop(key, None)
        self.env, self.cwd = env, Path(cwd)

    def _check(self, command: Command, status: int, output: str) -> None:
        if status != command.exit_status:
            raise self._fail(command, f"exit status {status}, the page expects {command.exit_status}", output)
        missing = first_missing(command.shown, output)
        if missing is not None:
            raise self._fail(command, f"the output lacks the line {missing!r} (in the order shown)", output)

    def _background(self, command: Command) -> str:
        log = self.logs / f"job-{len(self.jobs) + 1}.out"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", command.run_text], cwd=self.cwd, env=self.env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        job = Job(command, process, log)
        self.jobs.append(job)
        address = _listen_address(command.run_text)
        if address is not None:
            where = f"{address[0]}:{address[1]}"
            deadline = time.monotonic() + READY_TIMEOUT
            while not _port_open(*address):
                if job.ended(timeout=0.1):
                    raise self._fail(command, f"the job ended (exit status {job.status()}) before {where} listened", job.output)
                if time.monotonic() > deadline:
                    raise self._fail(command, f"nothing listens on {where} after {READY_TIMEOUT:.0f} s", job.output)
        deadline = time.monotonic() + READY_TIMEOUT
        while (missing := first_missing(command.shown, job.output)) is not None:
            if job.ended(timeout=0.1) and first_missing(command.shown, job.output) is not None:
                raise self._fail(command, f"the job ended (exit status {job.status()}) without showing {missing!r}", job.output)
            if time.monotonic() > deadline:
                raise self._fail(command, f"the job has not shown {missing!r} after {READY_TIMEOUT:.0f} s", job.output)
        return job.output

    def _kill(self, command: Command, name: str, number: int) -> str:
        if not 1 <= number <= len(self.jobs):
            raise self._fail(command, f"there is no job %{number} (the page started {len(self.jobs)})", "")
        job = self.jobs[number - 1]
        signum = int(name) if name.isdigit() else getattr(signal, f"SIG{name}", None)
        if signum is None:
            raise self._fail(command, f"unknown signal {name}", "")
        if not job.ended():
            _signal_group(job.process.pid, signum)
        if not job.ended(STOP_TIMEOUT):
            sent = signal.Signals(signum).name
            raise self._fail(command, f"job %{number} still runs {STOP_TIMEOUT:.0f} s after {sent}", job.output)
        self._check(command, job.status(), job.output)
        return job.output


def run_page(page: str, text: str, root: Path, repo: Path) -> list[Ran]:
    """Run `text`'s command blocks as page `page` in the folder `root`; raises
    DocsCommandFailed at the first command that does not do what the page says."""
    return PageRun(page, root, repo).run(parse_page(text))
