"""`syncd` as its users run it: the console script pip installed beside the interpreter
(`.venv/bin/syncd`), as a process of its own. For the few acceptance checks that must go
through the installed entry point (version, completion, `--json` on stdout); the rest of the
CLI tests call `syncd.cli.main` in-process, or in a process forked from the suite's CLI zygote
(tests/cli_zygote.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.hostile.cli_support import Ran

SCRIPT = Path(sys.executable).with_name("syncd")


def run_installed(*args: str | Path, env: dict[str, str], cwd: Path, timeout: float = 120) -> Ran:
    """`syncd ARGS` through the installed console script; fails when it is not installed."""
    assert SCRIPT.is_file(), f"{SCRIPT}: the console script is not installed (pip install -e '.[test]')"
    argv = tuple(str(a) for a in args)
    done = subprocess.run([str(SCRIPT), *argv], cwd=cwd, env=env, capture_output=True, timeout=timeout)
    return Ran(argv, done.returncode, done.stdout, done.stderr)
