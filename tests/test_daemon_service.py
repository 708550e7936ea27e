"""The daemon in-process against the in-process emulator: coalescing, failures and backoff,
reloads, shutdown, the control API and restarts, driven through `Daemon`'s methods and its
control API over loopback. (tests/test_daemon.py runs `syncd serve` as a process.)

The tests that keep state (runs, their history, the state mirror) run on both backends
(`state_url`): one `Daemon` with its history in `state/daemon.db`, then a `FleetDaemon` alone on a
PostgreSQL schema of its own, as `syncd serve` picks them (`daemon_for`). What one daemon keeps
only in memory (its `JobTimer`s, `JobState.queued`) is checked on SQLite; the fleet keeps those
in PostgreSQL, where the same behaviour is read through the run history and the control API."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.config import Settings
from syncd.daemon.replica import daemon_for
from syncd.daemon.run_history import RunRecord
from syncd.daemon.schedule import failure_backoff
from syncd.daemon.service import Daemon, DaemonBusyError
from syncd.emulator.server import RunningEmulator
from syncd.errors import ConfigError
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN
from tests.daemon_support import daemon_json_token, metric_value
from tests.state_support import count_rows, sqlite_only

BAD_TOKEN = "wrong-token-5f3a9c"
CONTROL_TOKEN = "control-secret-8842"
TIMEOUT = 15.0
"""Safety timeout of every wait: generous, never reached when things work."""


@pytest.fixture
def state_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """None: one daemon, its state in the state directory; else a PostgreSQL schema of the test's own."""
    return None if backend == "sqlite" else str(request.getfixturevalue("pg_url"))


def make_settings(
    emulator: RunningEmulator, state_dir: Path, jobs: list[dict[str, Any]], state_url: str | None = None, **daemon: Any
) -> Settings:
    fleet = {} if state_url is None else {"state_url": state_url, "fleet": {"replica": "r1", "poll": "0.2s"}}
    return Settings.model_validate(
        {
            **fleet,
            "tenants": {
                "src": {"base_url": emulator.url, "token": ALL_TOKEN},
                "bad": {"base_url": emulator.url, "token": BAD_TOKEN},
            },
            "state_dir": str(state_dir),
            "retry": {"max_attempts": 2, "initial_wait": "0.05s", "max_wait": "0.1s"},
            "daemon": {"port": 0, "failure_backoff": "0.2s", "shutdown_deadline": "2s", **daemon},
            "jobs": jobs,
        }
    )


def set_latency(emulator: RunningEmulator, ms: float) -> None:
    emulator.emulator.faults.update({"latency": ms})


