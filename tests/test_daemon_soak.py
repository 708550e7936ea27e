"""Soak: `syncd serve` runs cycle after cycle while the emulator misbehaves, and the source
changes under it. Afterwards the mirror equals the emulator's canonical dump, the target
equals the source, and the daemon's memory has not grown.

Phases (each a few seconds, several cycles): calm, a 429 storm (30% of answers are 429s
with `Retry-After`, as when someone else spends the token's limit), 5xx
bursts with HTML 502 pages, dropped and truncated answers, and an outage in which the
emulator stops listening and comes back on the same port with the same data. Between the
phases the source organization changes (renames, a new collection), so every phase has
something to copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncd.emulator.process import emulator_process
from tests.daemon_support import (
    DaemonProcess,
    daemon_config,
    metric_samples,
    metric_value,
    wait_for,
)
from tests.loopback import EmulatorClient
from tests.oracle import copied_view, mirror_mismatches

TOKEN = "soak-token"
SPEC = "orgs=1,empty_orgs=1,collections=3,spaces=6,pages=4,sites=1,sections=2,teams=1,custom_fields=1,comments=1"
PHASE_SECONDS = 5.0
MEMORY_TOLERANCE = 0.10


def _config(tmp: Path, url: str, source: str, target: str) -> Path:
    return daemon_config(
        tmp,
        url,
        TOKEN,
        retry={"max_attempts": 10, "initial_wait": "0.1s", "max_wait": "1s"},
        daemon={"port": 0, "failure_backoff": "0.5s", "shutdown_deadline": "20s"},
        jobs=[
            {"name": "sync", "kind": "sync", "source": "src", "schedule": {"every": "1s"}},
            {"name": "mirror", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{target}", "schedule": {"every": "1.5s"}},
        ],
    )


class Soak:
    """The daemon's RSS after each sync run, sampled while phases go by."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.rss: list[tuple[int, float]] = []

    def sample(self) -> None:
        """Record the RSS once per finished sync run (the metric is read after the run)."""
        runs = self.daemon.finished_runs("sync")
        count = len(runs) and runs[0]["id"]
        if not self.rss or self.rss[-1][0] != count:
            self.rss.append((count, metric_value(self.daemon.metrics(), "process_resident_memory_bytes") or 0.0))

    def phase(self, seconds: float, on: Callable[[], None] = lambda: None, off: Callable[[], None] = lambda: None) -> None:
        on()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sample()
            time.sleep(0.25)
        off()


