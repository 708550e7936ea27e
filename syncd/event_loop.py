"""Which event loop the long commands run on: uvloop where it is installed, asyncio otherwise.

Why: a crawl with no rate limit to wait for is bound by syncd's own CPU, and a fair part of it
is the event loop's (sockets, callbacks, timers); uvloop does that part in C. It is an optional
extra (`pip install 'syncd[fast]'`): nothing depends on it, and `SYNCD_UVLOOP=0` turns it off
(to compare, or to rule it out).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

__all__ = ["backend_options", "run", "uvloop_in_use"]

T = TypeVar("T")


def uvloop_in_use() -> bool:
    """Whether `run` runs on uvloop here."""
    return os.environ.get("SYNCD_UVLOOP", "1") != "0" and importlib.util.find_spec("uvloop") is not None


def backend_options() -> dict[str, Any]:
    return {"use_uvloop": True} if uvloop_in_use() else {}


def run(work: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`anyio.run(work, *args)` on the loop `uvloop_in_use` says."""
    return anyio.run(work, *args, backend_options=backend_options())
