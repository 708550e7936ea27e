"""Errors that end a command with one clear line instead of a traceback."""

from __future__ import annotations


class SyncdError(Exception):
    """Base of every error syncd reports to its user; `exit_code` is the process status."""

    exit_code: int = 1


class ConfigError(SyncdError):
    """The configuration file or environment is invalid: fix it and run again."""

    exit_code = 2


class UsageError(SyncdError):
    """A command was called with arguments that cannot work."""

    exit_code = 2


def first_failure(group: BaseExceptionGroup) -> BaseException:
    """The error that failed a task group (not the cancellations it caused in the other tasks):
    what a caller that started tasks of its own raises, as it is, instead of the group."""
    import anyio  # here: the rest of this module is imported where no event loop is

    cancelled = anyio.get_cancelled_exc_class()
    for error in group.exceptions:
        inner = first_failure(error) if isinstance(error, BaseExceptionGroup) else error
        if not isinstance(inner, cancelled):
            return inner
    return group.exceptions[0]