async def wait_until(what: str, check: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Poll `check` until it returns something truthy; a timeout fails the test."""
    try:
        with anyio.fail_after(timeout):
            while not (value := check()):
                await anyio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}") from None
    return value


def run_of(daemon: Daemon, run_id: int) -> RunRecord:
    assert daemon.runs is not None
    record = daemon.runs.get(run_id)
    assert record is not None, run_id
    return record


async def wait_finished(daemon: Daemon, run_id: int) -> RunRecord:
    return await wait_until(f"run {run_id} to end", lambda: (r := run_of(daemon, run_id)).finished and r)  # type: ignore[no-any-return]


async def wait_running(daemon: Daemon, run_id: int) -> RunRecord:
    """Until the run is running AND this daemon holds it as its job's current run: a fleet replica
    marks a run running in the shared database from a worker thread before its event loop takes
    it on, and a reload in that gap drops the job and gives the run back cancelled."""

    def held() -> RunRecord | None:
        record = run_of(daemon, run_id)
        mine = any(state.current is not None and state.current.id == run_id for state in daemon.jobs.values())
        return record if record.outcome == "running" and mine else None

    return await wait_until(f"run {run_id} to run", held)  # type: ignore[no-any-return]


def scheduler_passes(daemon: Daemon) -> float:
    """`syncd_scheduler_passes_total`: how many times the scheduler has looked for due jobs."""
    return metric_value(daemon.metrics.render().decode(), "syncd_scheduler_passes_total") or 0.0


async def a_scheduler_pass(daemon: Daemon) -> None:
    """Wake the scheduler with a reload (what SIGHUP does; the daemon must have been given
    `reload`) and wait until it has looked for due jobs once more: whatever it would start
    from the state as it is now, it has started by then."""
    seen = scheduler_passes(daemon)
    assert daemon.reload()
    await wait_until("a scheduler pass", lambda: scheduler_passes(daemon) > seen)


@dataclass
class SetClock:
    """The daemon's clock, set by the test (time stands still in between)."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now


def job_runs(daemon: Daemon, job: str) -> list[RunRecord]:
    """The job's runs, oldest first."""
    assert daemon.runs is not None
    return list(reversed(daemon.runs.of_job(job, 1000)))


@contextlib.asynccontextmanager
async def serving(daemon: Daemon) -> AsyncIterator[str]:
    """`daemon.serve` in a task group for the block; stopped at its end, and `serve` must then
    return by itself (the safety timeout covers the block and the shutdown)."""
    with anyio.fail_after(4 * TIMEOUT):
        async with anyio.create_task_group() as group:
            url = await group.start(daemon.serve)
            try:
                yield url
            finally:
                daemon.stop()


class Control:
    """The daemon's control API over loopback."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None = None) -> None:
        self.session, self.url, self.token = session, url, token

    async def call(self, method: str, path: str, token: str | None = None) -> tuple[int, Any]:
        token = token or self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if method != "GET":
            headers["Content-Type"] = "application/json"  # what the API wants of a call that changes something
        async with self.session.request(method, self.url + path, headers=headers) as resp:
            if resp.content_type == "application/json":
                return resp.status, await resp.json()
            return resp.status, await resp.text()

    async def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        return await self.call("GET", path, token)

    async def post(self, path: str, token: str | None = None) -> tuple[int, Any]:
        return await self.call("POST", path, token)


@contextlib.asynccontextmanager
async def control(url: str, token: str | None = None) -> AsyncIterator[Control]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session:
        yield Control(session, url, token)


def state_of(settings: Settings) -> Path | str:
    """Where the daemon keeps its state mirror: `state_dir/syncd.db`, or the PostgreSQL URL."""
    return settings.state_url.get_secret_value() if settings.state_url is not None else settings.state_dir / "syncd.db"


def mirror_run_statuses(settings: Settings) -> list[str]:
    """The statuses of the state mirror's runs, oldest first; [] while it has none."""
    where = state_of(settings)
    if isinstance(where, Path) and not where.exists():
        return []
    with StateStore(where, readonly=True) as mirror:
        return [run["status"] for run in sorted(mirror.runs(), key=lambda run: run["id"])]


# --------------------------------------------------------------------------- 1. coalescing


async def test_triggers_during_a_run_coalesce_into_one_follow_up_run(emulator: RunningEmulator, tmp_path: Path, state_url: str | None) -> None:
    settings = make_settings(emulator, tmp_path / "state", [{"name": "sync", "kind": "sync", "source": "src"}], state_url)
    daemon = daemon_for(settings, reload=lambda: settings)
    async with serving(daemon) as url, control(url, daemon_json_token(tmp_path / "state")) as api:
        set_latency(emulator, 200)
        status, answer = await api.post("/jobs/sync/run")
        assert status == 202 and answer["status"] == "started", answer
        first = answer["run"]["id"]
        await wait_running(daemon, first)

        answers = [await api.post("/jobs/sync/run") for _ in range(3)]
        assert [status for status, _ in answers] == [202, 202, 202]
        assert {body["status"] for _, body in answers} == {"coalesced"}
        queued = {body["run"]["id"] for _, body in answers}
        assert len(queued) == 1 and first not in queued
        (follow_up,) = queued
        assert {body["run"]["outcome"] for _, body in answers} == {"queued"}
        status, job = await api.get("/jobs/sync")
        assert (job["state"], job["current_run"], job["queued_run"]) == ("running", first, follow_up)

        set_latency(emulator, 0)
        ended = await wait_finished(daemon, first)
        assert ended.outcome == "succeeded", ended.error
        second = await wait_finished(daemon, follow_up)
        assert second.outcome == "succeeded", second.error
        assert second.cause == "trigger"
        assert second.started_at is not None and ended.ended_at is not None and second.started_at >= ended.ended_at

        # Exactly one follow-up, and nothing more is due: once the scheduler has looked again
        # after the follow-up ended, the trigger-only job is idle and has run twice.
        await a_scheduler_pass(daemon)
        state = daemon.jobs["sync"]
        assert state.current is None and state.queued is None
        if state_url is None:  # one daemon's timer (a fleet's waiting trigger would be a queued run)
            assert state.timer.next_due is None and not state.timer.pending_trigger
        assert [r.id for r in job_runs(daemon, "sync")] == [first, follow_up]
        status, job = await api.get("/jobs/sync")
        assert job["state"] == "idle" and [run["id"] for run in job["runs"]] == [follow_up, first]
        assert (job["current_run"], job["queued_run"], job["next_run_at"]) == (None, None, None)


async def test_trigger_between_run_end_and_follow_up_start_joins_the_queued_run(
    emulator: RunningEmulator, tmp_path: Path, state_url: str | None
) -> None:
    """A trigger that lands after a run ended but before the scheduler started its coalesced
    follow-up must start that follow-up, not a new run beside it (which would leave the
    follow-up `queued` forever, and the callers who were promised it waiting for nothing)."""
    settings = make_settings(emulator, tmp_path / "state", [{"name": "sync", "kind": "sync", "source": "src"}], state_url)
    daemon = daemon_for(settings)
    late: list[Any] = []
    async with serving(daemon):
        set_latency(emulator, 200)
        first = daemon.trigger("sync")
        await wait_running(daemon, first.run.id)
        coalesced = daemon.trigger("sync")
        assert coalesced.status == "coalesced"

        finish = daemon._finish

        def finish_then_trigger(state: Any, record: RunRecord) -> None:
            finish(state, record)
            if record.id == first.run.id:
                late.append(daemon.trigger("sync"))  # before the scheduler loop gets a turn

        daemon._finish = finish_then_trigger  # type: ignore[method-assign]
        set_latency(emulator, 0)
        await wait_finished(daemon, first.run.id)
        assert len(late) == 1
        assert late[0].run.id == coalesced.run.id
        follow_up = await wait_finished(daemon, coalesced.run.id)
        assert follow_up.outcome == "succeeded"
        await wait_until("the job to be idle", lambda: daemon.jobs["sync"].current is None)
        runs = job_runs(daemon, "sync")
        assert [r.id for r in runs] == [first.run.id, coalesced.run.id]
        assert all(r.finished for r in runs)


# --------------------------------------------------------------------------- 2. failures


async def test_failing_job_backs_off_and_does_not_disturb_the_good_one(emulator: RunningEmulator, tmp_path: Path, state_url: str | None) -> None:
    every = {"every": "0.3s"}
    jobs = [
        {"name": "good", "kind": "sync", "source": "src", "schedule": every},
        {"name": "bad", "kind": "backup", "source": "bad", "schedule": every},
    ]
    daemon = daemon_for(make_settings(emulator, tmp_path / "state", jobs, state_url))
    seen: dict[int, tuple[Any, Any]] = {}  # consecutive failures -> (next_due, the failed run's end)

    def consecutive_failures(job: str) -> int:
        """Failed runs since the job's last success, as its history says (both backends)."""
        ended = [r.outcome for r in reversed(job_runs(daemon, job)) if r.finished and r.outcome != "cancelled"]
        return next((n for n, outcome in enumerate(ended) if outcome != "failed"), len(ended))

    def observe_bad() -> bool:
        state = daemon.jobs["bad"]
        timer = state.timer  # one daemon's: its next due time is checked against the backoff
        if state_url is None and state.current is None and timer.consecutive_failures and timer.next_due is not None:
            last = job_runs(daemon, "bad")[-1]
            seen.setdefault(timer.consecutive_failures, (timer.next_due, last.ended_at))
        good = [r for r in job_runs(daemon, "good") if r.outcome == "succeeded"]
        return consecutive_failures("bad") >= 3 and len(good) >= 2

    async with serving(daemon) as url, control(url, daemon_json_token(tmp_path / "state")) as api:
        await wait_until("three failures of bad and two successes of good", observe_bad)
        status, job = await api.get("/jobs/bad")
        assert status == 200 and job["consecutive_failures"] >= 3
        status, good_job = await api.get("/jobs/good")
        assert good_job["consecutive_failures"] == 0 and good_job["last_success_at"] is not None

        bad_runs = [r for r in job_runs(daemon, "bad") if r.finished]
        assert len(bad_runs) >= 3
        assert {r.outcome for r in bad_runs} == {"failed"}
        assert [r.cause for r in bad_runs[:3]] == ["schedule", "retry", "retry"]
        for record in bad_runs:
            assert record.error is not None and "\n" not in record.error
            assert "bad:" in record.error and "401" in record.error and "token" in record.error
            assert BAD_TOKEN not in record.error
        # Each retry waited at least the backoff after the failure before it: 0.2 s, 0.4 s, 0.8 s.
        for failures, (before, after) in enumerate(itertools.pairwise(bad_runs), start=1):
            backoff = timedelta(seconds=failure_backoff(failures, 0.2))
            assert before.ended_at is not None and after.started_at is not None
            assert after.started_at - before.ended_at >= backoff, (failures, before, after)
            if state_url is None:  # one daemon queues a retry when it starts it (a fleet offers its slot early, startable later)
                assert after.queued_at - before.ended_at >= backoff, (failures, before, after)
        if state_url is None:
            assert seen, "never saw the bad job idle between failures"
        for failures, (next_due, ended_at) in seen.items():
            backoff = timedelta(seconds=failure_backoff(failures, 0.2))
            assert next_due - ended_at >= backoff, (failures, next_due, ended_at)

        good_runs = [r for r in job_runs(daemon, "good") if r.finished]
        assert {r.outcome for r in good_runs} == {"succeeded"} and {r.cause for r in good_runs} == {"schedule"}

        text = daemon.metrics.render().decode()
        assert (metric_value(text, "syncd_job_runs_total", job="bad", outcome="failed") or 0) >= 3
        assert metric_value(text, "syncd_job_runs_total", job="bad", outcome="succeeded") is None
        assert (metric_value(text, "syncd_job_runs_total", job="good", outcome="succeeded") or 0) >= 2
        assert metric_value(text, "syncd_job_runs_total", job="good", outcome="failed") is None
        assert (metric_value(text, "syncd_api_requests_total", tenant="bad", method="GET", status="401") or 0) >= 3
        assert BAD_TOKEN not in text
    if state_url is not None:  # nothing the fleet stored quotes the token
        assert count_rows(state_url, "fleet_runs", "error LIKE ? OR summary::text LIKE ?", (f"%{BAD_TOKEN}%",) * 2) == 0
    for path in (tmp_path / "state").glob("daemon.db*"):
        assert BAD_TOKEN.encode() not in path.read_bytes(), path


# --------------------------------------------------------------------------- 3. reload


async def test_reload_removes_reschedules_and_rejects(emulator: RunningEmulator, tmp_path: Path, state_url: str | None) -> None:
    """(The cron job's next time is one daemon's timer on SQLite; a fleet shows its next slot,
    which it offers when it comes due.)"""
    state_dir = tmp_path / "state"
    slow = {"name": "slow", "kind": "sync", "source": "src"}
    keep = {"name": "keep", "kind": "backup", "source": "src", "schedule": {"cron": "0 3 1 1 *"}}
    next_config: list[Settings | Exception] = []

    def reload() -> Settings:
        value = next_config[-1]
        if isinstance(value, Exception):
            raise value
        return value

    one_daemon = state_url is None
    daemon = daemon_for(make_settings(emulator, state_dir, [slow, keep], state_url), reload=reload)
    async with serving(daemon) as url, control(url, daemon_json_token(state_dir)) as api:
        before = daemon.jobs["keep"].timer.next_due
        assert not one_daemon or before is not None and (before.month, before.day, before.hour, before.minute) == (1, 1, 3, 0)
        set_latency(emulator, 200)
        run = daemon.trigger("slow").run
        await wait_running(daemon, run.id)

        # -- remove the running job, reschedule the other
        rescheduled = {**keep, "schedule": {"cron": "30 4 2 2 *"}}
        next_config.append(make_settings(emulator, state_dir, [rescheduled], state_url))
        assert daemon.reload() is True
        current = daemon.jobs["slow"].current
        assert daemon.jobs["slow"].removed and current is not None and current.id == run.id and current.outcome == "running"  # still running
        status, listing = await api.get("/jobs")
        assert [job["name"] for job in listing["jobs"]] == ["keep"]
        assert (await api.get("/jobs/slow"))[0] == 404
        assert (await api.post("/jobs/slow/run"))[0] == 404
        with pytest.raises(KeyError):
            daemon.trigger("slow")
        after = daemon.jobs["keep"].timer.next_due
        status, view = await api.get("/jobs/keep")
        assert view["schedule"] == "cron 30 4 2 2 * in UTC"
        shown = datetime.fromisoformat(view["next_run_at"].replace("Z", "+00:00"))
        assert (shown.month, shown.day, shown.hour, shown.minute) == (2, 2, 4, 30), view  # one daemon's timer, or the fleet's next slot
        if one_daemon:
            assert shown == after

        set_latency(emulator, 0)
        ended = await wait_finished(daemon, run.id)
        assert ended.outcome == "succeeded", ended.error  # the removal let it finish
        await wait_until("the removed job to go", lambda: "slow" not in daemon.jobs)
        status, record = await api.get(f"/runs/{run.id}")
        assert status == 200 and record["outcome"] == "succeeded"  # its history stays
        assert job_runs(daemon, "keep") == []

        # -- a broken configuration is rejected; the running one stays
        next_config.append(ConfigError("syncd.toml: jobs[1].kind: is required"))
        assert daemon.reload() is False
        assert sorted(daemon.jobs) == ["keep"] and (not one_daemon or daemon.jobs["keep"].timer.next_due == after)
        assert daemon.settings.jobs[0].schedule is not None and daemon.settings.jobs[0].schedule.cron == "30 4 2 2 *"
        assert (await api.get("/jobs/keep"))[1]["schedule"] == "cron 30 4 2 2 * in UTC"

        # -- a new job with an interval schedule that never ran: it runs at once
        fresh = {"name": "fresh", "kind": "sync", "source": "src", "schedule": {"every": "1h"}}
        next_config.append(make_settings(emulator, state_dir, [rescheduled, fresh], state_url))
        assert daemon.reload() is True
        (first,) = await wait_until("the new job's first run", lambda: job_runs(daemon, "fresh"))
        assert (await wait_finished(daemon, first.id)).outcome == "succeeded"
        assert first.cause == "schedule"
        assert job_runs(daemon, "keep") == []  # its new cron time is far away too

        text = daemon.metrics.render().decode()
        assert metric_value(text, "syncd_config_reloads_total", outcome="rejected") == 1
        assert metric_value(text, "syncd_config_reloads_total", outcome="accepted") == 2


# --------------------------------------------------------------------------- 4. shutdown


async def test_stop_cancels_a_run_past_the_deadline_and_its_queued_follow_up(
    emulator: RunningEmulator, tmp_path: Path, state_url: str | None
) -> None:
    """One daemon cancels the follow-up it queued; a fleet replica leaves it queued, since it was
    promised to the fleet (whichever replica is free next runs it), not to this replica."""
    state_dir = tmp_path / "state"
    settings = make_settings(emulator, state_dir, [{"name": "sync", "kind": "sync", "source": "src"}], state_url, shutdown_deadline="0.5s")
    daemon = daemon_for(settings)
    set_latency(emulator, 300)  # a sync takes many round trips: far beyond the deadline
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            url = await group.start(daemon.serve)
            async with control(url, daemon_json_token(state_dir)) as api:
                running = daemon.trigger("sync").run
                await wait_running(daemon, running.id)
                await wait_until("the crawl's mirror run", lambda: "running" in mirror_run_statuses(settings))
                queued = daemon.trigger("sync")
                assert queued.status == "coalesced"

                daemon.stop()
                status, body = await api.post("/jobs/sync/run")
                assert status == 503 and "stopping" in body["error"]["message"]
                status, body = await api.get("/readyz")
                assert status == 503 and body["problems"] == ["stopping"]
                with pytest.raises(RuntimeError):
                    daemon.trigger("sync")
        # leaving the task group: serve returned by itself after the deadline

    assert daemon.runs is not None
    cancelled = run_of(daemon, running.id)
    assert cancelled.outcome == "cancelled" and cancelled.error and "stopped" in cancelled.error
    follow_up = run_of(daemon, queued.run.id)
    left = "cancelled" if state_url is None else "queued"
    assert follow_up.outcome == left and follow_up.started_at is None
    history, table = (state_dir / "daemon.db", "runs") if state_url is None else (state_url, "fleet_runs")
    assert count_rows(history, table) == 2  # as another process reads the history
    assert count_rows(history, table, "id = ? AND outcome = 'cancelled'", (running.id,)) == 1
    assert count_rows(history, table, "id = ? AND outcome = ? AND started_at IS NULL", (queued.run.id, left)) == 1
    if state_url is not None:  # and no replica holds it: the next one free claims it
        assert count_rows(state_url, "fleet_runs", "id = ? AND replica IS NULL", (queued.run.id,)) == 1
    statuses = mirror_run_statuses(settings)
    assert statuses and "running" not in statuses and "complete" not in statuses
    assert not (state_dir / "daemon.json").exists() and not (state_dir / "daemon.lock").exists()
    text = daemon.metrics.render().decode()
    assert metric_value(text, "syncd_job_runs_total", job="sync", outcome="cancelled") == 1
    assert metric_value(text, "syncd_job_running", job="sync") == 0


async def test_a_run_a_replica_claims_while_it_stops_ends_cancelled_not_running(emulator: RunningEmulator, tmp_path: Path, pg_url: str) -> None:
    """The stop lands while the scheduler's claim is in its worker thread, after the claim
    committed a run `running` under this replica's lease: the replica ends it `cancelled` before
    `serve` returns. (Before, the cancelled scheduler dropped the answer and the row stayed
    `running` with nobody left to run it, as the fleet's acceptance run once saw.)"""
    jobs = [{"name": "hourly", "kind": "sync", "source": "src", "schedule": {"every": "1h"}}]
    daemon = daemon_for(make_settings(emulator, tmp_path / "state", jobs, pg_url))
    open_runs, claimed = daemon._open_runs, []

    def runs_that_stop_the_daemon_mid_claim() -> Any:
        runs = open_runs()
        claim = runs.claim

        def claim_then_stop(*args: Any, **options: Any) -> Any:
            record = claim(*args, **options)
            if record is not None:
                claimed.append(record.id)
                anyio.from_thread.run_sync(daemon.stop)
                deadline = time.monotonic() + TIMEOUT  # until `serve` cancelled the scheduler waiting here
                while not (daemon._runs_group and daemon._runs_group.cancel_scope.cancel_called) and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(0.2)
            return record

        runs.claim = claim_then_stop
        return runs

    daemon._open_runs = runs_that_stop_the_daemon_mid_claim  # type: ignore[method-assign]
    with anyio.fail_after(TIMEOUT):
        await daemon.serve()
    assert len(claimed) == 1
    assert count_rows(pg_url, "fleet_runs", "outcome = 'running'") == 0
    assert count_rows(pg_url, "fleet_runs", "id = ? AND outcome = 'cancelled' AND error LIKE ?", (claimed[0], "%while stopping%")) == 1
    assert count_rows(pg_url, "fleet_job_leases") == 0  # the job is free for the next replica


# --------------------------------------------------------------------------- 5. control API


async def test_control_api_errors_and_authentication(emulator: RunningEmulator, tmp_path: Path, state_url: str | None) -> None:
    settings = make_settings(emulator, tmp_path / "state", [{"name": "sync", "kind": "sync", "source": "src"}], state_url, token=CONTROL_TOKEN)
    daemon = daemon_for(settings)
    async with serving(daemon) as url, control(url) as anonymous:
        api = Control(anonymous.session, url, CONTROL_TOKEN)
        assert await anonymous.get("/healthz") == (200, {"status": "ok"})
        for path in ("/metrics", "/jobs", "/readyz", "/runs/1"):
            status, body = await anonymous.get(path)
            assert status == 401 and body["error"]["code"] == 401, path
        assert (await anonymous.get("/metrics", token="wrong"))[0] == 401
        async with anonymous.session.get(url + "/metrics", headers={"Authorization": f"Basic {CONTROL_TOKEN}"}) as resp:
            assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await anonymous.post("/jobs/sync/run"))[0] == 401
        assert job_runs(daemon, "sync") == []  # the unauthenticated trigger did nothing

        status, text = await api.get("/metrics")
        assert status == 200 and metric_value(text, "syncd_job_running", job="sync") == 0
        assert CONTROL_TOKEN not in text
        assert (await api.get("/readyz")) == (200, {"ready": True, "problems": []})

        status, body = await api.get("/jobs/nope")
        assert status == 404 and body["error"]["code"] == 404
        assert "'nope'" in body["error"]["message"] and "configured: sync" in body["error"]["message"]
        assert (await api.post("/jobs/nope/run"))[0] == 404
        # A name with a quote in it still gets a JSON answer.
        status, body = await api.get('/jobs/a"b')
        assert status == 404 and body["error"]["message"].startswith("unknown job 'a\"b'")
        for run_id in ("abc", "999", "0", "-1", "1.5", "99999999999999999999999", "%C2%B2", "%D9%A1"):
            status, body = await api.get(f"/runs/{run_id}")
            assert status == 404 and body["error"]["code"] == 404, (run_id, status, body)

        status, answer = await api.post("/jobs/sync/run")
        assert status == 202 and answer["status"] == "started"
        run_id = answer["run"]["id"]
        await wait_finished(daemon, run_id)
        status, record = await api.get(f"/runs/{run_id}")
        assert status == 200 and record["outcome"] == "succeeded" and record["summary"]["status"] == "complete"
        status, listing = await api.get("/runs")
        assert [run["id"] for run in listing["runs"]] == [run_id]


