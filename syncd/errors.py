"""Errors that end a command with one clear line instead of a traceback."""

from __future__ import annotations


from collections.abc import Sequence
from dataclasses import dataclass


class SyncdError(Exception):
    """Base of every error syncd reports to its user; `exit_code` is the process status."""

    exit_code: int = 1

    def lines(self) -> list[str]:
        """What the user is told, a line each (one for most errors)."""
        return [str(self)]


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem of the configuration: where it was given (the file, an environment
    variable), the field, and what is wrong with it."""

    source: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        return ": ".join(part for part in (self.source, self.field, self.message) if part)

    def as_json(self) -> dict[str, str | None]:
        return {"source": self.source, "field": self.field or None, "message": self.message}


class ConfigError(SyncdError):
    """The configuration file or environment is invalid: fix it and run again.

    With `problems`, every problem found (a line each, `lines`), so that one run shows them
    all; `str()` is then them all on one line, for a log event."""

    exit_code = 2

    def __init__(self, message: str = "", problems: Sequence[ConfigProblem] = ()) -> None:
        self.problems = tuple(problems) or (ConfigProblem(None, None, message),)
        super().__init__(message or "; ".join(str(problem) for problem in self.problems))

    def lines(self) -> list[str]:
        return [str(problem) for problem in self.problems]


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
