"""Errors of the mirror: each ends a command with one line (see `syncd.errors`)."""

from __future__ import annotations

from syncd.errors import SyncdError

__all__ = ["StateBusyError", "StateError", "NewerStateError"]


class StateError(SyncdError):
    """The state file cannot be used as asked (not a syncd file, unknown run, misuse)."""

    exit_code = 2


class NewerStateError(StateError):
    """The state file went through a migration this syncd does not know: upgrade syncd."""


class StateBusyError(StateError):
    """Another live syncd process is writing a run into the same state file."""
