"""`syncd` commands as processes of their own, without an interpreter start each.

Most of the CPU the suite spends in child processes went into starting them: a new interpreter
importing syncd, aiohttp, pydantic and the rest, about 1.3 s under coverage, for every one of the
~180 commands, daemons and emulators the tests start. Here one process per test worker (the
zygote) imports all of it once and then forks a child per command. The child is a process of
its own as the tests need it: its own pid, exit status, signals, file descriptors (stdin, stdout
and stderr the caller hands over), working directory, environment and umask; it runs
`syncd.cli.main(args)` as the console script does and ends as an interpreter would (atexit
handlers, flushed streams, the exit status; a KeyboardInterrupt dies of SIGINT), only without
tearing down the thousands of objects the zygote imported. Only the imports are shared.

What a command's import decides from the environment is decided once, in the zygote, from a
neutral one (`_ZYGOTE_ENVIRONMENT`); everything else reads the child's. Tests still `exec` the
real thing where the start itself is what they check: the installed
console script (tests/console_script.py: version, completion, one `--json` command), a process's
peak memory (a forked child's counts the zygote's imports), a terminal (tests/terminal.py), and
a command whose environment must change what is imported.

Coverage follows the children through `patch = ["fork"]` (pyproject.toml): each child restarts
measuring and saves its own data file; the zygote saves what its imports ran when it exits. A
child whose environment lacks coverage's variable runs unmeasured, as a new interpreter would.

Run as a script, this file is the zygote: `python tests/cli_zygote.py SOCKET`.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from syncd.emulator.process import EmulatorProcess

__all__ = ["ForkedProcess", "emulator_process", "launch", "run", "spawn", "started"]

_MESSAGE = 1 << 20  # a request: argv, cwd, umask and the environment, as JSON
_START_TIMEOUT = 120.0
_DECIDED_AT_IMPORT = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM", "COLORTERM", "TTY_COMPATIBLE",
                      "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES")  # fmt: skip
"""What rich reads when a Console is made, and syncd's commands make theirs when imported: the
zygote imports without them, so those consoles ask the environment each time (a child's, then)."""
_ZYGOTE_ENVIRONMENT = {k: v for k, v in os.environ.items() if k not in _DECIDED_AT_IMPORT and not k.startswith("SYNCD_")}
"""The zygote's own environment: this process's as it was before any test changed it (this module
is imported when the tests are collected), without what a command's import would fix."""


# --- the caller's side ----------------------------------------------------------------------


class ForkedProcess:
    """A command the zygote forked: the part of `subprocess.Popen` the tests use."""

    def __init__(self, args: Sequence[str], conn: socket.socket, pid: int) -> None:
        self.args, self.pid, self._conn = list(args), pid, conn
        self.returncode: int | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        self.captured: tuple[IO[bytes], IO[bytes]] | None = None
        """Files its stdout and stderr go to (`started`): what `communicate` reads."""

    def _ended(self, message: bytes) -> int:
        if not message.startswith(b"exit "):
            raise RuntimeError(f"the CLI zygote went away while {self.args} ran (got {message!r})")
        self.returncode = int(message.split()[1])
        self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            self._conn.setblocking(False)
            try:
                message = self._conn.recv(64)
            except BlockingIOError:
                return None
            finally:
                if self.returncode is None and self._conn.fileno() != -1:
                    self._conn.setblocking(True)
            self._ended(message)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                message = self._conn.recv(64)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self._ended(message)
        assert self.returncode is not None
        return self.returncode

    def output(self) -> tuple[bytes, bytes]:
        """What a `started` process wrote to stdout and stderr (its files closed after)."""
        assert self.captured is not None, "output() needs a process from started()"
        written = []
        for file in self.captured:
            file.seek(0)
            written.append(file.read())
            file.close()
        return written[0], written[1]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the end; what it wrote to stdout and stderr, as text."""
        self.wait(timeout)
        out, err = self.output()
        return out.decode(errors="replace"), err.decode(errors="replace")

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Zygote:
    """The zygote of this test process: started on first use, stopped when the process exits."""

    _current: _Zygote | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="syncd-zygote-")
        self.path = os.path.join(self.dir, "socket")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), self.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_ZYGOTE_ENVIRONMENT,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the CLI zygote did not start: {line!r}, exit {self.process.poll()}")

    @classmethod
    def current(cls) -> _Zygote:
        with cls._lock:
            if cls._current is None or cls._current.process.poll() is not None:
                cls._current = cls()
                atexit.register(cls._current.stop)
            return cls._current

    def stop(self) -> None:
        """EOF on its stdin: the zygote exits (saving its coverage data)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        Path(self.path).unlink(missing_ok=True)
        os.rmdir(self.dir)


def spawn(
    args: Sequence[str | Path],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    umask: int = 0o022,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
) -> ForkedProcess:
    """`syncd ARGS` in a forked child, in `env` and `cwd` (else this process's, as `Popen`
    gives a child); `stdin`/`stdout`/`stderr` are file descriptors it gets (dup'ed: the caller
    keeps and closes its own), /dev/null where None."""
    argv = [str(a) for a in args]
    env = dict(os.environ) if env is None else env
    request = json.dumps({"args": argv, "env": env, "cwd": str(cwd or os.getcwd()), "umask": umask}).encode()
    null = os.open(os.devnull, os.O_RDWR)
    fds = [null if fd is None else fd for fd in (stdin, stdout, stderr)]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.settimeout(_START_TIMEOUT)
        conn.connect(_Zygote.current().path)
        socket.send_fds(conn, [request], fds)
        answer = conn.recv(64)
    except BaseException:
        conn.close()
        raise
    finally:
        os.close(null)
    if not answer.startswith(b"pid "):
        conn.close()
        raise RuntimeError(f"the CLI zygote could not start {argv}: {answer!r}")
    conn.settimeout(None)
    return ForkedProcess(["syncd", *argv], conn, int(answer.split()[1]))


def started(
    args: Sequence[str | Path], *, env: dict[str, str] | None = None, cwd: str | Path | None = None, umask: int = 0o022
) -> ForkedProcess:
    """`syncd ARGS` running, its stdout and stderr kept in files for `communicate`: a
    `Popen(..., stdout=PIPE, stderr=PIPE, text=True)` that the test signals before reading."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    try:
        process = spawn(args, env=env, cwd=cwd, umask=umask, stdout=out.fileno(), stderr=err.fileno())
    except BaseException:
        out.close()
        err.close()
        raise
    process.captured = (out, err)
    return process


def launch(args: list[str], env: dict[str, str] | None = None) -> ForkedProcess:
    """`syncd ARGS` with its stdout a text pipe (what `syncd.emulator.process.emulator_process`
    reads its start-up report from), in this process's working directory and `env` (else this
    process's environment)."""
    read_end, write_end = os.pipe()
    try:
        process = spawn(args, env=env, stdout=write_end)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    process.stdout = open(read_end, encoding="utf-8")  # noqa: SIM115 - closed by the caller, as Popen's
    return process


def emulator_process(**options: Any) -> contextlib.AbstractContextManager[EmulatorProcess]:
    """`syncd.emulator.process.emulator_process`, the emulator forked from the zygote."""
    from syncd.emulator.process import emulator_process as start_emulator

    return start_emulator(launch=launch, **options)


def run(
    args: Sequence[str | Path],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    umask: int = 0o022,
    timeout: float = 300,
    text: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """`syncd ARGS` to its end, as `subprocess.run(..., capture_output=True, timeout=T, text=...)`
    answers (killed after `timeout`, raising TimeoutExpired); its output through files, so that no
    pipe fills."""
    process = started(args, env=env, cwd=cwd, umask=umask)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        process.output()
        raise
    out, err = process.output()
    if text:
        return subprocess.CompletedProcess(process.args, process.returncode, *(part.decode(errors="replace") for part in (out, err)))
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


_COMMAND = """\
#!{python} -IS
# `syncd` for a shell (tests/cli_zygote.py `write_command`): the command forked by the zygote at
# {socket}, with this process's arguments, environment, working directory, umask and standard
# streams. Signals that stop or wake a process are handed on to it; this process ends as it did.
import json, os, signal, socket, sys

conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
conn.connect({socket!r})
umask = os.umask(0)
os.umask(umask)
request = {{"argv0": sys.argv[0], "args": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "umask": umask, "tied": True}}
socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
answer = conn.recv(64).decode()
if not answer.startswith("pid "):
    sys.exit(f"syncd: the CLI zygote could not start the command: {{answer!r}}")
pid = int(answer.split()[1])
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(signum, lambda signum, frame: os.kill(pid, signum))
answer = conn.recv(64).decode()  # retried after a handed-on signal (PEP 475)
if not answer.startswith("exit "):
    sys.exit(f"syncd: the CLI zygote went away while the command ran ({{answer!r}})")
code = int(answer.split()[1])
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def write_command(folder: Path) -> Path:
    """A `syncd` executable in `folder` that a shell runs like the console script: each run is a
    child of this test process's zygote, its interpreter start shared (tests/docs_commands.py puts
    it first on a page's PATH). The zygote kills the child if this `syncd` is killed first."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "syncd"
    path.write_text(_COMMAND.format(python=sys.executable, socket=_Zygote.current().path), encoding="utf-8")
    path.chmod(0o755)
    return path


# --- the zygote ------------------------------------------------------------------------------


def _serve(path: str) -> tuple[dict[str, Any], list[int]]:
    """Import syncd, then fork a child per request until stdin ends. Returns only in a child:
    its request and file descriptors."""
    import selectors

    import syncd.cli

    syncd.cli._register(None)  # every command and what it imports, as `syncd --help` would
    for name in ("syncd.daemon.service", "syncd.emulator.server", "syncd.state.pg_database", "psycopg"):
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "request")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    children: dict[int, socket.socket] = {}
    gc.freeze()  # what the imports made is never collected: a child does not copy it page by page
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select():
            if key.data == "stdin" and not os.read(sys.stdin.fileno(), 4096):
                sys.exit(0)
            if key.data == "child":
                os.read(wake_r, 4096)
            if isinstance(key.data, int):  # a tied caller's end: its command must not outlive it
                selector.unregister(key.fileobj)
                if not key.fileobj.recv(64) and key.data in children:
                    os.kill(key.data, signal.SIGKILL)
            if key.data != "request":
                continue
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, _MESSAGE, 3)
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                selector.close()
                listener.close()
                conn.close()
                for other in children.values():
                    other.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                return request, fds
            for fd in fds:
                os.close(fd)
            conn.send(f"pid {pid}".encode())
            children[pid] = conn
            if request.get("tied"):
                selector.register(conn, selectors.EVENT_READ, pid)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(conn)
            try:
                conn.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())
            except OSError:
                pass  # the caller is gone
            conn.close()


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """The child: the process the request describes, then `syncd.cli.main` as the console
    script runs it. Standard streams are made as a new interpreter makes them for these files."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "COVERAGE_PROCESS_CONFIG" not in os.environ:
        _unmeasured()
    time.tzset()
    os.umask(request["umask"])
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a new interpreter has it, whatever the zygote inherited
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = sys.__stdout__.encoding if sys.__stdout__ is not None else "utf-8"

    def stream(fd: int, mode: str, errors: str, line_buffering: bool) -> io.TextIOWrapper:
        binary = open(fd, mode + "b", buffering=-1, closefd=False)  # noqa: SIM115 - the process's own stream
        return io.TextIOWrapper(binary, encoding=encoding, errors=errors, line_buffering=line_buffering,
                                write_through=unbuffered and mode == "w")  # fmt: skip

    sys.stdin = sys.__stdin__ = stream(0, "r", "strict", False)
    sys.stdout = sys.__stdout__ = stream(1, "w", "strict", os.isatty(1))
    sys.stderr = sys.__stderr__ = stream(2, "w", "backslashreplace", True)
    sys.argv = [request.get("argv0", "syncd"), *request["args"]]  # how it was called (a `write_command` script's path)
    from syncd.cli import main

    try:
        code = main(list(request["args"]))
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # a new interpreter prints it and dies of SIGINT
        traceback.print_exc()
        _exit(0, then=signal.SIGINT)
    except BaseException:  # what a new interpreter would print before exiting 1
        traceback.print_exc()
        code = 1
    _exit(code)


def _unmeasured() -> None:
    """An environment without coverage's variable starts a new interpreter unmeasured (a test
    asks for that: tests/test_fleet_acceptance.py); the fork restarted measuring, so stop it."""
    try:
        from coverage import Coverage
    except ImportError:
        return
    measuring = Coverage.current()
    if measuring is not None:
        measuring.stop()


def _exit(code: object, then: int | None = None) -> None:
    """End as an interpreter does (atexit handlers, coverage's save among them, then the streams
    flushed) without tearing down the thousands of objects the zygote imported: that alone took
    a third of a second a command."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as Python does when flushing stdout fails at exit
    if then is not None:
        signal.signal(then, signal.SIG_DFL)
        os.kill(os.getpid(), then)
    os._exit(code or 0)


if __name__ == "__main__":
    del sys.path[0]  # tests/: its module names must not hide the ones syncd imports
    _become(*_serve(sys.argv[1]))
