"""`syncd` with its stderr on a terminal (a pseudo-terminal), as a person at a shell runs it:
what rich draws there (progress bars) is drawn only on a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

SYNCD = Path(sys.executable).with_name("syncd")
"""The installed console script (`pip install -e .` put it beside the interpreter)."""
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """`syncd ARGS` with stderr on a pty and stdout on a pipe: (exit code, what the terminal
    got without its cursor and colour sequences, stdout)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(SYNCD), *args], env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed: the process is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(timeout=60), CSI.sub("", seen.decode(errors="replace")), out