# --------------------------------------------------------------------------- 6. restart


async def test_second_daemon_is_refused_and_a_restart_does_not_rerun_a_fresh_job(
    emulator: RunningEmulator, tmp_path: Path, state_url: str | None
) -> None:
    """A second daemon on the same state directory is refused on both backends (a fleet's replicas
    each have their own). After a restart, one daemon's timer measures `every` from the last start;
    a fleet's slot lies on the `every` grid and, once due, is queued for the fleet with a
    `not_before` the server's clock holds (a set clock does not make it startable)."""
    state_dir = tmp_path / "state"
    jobs = [
        {"name": "hourly", "kind": "sync", "source": "src", "schedule": {"every": "1h"}},
        {"name": "manual", "kind": "backup", "source": "src"},
    ]
    settings = make_settings(emulator, state_dir, jobs, state_url)
    first = daemon_for(settings)
    async with serving(first) as url:
        (run,) = await wait_until("the hourly job's first run", lambda: job_runs(first, "hourly"))
        ran = await wait_finished(first, run.id)
        assert ran.outcome == "succeeded" and ran.cause == "schedule"
        info = (state_dir / "daemon.json").read_text()

        second = daemon_for(make_settings(emulator, state_dir, jobs, state_url))
        with pytest.raises(DaemonBusyError) as refused:
            await second.serve()
        assert str(state_dir) in str(refused.value)
        assert (state_dir / "daemon.json").read_text() == info and url in info  # left alone
        assert second.runs is None
    assert not (state_dir / "daemon.json").exists()

    settings = make_settings(emulator, state_dir, jobs, state_url)
    clock = SetClock(datetime.now(UTC))
    third = daemon_for(settings, reload=lambda: settings, clock=clock)
    fleet = state_url is not None
    async with serving(third):
        assert third.runs is not None
        timer = third.jobs["hourly"].timer
        last_start = third.runs.last_start("hourly")
        assert last_start is not None and ran.started_at is not None
        assert abs(last_start - ran.started_at) < timedelta(milliseconds=1)  # persisted (to the ms)
        if fleet:
            last_slot = third.runs.slots_after("hourly")  # type: ignore[attr-defined]  # no pause: its latest slot
            assert last_slot is not None and last_slot <= ran.started_at
            due = last_slot + timedelta(hours=1)
        else:
            due = last_start + timedelta(hours=1)
            assert timer.next_due == due
            assert timer.next_due > third.clock() and not timer.running
        triggered = third.trigger("manual")
        assert triggered.status == "started"
        assert triggered.run.id == ran.id + 1 if not fleet else triggered.run.id > ran.id  # ids continue (a fleet's sequence may skip)
        backup = await wait_finished(third, triggered.run.id)
        assert backup.outcome == "succeeded", backup.error
        # A second before it is due, the scheduler looks and leaves the hourly job alone ...
        clock.now = due - timedelta(seconds=1)
        await a_scheduler_pass(third)
        assert [r.id for r in job_runs(third, "hourly")] == [ran.id]
        assert fleet or third.jobs["hourly"].timer.next_due == due
        # ... and once it is due, starts it (on schedule, not because something woke it).
        clock.now = due
        await a_scheduler_pass(third)
        runs = job_runs(third, "hourly")
        assert [r.id for r in runs[:-1]] == [ran.id] and runs[-1].cause == "schedule"
        if fleet:  # the slot `due`, queued for the fleet, startable once the server's clock reaches it
            assert state_url is not None and runs[-1].outcome == "queued"
            assert count_rows(state_url, "fleet_runs", "id = ? AND due_at = ? AND not_before = ?", (runs[-1].id, due, due)) == 1
        else:
            assert abs(runs[-1].queued_at - due) < timedelta(milliseconds=1)  # queued by the pass at `due` (stored to the ms)
            assert (await wait_finished(third, runs[-1].id)).outcome == "succeeded"


