"""`syncd` on a read-only root file system, as Kubernetes' `readOnlyRootFilesystem` runs it:
every file system the process sees is read-only except the folders given writable (its state).

How: a private mount namespace (`unshare -m`, root in the sandbox and in CI) in which the folders
to keep writable are bind-mounted onto themselves, then the file systems holding `/`, the
temporary directories SQLite and Python look at (`/tmp`, `/var/tmp`, `/usr/tmp`, `TMPDIR`) and the
working directory are remounted read-only (`remount,bind,ro` changes that namespace's mounts
only, never the machine's). Root ignores file modes but not a read-only mount, so the command
runs as root. It is exec'd (the console script), not forked from the CLI zygote: SQLite reads
its temporary directory from the environment once, when the `sqlite3` module is imported.
Coverage's variables are left out of its environment: its data file (in the project) is
read-only there too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.console_script import SCRIPT
from tests.hostile.cli_support import Ran

__all__ = ["on_read_only_root", "start_on_read_only_root", "syncd_on_read_only_root"]

_PLACES = ("/", "/tmp", "/var/tmp", "/usr/tmp")

_SCRIPT = """
set -e
count=$1; shift
i=0
while [ "$i" -lt "$count" ]; do mount --bind "$1" "$1"; shift; i=$((i + 1)); done
count=$1; shift
i=0
while [ "$i" -lt "$count" ]; do mount -o remount,bind,ro "$1"; shift; i=$((i + 1)); done
exec "$@"
"""


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    while not os.path.ismount(path):
        path = path.parent
    return path


def _namespaced(argv: Sequence[str | Path], env: dict[str, str], cwd: Path, writable: Sequence[Path]) -> tuple[list[str], dict[str, str]]:
    """The command line that runs `argv` on a read-only root, and its environment."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a read-only root needs root and unshare (a private mount namespace)")
    env = {k: v for k, v in env.items() if not k.startswith("COVERAGE_")}
    kept = [Path(p).resolve() for p in writable]
    places = [Path(p) for p in (*_PLACES, env.get("TMPDIR"), env.get("SQLITE_TMPDIR"), cwd) if p and Path(p).exists()]
    read_only = sorted({_mount_point(p) for p in places} - set(kept))
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", _SCRIPT, "sh",
               str(len(kept)), *map(str, kept), str(len(read_only)), *map(str, read_only), *map(str, argv)]  # fmt: skip
    return command, env


def on_read_only_root(
    argv: Sequence[str | Path], *, env: dict[str, str], cwd: Path, writable: Sequence[Path], timeout: float = 120
) -> Ran:
    """The program `argv` with only `writable` writable (module docstring), to its end; the case
    is skipped, with the reason, where a mount namespace cannot be made (not root, no unshare)."""
    command, env = _namespaced(argv, env, cwd, writable)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=timeout)
    if done.returncode != 0 and (b"unshare: " in done.stderr or b"mount: " in done.stderr):
        pytest.skip(f"cannot make a read-only root here: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return Ran(tuple(str(a) for a in argv), done.returncode, done.stdout, done.stderr)


def start_on_read_only_root(
    argv: Sequence[str | Path], *, env: dict[str, str], cwd: Path, writable: Sequence[Path], output: int
) -> subprocess.Popen[bytes]:
    """`argv` started on a read-only root, its stdout and stderr to the file descriptor `output`.
    Its pid is the program's own: unshare and the shell exec it."""
    command, env = _namespaced(argv, env, cwd, writable)
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=output)


def syncd_on_read_only_root(*args: str | Path, env: dict[str, str], cwd: Path, writable: Sequence[Path]) -> Ran:
    """`syncd ARGS` through the installed console script, on a read-only root."""
    assert SCRIPT.is_file(), f"{SCRIPT}: the console script is not installed (pip install -e '.[test]')"
    ran = on_read_only_root([SCRIPT, *args], env=env, cwd=cwd, writable=writable)
    return Ran(ran.args[1:], ran.code, ran.out, ran.err)