def test_daemon_survives_faults_and_outages_and_converges(tmp_path: Path) -> None:
    with emulator_process(token=TOKEN, spec=SPEC, rate=300, seed=5) as emulator:
        source, target = (org["id"] for org in emulator.report["organizations"])
        daemon = DaemonProcess.start(_config(tmp_path, emulator.url, source, target), tmp_path / "state")
        soak = Soak(daemon)
        emu = EmulatorClient(emulator.url, emulator.report, TOKEN)
        try:
            collections = emu.api("GET", f"/v1/orgs/{source}/collections")["items"]
            spaces = emu.api("GET", f"/v1/orgs/{source}/spaces")["items"]

            # Calm cycles first: the baseline of memory is taken once the first runs are over.
            wait_for("five sync runs", lambda: len(daemon.finished_runs("sync")) >= 5, 60)
            soak.phase(PHASE_SECONDS)
            baseline = soak.rss[-1][1]

            emu.api("PATCH", f"/v1/collections/{collections[0]['id']}", {"title": "Renamed in the 429 storm"})
            soak.phase(
                PHASE_SECONDS,
                on=lambda: emu.admin("PUT", "/_emulator/faults", {"429": 0.3}),
                off=lambda: emu.admin("PUT", "/_emulator/faults", {"reset": True}),
            )
            emu.api("POST", f"/v1/orgs/{source}/collections", {"title": "Born in a 5xx burst"})
            soak.phase(
                PHASE_SECONDS,
                on=lambda: emu.admin("PUT", "/_emulator/faults", {"5xx": 0.3, "html502": 0.1}),
                off=lambda: emu.admin("PUT", "/_emulator/faults", {"reset": True}),
            )
            emu.api("PATCH", f"/v1/spaces/{spaces[0]['id']}", {"title": "Renamed while answers drop"})
            soak.phase(
                PHASE_SECONDS,
                on=lambda: emu.admin("PUT", "/_emulator/faults", {"drop": 0.15, "truncate": 0.1}),
                off=lambda: emu.admin("PUT", "/_emulator/faults", {"reset": True}),
            )
            emu.api("PATCH", f"/v1/spaces/{spaces[1]['id']}", {"title": "Renamed before the outage"})
            emu.admin("POST", "/_emulator/outage", {"seconds": 3})
            soak.phase(PHASE_SECONDS)
            changed_at = time.time()

            # Calm again: wait for a sync and a mirror run that started after the last change.
            def settled(job: str) -> dict[str, Any] | None:
                for run in daemon.finished_runs(job):
                    started = time.mktime(time.strptime(run["started_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
                    if started > changed_at and run["outcome"] == "succeeded":
                        return run
                return None

            wait_for("a clean sync after the faults", lambda: settled("sync"), 120)
            final_mirror = wait_for("a clean mirror run after the faults", lambda: settled("mirror"), 120)
            soak.phase(PHASE_SECONDS)
            metrics = daemon.metrics()
            runs = {job: sum(metric_samples(metrics, "syncd_job_runs_total", job=job)) for job in ("sync", "mirror")}
            stats = emu.admin("GET", "/_emulator/stats")["by_status"]
        finally:
            code = daemon.stop()
        assert code == 0, daemon.log()[-3000:]

        # The faults really happened, and the daemon saw them.
        assert stats.get("fault-429", 0) > 0 and stats.get("fault-5xx", 0) > 0 and stats.get("dropped", 0) > 0, stats
        assert (metric_value(metrics, "syncd_api_rate_limited_total", tenant="src") or 0) > 0
        assert (metric_value(metrics, "syncd_api_retries_total", tenant="src") or 0) > 0
        assert (metric_value(metrics, "syncd_api_requests_total", tenant="src", method="GET", status="error") or 0) > 0

        # The mirror equals the canonical dump, for the source and for the copy.
        source_dump = emu.admin("GET", f"/_emulator/orgs/{source}/dump")
        target_dump = emu.admin("GET", f"/_emulator/orgs/{target}/dump")
        db = tmp_path / "state" / "syncd.db"
        assert mirror_mismatches(db, "src", source_dump, org=source) == []
        assert mirror_mismatches(db, "dst", target_dump, org=target) == []

        # The target equals the source: same paths, same writable content, nothing twice.
        source_view, target_view = copied_view(source_dump), copied_view(target_dump)
        assert target_view == source_view
        assert not any("#" in path for rows in target_view.values() for path, _ in rows)
        titles = {data.get("title") for _, data in source_view["collection"] + source_view["space"]}
        assert {"Renamed in the 429 storm", "Born in a 5xx burst", "Renamed while answers drop", "Renamed before the outage"} <= titles
        assert final_mirror["summary"]["verify"]["missing"] == 0

        # Memory after the last cycles is within 10% of memory after the first ones.
        cycles = soak.rss[-1][0] - soak.rss[0][0]
        final = soak.rss[-1][1]
        assert runs["sync"] >= 15 and runs["mirror"] >= 8, runs
        assert len(soak.rss) >= 10, soak.rss
        assert final <= baseline * (1 + MEMORY_TOLERANCE), (
            f"RSS grew from {baseline / 2**20:.1f} MiB to {final / 2**20:.1f} MiB over {cycles} sync runs"
        )
        print(f"soak: {runs} runs, RSS {baseline / 2**20:.1f} MiB after the first cycles, {final / 2**20:.1f} MiB after the last; emulator {stats}")
