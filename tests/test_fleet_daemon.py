"""Replicas of `syncd serve` sharing one PostgreSQL (issue 13): real processes, real server.

Each replica has its own state directory and port; they share `state_url` (a schema of this
test's own). What must hold: every schedule slot runs once across the fleet, a job never
runs on two replicas at once, a trigger sent to one replica reaches whichever is free, `/runs`
on any replica shows the whole fleet, and a replica killed with SIGKILL mid-run loses nothing:
its lease ends and another replica takes the run over and finishes it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.emulator.process import EmulatorProcess
from tests.cli_zygote import emulator_process
from tests.daemon_support import DaemonProcess, daemon_config, wait_for
from tests.fleet_support import fleet_runs, job_slots, overlaps, slot_gap_problems
from tests.loopback import EmulatorClient
from tests.schema_support import assert_valid

TOKEN = "fleet-test-token"
CONTROL = "fleet-control-token-1234"
SPEC = "orgs=2,collections=2,spaces=3,pages=3"
LEASE = 2.0


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    with emulator_process(token=TOKEN, spec=SPEC, rate=0) as running:
        yield running


def _replica_config(tmp: Path, name: str, emulator: EmulatorProcess, pg_url: str, jobs: list[dict[str, Any]], fleet: str = "") -> Path:
    folder = tmp / name
    folder.mkdir()
    path = daemon_config(
        folder, emulator.url, TOKEN,
        retry={"max_attempts": 4, "initial_wait": "0.1s", "max_wait": "1s"},
        daemon={"port": 0, "token": CONTROL, "shutdown_deadline": "5s", "failure_backoff": "1s"},
        jobs=jobs,
    )
    fleet = f'[fleet]\nreplica = "{name}"\nlease = "{LEASE:g}s"\npoll = "0.2s"\n{fleet}'
    path.write_text(f'state_url = "{pg_url}"\n' + path.read_text() + fleet)
    return path


def _start(
    tmp: Path, names: list[str], emulator: EmulatorProcess, pg_url: str, jobs: list[dict[str, Any]], fleet: str = ""
) -> list[DaemonProcess]:
    """Replicas `names` with `jobs`; `fleet`: more lines of their [fleet] table."""
    replicas = []
    for name in names:
        config = _replica_config(tmp, name, emulator, pg_url, jobs, fleet)
        replicas.append(DaemonProcess.start(config, config.parent / "state", token=CONTROL))
    return replicas


def test_replicas_run_each_slot_once_and_share_triggers_and_history(tmp_path: Path, emulator: EmulatorProcess, pg_url: str) -> None:
    orgs = [org["id"] for org in emulator.report["organizations"]]
    jobs = [
        {"name": f"backup-{n}", "kind": "backup", "source": f"src:{orgs[n % 2]}", "retention": 2, "schedule": {"every": "2s"}}
        for n in range(6)
    ] + [{"name": "on-demand", "kind": "backup", "source": f"src:{orgs[0]}", "retention": 1}]
    # max_runs: the six slots due at once cannot all go to whichever replica looks first (without
    # it one replica may, every time, and the last one started may never get a run).
    replicas = _start(tmp_path, ["r1", "r2", "r3"], emulator, pg_url, jobs, fleet="max_runs = 2\n")
    try:
        wait_for("30 finished scheduled runs", lambda: len([r for r in fleet_runs(pg_url) if r["reason"] != "trigger" and r["ended_at"]]) >= 30, 120)
        status, answer = replicas[2].post("/jobs/on-demand/run")
        assert status == 202 and answer["status"] == "started", answer
        triggered = replicas[0].wait_run(answer["run"]["id"])  # any replica reads any run
        assert triggered["outcome"] == "succeeded", triggered
        status, listing = replicas[1].get("/runs")
        assert status == 200
        status, jobs_view = replicas[1].get("/jobs")
        assert status == 200
        assert_valid("jobs", jobs_view)  # the fleet's fields are documented in schemas/jobs.json
        assert {job["current_replica"] for job in jobs_view["jobs"]} <= {None, "r1", "r2", "r3"}
        shown = {run["replica"] for run in listing["runs"] if run["outcome"] not in ("queued",)}  # a queued run has none yet
    finally:
        codes = [replica.stop() for replica in replicas]
    assert codes == [0, 0, 0], [r.log()[-2000:] for r in replicas]
    runs = fleet_runs(pg_url)
    scheduled = [r for r in runs if r["due_at"] is not None]
    slots = [(r["job"], r["due_at"]) for r in scheduled]
    assert len(slots) == len(set(slots))  # the database would refuse a second one: the offers agree
    for job in (j["name"] for j in jobs[:6]):
        assert not slot_gap_problems(job_slots(runs, job), 2.0)  # none lost but while one waited, none run twice
    assert not overlaps(runs)
    ran_by = {r["replica"] for r in runs if r["outcome"] == "succeeded"}
    assert ran_by == {"r1", "r2", "r3"}, ran_by  # the work is split
    assert shown <= {"r1", "r2", "r3"} and len(shown) >= 2
    assert {r["outcome"] for r in runs if r["ended_at"]} <= {"succeeded", "cancelled"}


def test_a_replica_killed_mid_run_loses_its_run_to_another(tmp_path: Path, pg_url: str) -> None:
    with emulator_process(token=TOKEN, spec=SPEC, rate=0, latency_ms=40) as slow:
        org = slow.report["organizations"][0]["id"]
        jobs = [{"name": "slow-backup", "kind": "backup", "source": f"src:{org}", "retention": 3}]
        first = _start(tmp_path, ["k1"], slow, pg_url, jobs)[0]
        others: list[DaemonProcess] = []
        try:
            status, answer = first.post("/jobs/slow-backup/run")
            assert status == 202
            run_id = answer["run"]["id"]
            wait_for("k1 to run it", lambda: first.get(f"/runs/{run_id}")[1]["outcome"] == "running", 60)
            first.signal(signal.SIGKILL)
            first.process.wait(30)
            others = _start(tmp_path, ["k2"], slow, pg_url, jobs)
            ended = others[0].wait_run(run_id, timeout=120)
        finally:
            for replica in (first, *others):
                replica.stop()
    assert ended["outcome"] == "succeeded", ended
    assert ended["replica"] == "k2" and ended["attempt"] == 2 and ended["taken_from"] == "k1", ended
    assert "fleet.run_taken_over" in others[0].log()


MIRROR_SPEC = "orgs=1,empty_orgs=1,collections=3,spaces=8,pages=3,files=1,sites=1,sections=2,members=2,teams=2"


@pytest.mark.parametrize("profile", ["default", "divergent"])
def test_a_replica_killed_mid_mirror_loses_nothing_and_duplicates_nothing(tmp_path: Path, pg_url: str, profile: str) -> None:
    """The journal is in PostgreSQL: the replica that takes the run over settles the dead one's
    open intents instead of creating again; the target ends equal, nothing twice, and a run
    after that writes nothing. The source is as it was."""
    with emulator_process(token=TOKEN, spec=MIRROR_SPEC, seed=5, rate=0, latency_ms=25, profile=profile) as slow:
        emulator = EmulatorClient(slow.url, slow.report, TOKEN)
        src, dst = emulator.orgs
        source_before = emulator.admin("GET", f"/_emulator/orgs/{src}/dump")
        jobs = [{"name": "copy", "kind": "mirror", "source": f"src:{src}", "target": f"dst:{dst}"}]
        first = _start(tmp_path, ["m1"], slow, pg_url, jobs)[0]
        others: list[DaemonProcess] = []
        try:
            status, answer = first.post("/jobs/copy/run")
            assert status == 202
            run_id = answer["run"]["id"]
            writes_before = emulator.writes()
            wait_for("the copy to have written", lambda: emulator.writes() >= writes_before + 15, 120)
            first.signal(signal.SIGKILL)
            killed = time.monotonic()
            first.process.wait(30)
            others = _start(tmp_path, ["m2"], slow, pg_url, jobs)
            ended = others[0].wait_run(run_id, timeout=240)
            took = time.monotonic() - killed
            assert ended["outcome"] == "succeeded" and ended["replica"] == "m2" and ended["attempt"] == 2, ended
            # A figure, not an assertion (no timing in tests): the bound is lease + one run.
            print(f"\ntakeover ({profile}): the run ended {took:.1f} s after the SIGKILL (lease {LEASE:g} s; replica m2 started then)")
            status, again = others[0].post("/jobs/copy/run")
            rerun = others[0].wait_run(again["run"]["id"], timeout=240)
        finally:
            for replica in (first, *others):
                replica.stop()
        target, source = emulator.dump(dst), emulator.dump(src)
        source_after = emulator.admin("GET", f"/_emulator/orgs/{src}/dump")
    assert rerun["outcome"] == "succeeded" and rerun["summary"]["writes"] == 0, rerun["summary"]
    assert target == source, [kind for kind in target if target[kind] != source.get(kind)]
    assert not any("#" in path or "(copy)" in path for rows in target.values() for path, _ in rows)  # nothing twice
    assert source_after == source_before


def test_a_full_replica_leaves_due_runs_to_the_others(tmp_path: Path, emulator: EmulatorProcess, pg_url: str) -> None:
    """`fleet.max_runs = 1`: while a replica runs one job, the other due jobs go to the other replica."""
    orgs = [org["id"] for org in emulator.report["organizations"]]
    jobs = [{"name": f"b{n}", "kind": "backup", "source": f"src:{orgs[n % 2]}", "retention": 1} for n in range(4)]
    replicas = _start(tmp_path, ["f1", "f2"], emulator, pg_url, jobs, fleet="max_runs = 1\n")
    try:
        started = [replicas[0].post(f"/jobs/{job['name']}/run")[1]["run"]["id"] for job in jobs]
        ended = [replicas[1].wait_run(run_id) for run_id in started]
    finally:
        codes = [replica.stop() for replica in replicas]
    assert codes == [0, 0] and {run["outcome"] for run in ended} == {"succeeded"}
    runs = [r for r in fleet_runs(pg_url) if r["id"] in started]
    for a in runs:  # never two runs at once on one replica
        for b in runs:
            if a["id"] < b["id"] and a["replica"] == b["replica"]:
                assert a["ended_at"] <= b["started_at"] or b["ended_at"] <= a["started_at"], (a, b)
    assert {r["replica"] for r in runs} == {"f1", "f2"}
