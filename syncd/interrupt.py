"""Stopping a one-shot command (`sync`, `backup`, `mirror apply`, `restore`, `export`) with
SIGINT (Ctrl-C) or SIGTERM (a supervisor, `timeout`, `kill`): cleanly, and saying so.

Why: by default SIGTERM ends Python at once, so no `finally` runs and a sync's run stays
`running` in the state file until the next run finds it. Here the signal cancels the work
instead (anyio cancel scopes): the crawl abandons its run as `cancelled` (the previous
snapshot stays current), an apply closes its run as `cancelled` with its journal consistent
(those writes are synchronous or shielded), a backup removes its unfinished file (the previous
backup stays as it was). Then the command prints one line on stderr and exits 128 + the
signal's number, as shells report it: 130 for SIGINT, 143 for SIGTERM.

A second signal while the first is being handled is not caught: the default action stops
the process at once (SIGINT raises KeyboardInterrupt, SIGTERM ends it).

Inside one long SQLite call (a query over a large or crafted file) Python runs no signal
handler: it waits for the call to return. So the connections that read a file the user named
(`syncd.state.sqlite_file`) have a progress handler, Python code SQLite calls every few
thousand steps: calling it lets a pending signal's handler run (on the main thread), and it
aborts the query once `stop_requested()` (from any thread: an async command reads in worker
threads). The aborted query raises, the command unwinds, and `run` or `stoppable` turns
whatever it raised into Interrupted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

import anyio

from syncd import event_loop
from syncd.errors import SyncdError

__all__ = ["SIGNALS", "Interrupted", "StopFlag", "run", "stop_requested", "stoppable"]

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM)
RUN_CANCELLED = "the run is marked cancelled, what it had finished is kept"
_requested: list[int] = []
"""The signals that asked the command running in this process to stop (within `run` or
`stoppable`); empty when none did."""


def stop_requested() -> bool:
    """Whether SIGINT or SIGTERM asked the running command to stop: what the progress handler
    of SQLite asks (module docstring). Any thread may ask."""
    return bool(_requested)


@contextmanager
def _requests() -> Iterator[None]:
    """The stop requests of the block are forgotten after it (a test runs many commands)."""
    before = list(_requested)
    try:
        yield
    finally:
        _requested[:] = before


class Interrupted(SyncdError):
    """The command was stopped by a signal; `exit_code` is 128 + its number (130, 143)."""

    def __init__(self, signum: int, what: str = RUN_CANCELLED) -> None:
        self.signum = signum
        self.exit_code = 128 + int(signum)
        super().__init__(f"interrupted by {signal.Signals(signum).name}: {what}")


def run(work: Callable[..., Awaitable[T]], *args: Any, what: str = RUN_CANCELLED) -> T:
    """`anyio.run(work, *args)`, cancelled by SIGINT or SIGTERM: then Interrupted (after the
    work's cleanup ran), whatever the cancelled work raised on its way out."""
    if not _on_main_thread():  # signals reach the main thread only: nothing to watch here
        return event_loop.run(work, *args)
    caught: list[int] = []
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async with anyio.create_task_group() as group:

            async def watch(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                with anyio.open_signal_receiver(*SIGNALS) as signals:
                    task_status.started()
                    async for signum in signals:
                        caught.append(int(signum))
                        _requested.append(int(signum))  # reads in worker threads: their queries stop
                        group.cancel_scope.cancel()
                        return

            await group.start(watch)
            try:
                outcome["result"] = await work(*args)
            except Exception as exc:  # raised as it is below, not inside the group's ExceptionGroup
                outcome["error"] = exc
            group.cancel_scope.cancel()  # the work is done: stop watching

    try:
        with _requests():
            event_loop.run(main)
    except BaseException:
        if caught:
            raise Interrupted(caught[0], what) from None
        raise
    if caught and "result" not in outcome:  # (a signal after the work ended changes nothing)
        raise Interrupted(caught[0], what) from None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]  # type: ignore[no-any-return]


def _on_main_thread() -> bool:
    """Python installs signal handlers from the main thread only (a command run in a worker
    thread by a library or a test has no signals of its own to catch)."""
    return threading.current_thread() is threading.main_thread()


class StopFlag:
    """For synchronous work: remembers the first SIGINT/SIGTERM; `check()` raises Interrupted
    at a point where stopping leaves nothing half-done (between two files, say)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.signum: int | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            _requested.append(signum)  # a query under way stops (module docstring)
        else:  # a second signal: stop now
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum, self.what)


@contextmanager
def stoppable(what: str) -> Iterator[StopFlag]:
    """Catch SIGINT and SIGTERM for the block (main thread only) into a StopFlag; the previous
    handlers come back after it, and a signal that came is raised as Interrupted at its end,
    in place of what the block raised (a query the signal stopped raises, see the module
    docstring)."""
    flag = StopFlag(what)
    if not _on_main_thread():  # (the command run by a library or a test in a worker thread)
        yield flag
        return
    previous = {signum: signal.signal(signum, flag._handle) for signum in SIGNALS}
    try:
        with _requests():
            yield flag
    except BaseException:
        flag.check()
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    flag.check()
