"""How to run this syncd again, as a command to paste: the hints a command prints (`syncd
demo`'s last lines) must work in the shell it was run from.

Why: after the README's first command (`.venv/bin/syncd demo`, nothing activated) a hint
reading `syncd status ...` fails with "command not found". The running console script is
named instead, as the user can reach it from where they are.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["syncd_command"]


def _running_script() -> Path | None:
    """The console script this process runs as: `argv[0]` when it is one called syncd (how it
    was invoked), else the one installed beside the interpreter; absolute, links not followed
    (a venv's own path, not the interpreter it links to); None when there is neither."""
    candidates = [Path(sys.argv[0])] if sys.argv and sys.argv[0] else []
    candidates.append(Path(sys.executable).with_name("syncd"))
    for candidate in candidates:
        if candidate.name == "syncd" and candidate.is_file() and os.access(candidate, os.X_OK):
            return Path(os.path.abspath(candidate))
    return None


def syncd_command() -> str:
    """`syncd` when that is what PATH finds; else the path of the running console script,
    relative to the current directory when it is under it (`.venv/bin/syncd`); else this
    interpreter with `-m syncd.cli`. Quoted for a POSIX shell."""
    script = _running_script()
    if script is None:
        return f"{shlex.quote(sys.executable)} -m syncd.cli"
    found = shutil.which("syncd")
    if found is not None and os.path.samefile(found, script):
        return "syncd"
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    return shlex.quote(shown if os.sep in shown else f".{os.sep}{shown}")
