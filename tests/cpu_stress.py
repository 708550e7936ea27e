"""CPU load for the whole test session: `pytest --stress-cpu=N`.

(From the environment: `PYTEST_ADDOPTS=--stress-cpu=N`. Not a `SYNCD_*` variable: those are
syncd's own settings, which `syncd config check` lists.)

Why: the suite must pass on a loaded 2-core machine (a slow CI runner, a busy laptop). A test
that only passes when it has the CPU to itself waits for time instead of for an event. The
load is N processes that spin at normal priority, started by the session itself and stopped
by it, by PID, when it ends, whatever the outcome (pass, failure, Ctrl-C).

A burner never outlives the session: it stops on SIGTERM (the session's end), ignores Ctrl-C
(the session stops it and reports), and quits by itself as soon as its parent is no longer
the process that started it (pytest killed with SIGKILL, a crashed interpreter).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

OPTION = "--stress-cpu"

# The burner: spins, looking up its parent every few milliseconds of work; on SIGTERM it
# prints the CPU seconds it used (the proof that the load was real) and exits.
BURNER = """
import os, signal, sys, time
parent = int(sys.argv[1])
def stop(signum, frame):
    print(f"{time.process_time():.1f}", flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, signal.SIG_IGN)
while os.getppid() == parent:
    for _ in range(100_000):
        pass
"""

# Coverage's subprocess patch would measure a burner too (and leave a data file per burner).
_NOT_INHERITED = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")


def burner_count(option: str | None) -> int:
    """N from `--stress-cpu=N`; 0 (no load) without the option."""
    try:
        count = int(option or "0")
    except ValueError:
        raise ValueError(f"{OPTION}: expected a number of burners, got {option!r}") from None
    if count < 0:
        raise ValueError(f"{OPTION}: expected 0 or more burners, got {count}")
    return count


@dataclass
class Burners:
    """N running burner processes, children of this process."""

    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    started: float = 0.0

    @classmethod
    def start(cls, count: int) -> Burners:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        burners = cls(started=time.monotonic())
        try:
            for _ in range(count):
                burners.processes.append(subprocess.Popen(
                    [sys.executable, "-c", BURNER, str(os.getpid())],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
                ))
        except BaseException:
            burners.stop()
            raise
        return burners

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> list[float | None]:
        """Stop every burner by its PID; the CPU seconds each used (None: it had already gone)."""
        used: list[float | None] = []
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                out, _ = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                out, _ = process.communicate()
            try:
                used.append(float(out.strip()))
            except ValueError:
                used.append(None)
        self.processes = []
        return used

    def started_line(self) -> str:
        return f"stress: {len(self.processes)} CPU burner(s) on, normal priority, pids {', '.join(map(str, self.pids))}"

    def stopped_line(self, used: list[float | None]) -> str:
        wall = time.monotonic() - self.started
        spent = ", ".join("gone" if u is None else f"{u:.0f} s" for u in used)
        return f"stress: {len(used)} CPU burner(s) stopped after {wall:.0f} s of wall time; CPU each used: {spent}"
