"""Errors of the mirror: each ends a command with one line (see `syncd.errors`)."""

from __future__ import annotations

from syncd.errors import SyncdError

__all__ = ["MirrorBusyError", "MirrorError", "NewerStateError"]


class MirrorError(SyncdError):
    """The state file cannot be used as asked (not a syncd file, unknown run, misuse)."""

    exit_code = 2


class NewerStateError(MirrorError):
    """The state file went through a migration this syncd does not know: upgrade syncd."""


class MirrorBusyError(MirrorError):
    """Another live syncd process is writing a run into the same state file."""
