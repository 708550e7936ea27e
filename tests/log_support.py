"""Logging in tests: configure syncd's logging into a buffer, and undo it afterwards so that the
next test on the same worker starts from the default (WARNING, no syncd handler)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from syncd.logging import LogFormat, configure_logging


def forget_logging() -> None:
    """Drop the handlers `configure_logging` added and put the root level back."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_syncd_handler", False):
            root.removeHandler(handler)
    root.setLevel(logging.WARNING)


@contextmanager
def logged_to_buffer(fmt: LogFormat, level: str) -> Iterator[io.StringIO]:
    """syncd's log lines (`fmt`, from `level` up) in a buffer while the block runs."""
    buffer = io.StringIO()
    configure_logging(fmt, level, stream=buffer)
    try:
        yield buffer
    finally:
        forget_logging()