async def test_full_reads_catch_edits_no_change_token_shows(emulator: RunningEmulator, tmp_path: Path, state_url: str | None) -> None:
    """A custom field value set in place moves no change token: incremental runs carry the old
    value, the periodic full read (`full_every`) brings the new one."""
    org = emulator.generated.org_ids[0]
    jobs = [{"name": "sync", "kind": "sync", "source": f"src:{org}", "full_every": "1h"}]
    settings = make_settings(emulator, tmp_path, jobs, state_url)
    daemon = daemon_for(settings)

    def values() -> set[str]:
        with StateStore(state_of(settings), readonly=True) as mirror:
            return {json.dumps(row["data"], sort_keys=True) for row in mirror.current("src", "space-custom-field-value")}

    async with serving(daemon), aiohttp.ClientSession() as session:
        first = await wait_finished(daemon, daemon.trigger("sync").run.id)
        assert first.outcome == "succeeded" and first.summary["full"] is True
        before = values()
        auth = {"Authorization": f"Bearer {ALL_TOKEN}"}
        async with session.get(f"{emulator.url}/v1/orgs/{org}/custom-fields", headers=auth) as resp:
            field = (await resp.json())["items"][0]
        async with session.get(f"{emulator.url}/v1/orgs/{org}/spaces", headers=auth) as resp:
            space = (await resp.json())["items"][0]
        options = field.get("options") or ["x"]
        value = {"number": 424242, "boolean": True, "text": "424242", "single-select": options[-1], "multi-select": options[-1:]}[field["type"]]
        async with session.patch(
            f"{emulator.url}/v1/spaces/{space['id']}/custom-fields", json={"values": {field["name"]: {"value": value}}}, headers=auth
        ) as resp:
            assert resp.status == 204, await resp.text()
        second = await wait_finished(daemon, daemon.trigger("sync").run.id)
        assert second.outcome == "succeeded" and second.summary["full"] is False
        assert values() == before  # the incremental read could not know

        new = make_settings(emulator, tmp_path, [{**jobs[0], "full_every": "0.01s"}], state_url)
        daemon._reload_settings = lambda: new
        assert daemon.reload()
        third = await wait_finished(daemon, daemon.trigger("sync").run.id)
        assert third.summary["full"] is True
        assert values() != before


