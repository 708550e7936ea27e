"""An operator's pause, resume and cancel in a fleet: two `syncd serve` replicas on one PostgreSQL
(issue 39). A pause sent to one replica holds on the other (no slot offered or claimed, a
trigger refused there too); a cancel sent to the replica that does NOT hold the run reaches the
one that does, and the run ends `cancelled`; the next run finishes the copy, nothing twice.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.cli_zygote import emulator_process
from tests.fleet_support import fleet_runs
from tests.loopback import EmulatorClient, http, wait_for
from tests.schema_support import assert_valid
from tests.test_fleet_daemon import TOKEN, _start

SPEC = "orgs=1,empty_orgs=1,collections=3,spaces=8,pages=3,files=1,sites=1,sections=2"
QUIET = 3.0
"""Seconds a paused job is watched for a run its schedule (every second) would have started."""


def test_a_pause_holds_on_every_replica_and_a_cancel_reaches_the_holder(tmp_path: Path, pg_url: str) -> None:
    with emulator_process(token=TOKEN, spec=SPEC, seed=3, rate=0, latency_ms=40) as slow:
        emulator = EmulatorClient(slow.url, slow.report, TOKEN)
        src, dst = emulator.orgs
        jobs = [
            {"name": "tick", "kind": "backup", "source": f"src:{src}", "retention": 1, "schedule": {"every": "1s"}},
            {"name": "copy", "kind": "mirror", "source": f"src:{src}", "target": f"dst:{dst}"},
        ]
        replicas = _start(tmp_path, ["p1", "p2"], slow, pg_url, jobs)
        one, two = replicas
        try:
            # -- a pause sent to p1 holds on p2
            wait_for("a scheduled run", lambda: any(r["job"] == "tick" and r["outcome"] == "succeeded" for r in fleet_runs(pg_url)), 60)
            status, answer = one.post("/jobs/tick/pause")
            assert status == 200 and answer["status"] == "paused", answer
            assert_valid("pause", answer)
            seen = two.job("tick")
            assert seen["paused"] == answer["job"]["paused"] and seen["paused"]["by"] == "the control API"
            status, refused = two.post("/jobs/tick/run")
            assert status == 409 and "is paused" in refused["error"]["message"] and "syncd resume tick" in refused["error"]["message"]
            wait_for("tick's run in progress to end", lambda: all(r["outcome"] != "running" for r in fleet_runs(pg_url) if r["job"] == "tick"), 60)
            known = {r["id"] for r in fleet_runs(pg_url) if r["job"] == "tick"}
            time.sleep(QUIET)
            later = [r for r in fleet_runs(pg_url) if r["job"] == "tick" and r["id"] not in known]
            assert later == [], later  # no slot offered (nor claimed) while paused, on either replica
            for replica in replicas:
                assert replica.job("tick")["state"] == "paused"
                assert "syncd_job_paused{job=\"tick\"} 1.0" in replica.metrics()

            # -- resumed through p2: the schedule fires again
            status, answer = two.post("/jobs/tick/resume")
            assert status == 200 and answer["status"] == "resumed", answer
            wait_for("a run after the resume", lambda: any(r["job"] == "tick" and r["id"] not in known and r["outcome"] == "succeeded" for r in fleet_runs(pg_url)), 60)
            assert one.job("tick")["paused"] is None

            # -- a cancel sent to the replica that does not hold the run
            status, answer = one.post("/jobs/copy/run")
            assert status == 202
            run_id = answer["run"]["id"]
            holder = wait_for("a replica to run the copy", lambda: one.get(f"/runs/{run_id}")[1].get("replica") if one.get(f"/runs/{run_id}")[1]["outcome"] == "running" else None, 60)
            writes = emulator.writes()
            wait_for("the copy to have written", lambda: emulator.writes() >= writes + 10, 120)
            holding, other = (one, two) if holder == "p1" else (two, one)
            status, answer = other.post("/jobs/copy/cancel")
            assert status == 202 and answer["status"] == "cancelling" and answer["run"]["id"] == run_id, answer
            ended = other.wait_run(run_id, timeout=30)
            assert ended["outcome"] == "cancelled" and ended["replica"] == holder, ended
            assert ended["reason"] == "cancelled by the operator (the control API)", ended
            assert "job.cancel_requested" in holding.log() and "fleet.cancel_requested" in other.log()
            assert other.post("/jobs/copy/cancel")[0] == 409  # nothing running now

            # The next run continues from what the cancelled one wrote.
            assert http("PUT", slow.url + "/_emulator/faults", body={"latency": 0})[0] == 200
            status, answer = other.post("/jobs/copy/run")
            assert other.wait_run(answer["run"]["id"], timeout=120)["outcome"] == "succeeded"
            status, answer = holding.post("/jobs/copy/run")
            rerun = holding.wait_run(answer["run"]["id"], timeout=120)
        finally:
            codes = [replica.stop() for replica in replicas]
        target, source = emulator.dump(dst), emulator.dump(src)
    assert codes == [0, 0], [replica.log()[-2000:] for replica in replicas]
    assert rerun["outcome"] == "succeeded" and rerun["summary"]["writes"] == 0, rerun["summary"]
    assert target == source, [kind for kind in target if target[kind] != source.get(kind)]
