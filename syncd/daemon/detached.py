"""A blocking call the daemon may give up on: run in a thread of its own, awaited to a deadline.

Why not `anyio.to_thread.run_sync(..., abandon_on_cancel=True)`: its worker threads are not
daemon threads, and the interpreter waits for every such thread at exit. A read that never
returns (a file on a hung network mount) would then keep a daemon told to stop (SIGTERM) alive
for ever. A daemon thread is left behind at exit instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["in_detached_thread"]

T = TypeVar("T")


async def in_detached_thread(work: Callable[[], T], *, deadline: float, name: str) -> T:
    """`work()`'s value (or its exception), run in a daemon thread called `name`; TimeoutError
    when it has not returned within `deadline` seconds (it is left to end on its own, and its
    result then goes nowhere). The loop runs on meanwhile."""
    done = anyio.Event()
    outcome: list[T] = []
    failure: list[BaseException] = []
    token = anyio.lowlevel.current_token()

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task as it is
            failure.append(exc)
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except Exception:  # noqa: BLE001 - the loop has ended (RuntimeError): nobody waits any more
            pass

    threading.Thread(target=run, name=name, daemon=True).start()
    with anyio.fail_after(deadline):
        await done.wait()
    if failure:
        raise failure[0]
    return outcome[0]