@sqlite_only  # one writer per file; PostgreSQL has one per tenant, and waits for it: the next test
async def test_a_run_that_finds_the_state_mirror_busy_fails_and_is_retried(emulator: RunningEmulator, tmp_path: Path, backend: str) -> None:
    """`syncd sync` writing the state mirror while a job wants it: the job's run fails with a
    clear reason, and a later run succeeds once the file is free."""
    from syncd.state.lock import WriterLock

    org = emulator.generated.org_ids[0]
    daemon = Daemon(make_settings(emulator, tmp_path, [{"name": "sync", "kind": "sync", "source": f"src:{org}"}]))
    other = WriterLock(tmp_path / "syncd.db")  # what another syncd process holds while it writes
    other.acquire()
    async with serving(daemon):
        try:
            busy = await wait_finished(daemon, daemon.trigger("sync").run.id)
        finally:
            other.release()
        assert busy.outcome == "failed"
        assert busy.error is not None and "being written by another syncd process" in busy.error
        later = await wait_finished(daemon, daemon.trigger("sync").run.id)
        assert later.outcome == "succeeded"


async def test_a_run_waits_for_another_writer_of_its_tenant_on_postgresql(emulator: RunningEmulator, tmp_path: Path, pg_url: str) -> None:
    """Another process (a replica's run, `syncd sync`) writing the tenant in the PostgreSQL state
    while a job wants it: the run waits for it (bounded, `StateStore.lock_wait`) instead of failing,
    and goes on once the writer lets go."""
    org = emulator.generated.org_ids[0]
    settings = make_settings(emulator, tmp_path, [{"name": "sync", "kind": "sync", "source": f"src:{org}"}], pg_url)
    daemon = daemon_for(settings)
    with StateStore(pg_url) as other:
        other.hold(["src"])  # what another syncd process holds while it writes tenant src
        holder = other.db.conn.info.backend_pid
        waiting = (
            "application_name LIKE ? AND pid != ? AND state = 'idle' AND query LIKE 'SELECT pg_try_advisory_lock%%'",
            (f"syncd mirror pid {os.getpid()} %", holder),
        )
        async with serving(daemon):
            run = daemon.trigger("sync").run
            try:
                await wait_until("the run to wait for the tenant", lambda: count_rows(pg_url, "pg_stat_activity", *waiting) > 0)
                assert run_of(daemon, run.id).outcome == "running"
                assert mirror_run_statuses(settings) == []  # it opened no run of the tenant meanwhile
            finally:
                other.unhold(["src"])
            ended = await wait_finished(daemon, run.id)
    assert ended.outcome == "succeeded", ended.error
    assert mirror_run_statuses(settings) == ["complete"]


