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
