"""The emulator in a process of its own (`syncd emulator serve --port 0 --json`).

For benchmarks (their RSS and CPU stay syncd's own) and for tests that run syncd itself as
a process (the daemon): both sides then behave as they would in production.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

__all__ = ["EmulatorProcess", "Launch", "Launched", "emulator_process"]


class Launched(Protocol):
    """What `emulator_process` needs of the process it started: `subprocess.Popen`'s part."""

    pid: int
    returncode: int | None
    stdout: IO[str] | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


Launch = Callable[[list[str]], Launched]
"""Starts `syncd ARGS` with its stdout a text pipe the caller reads."""


def exec_syncd(args: list[str]) -> Launched:
    """`python -m syncd.cli ARGS`: a new interpreter (the default)."""
    return subprocess.Popen([sys.executable, "-m", "syncd.cli", *args], stdout=subprocess.PIPE, text=True)


@dataclass
class EmulatorProcess:
    """A running `syncd emulator serve` process and its start-up report."""

    process: Launched
    report: dict[str, Any]

    @property
    def url(self) -> str:
        return str(self.report["url"])

    def cpu_seconds(self) -> float | None:
        """CPU seconds (user + system) the emulator used so far; None off Linux."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @property
    def objects(self) -> int:
        """Rows of the emulator's tables (pages live inside revisions: not counted here)."""
        return sum(int(n) for n in self.report.get("objects", {}).values())


@contextlib.contextmanager
def emulator_process(
    *,
    token: str,
    spec: str,
    seed: int = 1,
    rate: float = 0.0,
    burst: float = 0.0,
    latency_ms: float = 0.0,
    profile: str = "default",
    start_timeout: float = 120.0,
    resettable: bool = False,
    extra: Sequence[str] = (),
    launch: Launch = exec_syncd,
) -> Iterator[EmulatorProcess]:
    """Start the emulator on a free port, yield it once it is serving, always stop it.

    `profile` picks the behaviour at the points the spec leaves open (`default`, `divergent`);
    `resettable` lets `POST /_emulator/reset` bring it back to its start; `launch` starts the
    process (the tests fork it from an interpreter that has syncd imported already)."""
    args = [
        "emulator", "serve", "--port", "0", "--json",
        "--token", token, "--generate", spec, "--seed", str(seed),
        "--rate-limit", f"{rate:g}", "--latency-ms", f"{latency_ms:g}", "--profile", profile,
    ]
    if burst:
        args += ["--burst", f"{burst:g}"]
    if resettable:
        args.append("--resettable")
    args += list(extra)
    process = launch(args)
    try:
        line = _first_line(process, start_timeout)
        yield EmulatorProcess(process, json.loads(line))
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _first_line(process: Launched, timeout: float) -> str:
    """The start-up JSON line (generation of a large tenant takes a few seconds)."""
    import selectors

    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise RuntimeError(f"the emulator did not start within {timeout:g} s")
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"the emulator exited with code {process.wait()} before serving")
    return line