async def test_reload_rejects_a_job_whose_token_cannot_be_read(emulator: RunningEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYNCD_TEST_ABSENT_TOKEN", raising=False)
    jobs = [{"name": "keep", "kind": "sync", "source": "src"}]
    broken = Settings.model_validate(
        {
            "tenants": {"src": {"base_url": emulator.url, "token": ALL_TOKEN}, "gone": {"base_url": emulator.url, "token_env": "SYNCD_TEST_ABSENT_TOKEN"}},
            "state_dir": str(tmp_path),
            "daemon": {"port": 0},
            "jobs": [*jobs, {"name": "new", "kind": "sync", "source": "gone"}],
        }
    )
    daemon = Daemon(make_settings(emulator, tmp_path, jobs), reload=lambda: broken)
    async with serving(daemon):
        assert daemon.reload() is False
        assert sorted(daemon.jobs) == ["keep"]
        text = daemon.metrics.render().decode()
        assert metric_value(text, "syncd_config_reloads_total", outcome="rejected") == 1


async def test_reload_keeps_the_listening_address_and_takes_a_new_control_token(emulator: RunningEmulator, tmp_path: Path) -> None:
    jobs = [{"name": "keep", "kind": "sync", "source": "src"}]
    first = make_settings(emulator, tmp_path, jobs, token=CONTROL_TOKEN)
    second = make_settings(emulator, tmp_path, jobs, port=1, token="rotated-token-77")
    daemon = Daemon(first, reload=lambda: second)
    async with serving(daemon) as url, control(url) as api:
        assert (await api.get("/jobs", token=CONTROL_TOKEN))[0] == 200
        assert daemon.reload() is True
        assert (daemon.settings.daemon.host, daemon.settings.daemon.port) == (first.daemon.host, first.daemon.port)
        assert (await api.get("/jobs", token=CONTROL_TOKEN))[0] == 401
        assert (await api.get("/jobs", token="rotated-token-77"))[0] == 200
