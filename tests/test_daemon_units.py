"""Small units of the daemon: the run history, backup retention, metrics, error lines."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from syncd.api.errors import AuthError
from syncd.daemon.run_history import MEMORY
from syncd.daemon.fleet_runs import FleetRunLog
from syncd.daemon.jobs import _backup_path, backup_files, prune_backups
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.runs import RunLog
from syncd.daemon.run_end import describe_error
from syncd.errors import ConfigError
from syncd.read.backup import blobs_dir
from tests.daemon_support import metric_value
from tests.state_support import count_rows, is_pg

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


# --------------------------------------------------------------------------- RunLog


@dataclass
class History:
    """The daemon's run history on one backend, opened as a daemon process opens it: one
    daemon's `RunLog` in `daemon.db`, or a fleet replica's `FleetRunLog` (registered as replica
    r1 under a pid of its own: each open is another process)."""

    where: Path | str
    opened: list[Any] = field(default_factory=list)
    pids: Iterator[int] = field(default_factory=lambda: itertools.count(40_000))

    @property
    def table(self) -> str:
        return "fleet_runs" if is_pg(self.where) else "runs"

    @property
    def memory(self) -> int:
        """Records the log holds in memory at most."""
        return MEMORY

    def open(self) -> Any:
        if is_pg(self.where):
            log: Any = FleetRunLog(str(self.where), "r1")
            log.register_replica("r1", "test-host", next(self.pids), None, 30.0)
        else:
            log = RunLog(Path(self.where))
        self.opened.append(log)
        return log

    def close(self, log: Any) -> None:
        """A clean stop (a fleet replica retires its name, as `syncd serve` does)."""
        if is_pg(self.where):
            log.retire_replica("r1")
        log.close()

    def die(self, log: Any) -> None:
        """The process ends without closing its runs (a fleet replica's registration runs out)."""
        if is_pg(self.where):
            log.expire_replica("r1")
            log.close()
        else:
            log.db.conn.close()


@pytest.fixture
def history(state: Path | str) -> Iterator[History]:
    """Both backends: one daemon's `daemon.db` (beside the state's syncd.db), a fleet's PostgreSQL."""
    made = History(state if is_pg(state) else Path(state).with_name("daemon.db"))
    if not is_pg(state):
        Path(state).parent.mkdir(parents=True, exist_ok=True)
    yield made
    for log in made.opened:
        log.close()


def test_runlog_ids_continue_across_reopen_and_records_read_back(history: History) -> None:
    log = history.open()
    first = log.new("sync", "sync", "schedule", T0)
    second = log.new("backup", "backup", "trigger", T0 + timedelta(seconds=1))
    first.started_at, first.ended_at, first.outcome = T0, T0 + timedelta(seconds=2.5), "succeeded"
    first.summary = {"changes": {"added": 3}}
    log.save(first)
    second.started_at, second.ended_at, second.outcome, second.error = T0, T0, "failed", "src: 401"
    log.save(second)
    history.close(log)

    again = history.open()
    try:
        third = again.new("sync", "sync", "trigger", T0 + timedelta(minutes=1))
        assert (first.id, second.id, third.id) == (1, 2, 3)
        back = again.get(first.id)
        assert back is not None and back is not first
        assert back.as_dict() == {**first.as_dict(), **({"replica": "r1", "attempt": 1} if is_pg(history.where) else {})}
        assert back.seconds == 2.5
        failed = again.get(second.id)
        assert failed is not None and (failed.outcome, failed.error) == ("failed", "src: 401")
        assert again.get(999) is None
        assert again.last_start("sync") == T0
        assert again.last_success("sync") == T0 + timedelta(seconds=2.5)
        assert again.last_success("backup") is None
    finally:
        again.close()


def test_runlog_closes_runs_of_a_dead_process(history: History) -> None:
    """A run the dead process was running failed (and counts as the job's last start, so a
    job that kills the daemon does not run again at once); one it had queued never started.
    (A fleet closes them when the next process registers under the dead one's replica name.)"""
    log = history.open()
    queued = log.new("sync", "sync", "trigger", T0)
    running = log.new("backup", "backup", "schedule", T0)
    running.started_at, running.outcome = T0, "running"
    log.save(running)
    done = log.new("mirror", "mirror", "schedule", T0)
    done.started_at, done.ended_at, done.outcome = T0, T0, "partial"
    log.save(done)
    history.die(log)  # nothing closes its runs

    again = history.open()
    try:
        record = again.get(queued.id)
        assert record is not None and record.outcome == "cancelled" and record.finished
        assert record.error and "before the run started" in record.error
        record = again.get(running.id)
        assert record is not None and record.outcome == "failed" and record.finished
        assert record.error and "ended during the run" in record.error
        assert again.last_start("backup") == T0
        kept = again.get(done.id)
        assert kept is not None and kept.outcome == "partial" and kept.error is None
    finally:
        again.close()


def test_runlog_of_job_and_latest_are_newest_first(history: History) -> None:
    log = history.open()
    try:
        ids: dict[str, list[int]] = {"a": [], "b": []}
        for index in range(7):
            job = "a" if index % 3 else "b"
            ids[job].append(log.new(job, "sync", "schedule", T0 + timedelta(seconds=index)).id)
        assert [r.id for r in log.of_job("a")] == sorted(ids["a"], reverse=True)
        assert [r.id for r in log.of_job("b", limit=2)] == sorted(ids["b"], reverse=True)[:2]
        assert [r.id for r in log.latest(4)] == [7, 6, 5, 4]
        assert log.of_job("nope") == []
    finally:
        log.close()


def test_runlog_keeps_memory_bounded_and_every_run_retrievable(history: History) -> None:
    log = history.open()
    memory = history.memory
    try:
        total = memory + 60
        for index in range(total):
            record = log.new("sync", "sync", "schedule", T0 + timedelta(seconds=index))
            record.started_at, record.ended_at, record.outcome = record.queued_at, record.queued_at, "succeeded"
            record.summary = {"n": index}
            log.save(record)
        assert len(log._recent) <= memory
        for run_id in (1, 2, 30, total - memory, total):
            record = log.get(run_id)
            assert record is not None and record.id == run_id
            assert record.summary == {"n": run_id - 1} and record.outcome == "succeeded"
        assert [r.id for r in log.of_job("sync", limit=total)] == list(range(total, 0, -1))
        assert len(log._recent) <= memory
    finally:
        log.close()


# --------------------------------------------------------------------------- backups


def _make_backup(folder: Path, job: str, when: datetime, with_blobs: bool = True) -> Path:
    path = _backup_path(folder, job, when)
    path.write_bytes(b"sqlite")
    if with_blobs:
        blobs = blobs_dir(path)
        blobs.mkdir()
        (blobs / "ab").write_bytes(b"blob")
    return path


def test_backup_files_sort_by_time_and_ignore_other_files(tmp_path: Path) -> None:
    folder = tmp_path / "backups" / "nightly"
    assert backup_files(folder, "nightly") == []  # no folder yet
    folder.mkdir(parents=True)
    # Made out of order; across a second, a minute, a day and a year boundary.
    times = [T0 + timedelta(days=400), T0, T0 + timedelta(milliseconds=999), T0 + timedelta(seconds=1), T0 + timedelta(days=1)]
    made = {when: _make_backup(folder, "nightly", when) for when in times}
    (folder / f".{made[T0].name}.partial-123").write_bytes(b"half")  # an unfinished backup
    (folder / "notes.txt").write_text("not a backup")
    assert backup_files(folder, "nightly") == [made[when] for when in sorted(times)]


def test_prune_keeps_the_newest_and_deletes_blobs_of_pruned(tmp_path: Path) -> None:
    folder = tmp_path / "backups" / "nightly"
    folder.mkdir(parents=True)
    made = [_make_backup(folder, "nightly", T0 + timedelta(hours=hours)) for hours in (5, 1, 3, 2, 4)]
    by_time = sorted(made)
    pruned = prune_backups(folder, "nightly", keep=2)
    assert pruned == by_time[:3]
    assert backup_files(folder, "nightly") == by_time[3:]
    for path in by_time[:3]:
        assert not path.exists() and not blobs_dir(path).exists()
    for path in by_time[3:]:
        assert path.exists() and (blobs_dir(path) / "ab").read_bytes() == b"blob"
    assert prune_backups(folder, "nightly", keep=2) == []
    assert prune_backups(folder, "nightly", keep=5) == []
    # A backup without a blobs folder is pruned without complaint.
    extra = _make_backup(folder, "nightly", T0 + timedelta(hours=9), with_blobs=False)
    assert prune_backups(folder, "nightly", keep=1) == by_time[3:]
    assert backup_files(folder, "nightly") == [extra]


def test_backup_path_never_collides_within_a_millisecond(tmp_path: Path) -> None:
    when = datetime(2026, 11, 26, 0, 15, 44, 123456, tzinfo=UTC)
    first = _backup_path(tmp_path, "job", when)
    assert first.name == "job-20261126T001544.123Z.db"
    first.touch()
    second = _backup_path(tmp_path, "job", when + timedelta(microseconds=100))  # same millisecond
    assert second != first and not second.exists()
    second.touch()
    third = _backup_path(tmp_path, "job", when)
    assert third not in (first, second)
    third.touch()
    assert backup_files(tmp_path, "job") == [first, second, third]  # still in time order
    # A non-UTC clock gives the same UTC name.
    cet = when.astimezone(timezone(timedelta(hours=1)))
    assert _backup_path(tmp_path / "other", "job", cet).name == first.name


# --------------------------------------------------------------------------- metrics


def test_metrics_on_response_counts_statuses_429_and_remaining() -> None:
    metrics = DaemonMetrics()
    metrics.on_response("src", "GET", 200, 99)
    metrics.on_response("src", "GET", 200, 98)
    metrics.on_response("src", "GET", 429, 0)
    metrics.on_response("src", "POST", "error", None)
    metrics.on_response("dst", "GET", 200, None)
    metrics.on_retry("src")
    text = metrics.render().decode()
    assert metric_value(text, "syncd_api_requests_total", tenant="src", method="GET", status="200") == 2
    assert metric_value(text, "syncd_api_requests_total", tenant="src", method="GET", status="429") == 1
    assert metric_value(text, "syncd_api_requests_total", tenant="src", method="POST", status="error") == 1
    assert metric_value(text, "syncd_api_rate_limited_total", tenant="src") == 1
    assert metric_value(text, "syncd_api_rate_limited_total", tenant="dst") is None
    assert metric_value(text, "syncd_api_rate_limit_remaining", tenant="src") == 0  # the latest answer, not the max
    assert metric_value(text, "syncd_api_rate_limit_remaining", tenant="dst") is None  # never told
    assert metric_value(text, "syncd_api_retries_total", tenant="src") == 1


def test_metrics_set_objects_zeroes_kinds_that_vanished() -> None:
    metrics = DaemonMetrics()
    metrics.set_objects("src", {"space": 3, "page": 10, "file": 2})
    metrics.set_objects("dst", {"space": 1})
    metrics.set_objects("src", {"space": 4})
    text = metrics.render().decode()
    assert metric_value(text, "syncd_objects_mirrored", tenant="src", kind="space") == 4
    assert metric_value(text, "syncd_objects_mirrored", tenant="src", kind="page") == 0
    assert metric_value(text, "syncd_objects_mirrored", tenant="src", kind="file") == 0
    assert metric_value(text, "syncd_objects_mirrored", tenant="dst", kind="space") == 1
    metrics.set_objects("src", {"page": 1})
    text = metrics.render().decode()
    assert metric_value(text, "syncd_objects_mirrored", tenant="src", kind="space") == 0
    assert metric_value(text, "syncd_objects_mirrored", tenant="src", kind="page") == 1


def test_metrics_job_runs() -> None:
    metrics = DaemonMetrics()
    metrics.job_known("sync")
    assert metric_value(metrics.render().decode(), "syncd_job_running", job="sync") == 0
    metrics.run_started("sync")
    assert metric_value(metrics.render().decode(), "syncd_job_running", job="sync") == 1
    metrics.run_finished("sync", "failed", 2.0, 1000.0)
    metrics.run_finished("sync", "succeeded", 3.0, 2000.0)
    text = metrics.render().decode()
    assert metric_value(text, "syncd_job_running", job="sync") == 0
    assert metric_value(text, "syncd_job_runs_total", job="sync", outcome="failed") == 1
    assert metric_value(text, "syncd_job_runs_total", job="sync", outcome="succeeded") == 1
    assert metric_value(text, "syncd_job_run_duration_seconds_count", job="sync") == 2
    assert metric_value(text, "syncd_job_last_success_timestamp_seconds", job="sync") == 2000.0


# --------------------------------------------------------------------------- describe_error


def test_describe_error_plain_exceptions() -> None:
    assert describe_error(ValueError("bad\n   value\there")) == "ValueError: bad value here"
    assert describe_error(RuntimeError()) == "RuntimeError"
    assert describe_error(ConfigError("tenants.src.token: is empty")) == "tenants.src.token: is empty"
    assert describe_error(ConfigError()) == "ConfigError"
    auth = AuthError("invalid API token", status=401, method="get", path="/v1/orgs?page=2", tenant="src")
    assert describe_error(auth) == str(auth)
    assert describe_error(auth).startswith("src: GET /v1/orgs: 401 invalid API token")


def test_describe_error_unwraps_nested_exception_groups() -> None:
    single = ExceptionGroup("outer", [ExceptionGroup("inner", [KeyError("space")])])
    assert describe_error(single) == "KeyError: 'space'"
    several = ExceptionGroup(
        "outer",
        [ConfigError("first"), ExceptionGroup("inner", [ValueError("second"), OSError("third")]), TypeError("x")],
    )
    line = describe_error(several)
    assert line == "first; ValueError: second; OSError: third; TypeError: x"
    many = ExceptionGroup("many", [ValueError(str(n)) for n in range(6)])
    assert describe_error(many) == "ValueError: 0; ValueError: 1; ValueError: 2"
    assert "\n" not in describe_error(ExceptionGroup("g", [ValueError("a\nb"), ValueError("c")]))


@pytest.mark.parametrize(("outcome", "closed"), [("queued", "cancelled"), ("running", "failed")])
def test_runlog_reopen_leaves_no_open_row_in_the_history(history: History, outcome: str, closed: str) -> None:
    log = history.open()
    record = log.new("sync", "sync", "trigger", T0)
    record.outcome = outcome  # type: ignore[assignment]
    log.save(record)
    history.die(log)
    history.close(history.open())
    # As another process reads the history: the one row, closed.
    assert count_rows(history.where, history.table) == 1
    assert count_rows(history.where, history.table, "outcome = ?", (closed,)) == 1


def test_last_start_ignores_runs_a_shutdown_cancelled(history: History) -> None:
    """A restart during a deploy must not skip the run the shutdown interrupted."""
    log = history.open()
    try:
        done = log.new("backup", "backup", "schedule", T0)
        done.started_at, done.ended_at, done.outcome = T0, T0 + timedelta(minutes=1), "succeeded"
        log.save(done)
        cut = log.new("backup", "backup", "schedule", T0 + timedelta(days=1))
        cut.started_at, cut.ended_at, cut.outcome = T0 + timedelta(days=1), T0 + timedelta(days=1, minutes=1), "cancelled"
        log.save(cut)
        assert log.last_start("backup") == T0
    finally:
        log.close()


def test_metrics_forget_a_removed_job() -> None:
    metrics = DaemonMetrics()
    metrics.job_known("gone")
    metrics.run_finished("gone", "succeeded", 1.0, 1e9)
    metrics.forget_job("gone")
    assert 'job="gone"' not in metrics.render().decode()


def test_runlog_prune_keeps_the_latest_and_what_scheduling_reads(history: History) -> None:
    log = history.open()
    try:
        full = log.new("sync", "sync", "schedule", T0)
        full.started_at, full.ended_at, full.outcome, full.summary = T0, T0, "succeeded", {"full": True}
        log.save(full)
        for index in range(30):
            record = log.new("sync", "sync", "schedule", T0 + timedelta(minutes=index + 1))
            record.started_at = record.ended_at = T0 + timedelta(minutes=index + 1)
            record.outcome = "failed"
            log.save(record)
        assert log.prune(keep=5) == 25
        remaining = sorted(r.id for r in log.latest(100))
        assert remaining == [full.id, *range(full.id + 26, full.id + 31)]
        assert log.last_full("sync") == T0 and log.last_success("sync") is not None
    finally:
        log.close()


# --------------------------------------------------------------------------- paused jobs (issue 39)


def test_a_pause_is_kept_across_reopen_once_and_a_resume_lifts_it(history: History) -> None:
    """Both histories keep a pause (one daemon's daemon.db, the fleet's table), pausing twice
    keeps the first, and a pause ends the job's queued runs unstarted in the fleet."""
    log = history.open()
    fleet = is_pg(history.where)
    queued = log.offer_trigger("sync", "sync").run if fleet else None  # waiting for any replica
    pause, new = log.pause("sync", "ops@host", T0 + timedelta(minutes=1))
    assert new and (pause.job, pause.by) == ("sync", "ops@host")
    again, new_again = log.pause("sync", "someone else", T0 + timedelta(minutes=2))
    assert not new_again and again == pause
    history.close(log)
    reopened = history.open()
    assert reopened.paused_jobs() == {"sync": pause}
    if queued is not None:  # the fleet ends the job's waiting runs at once (one daemon: `Daemon.pause`)
        assert reopened.get(queued.id).outcome == "cancelled"
        assert "paused (by ops@host)" in reopened.get(queued.id).error
    assert reopened.resume("sync", "ops@host", T0 + timedelta(minutes=3))
    assert not reopened.resume("sync", "ops@host", T0 + timedelta(minutes=3))
    assert reopened.paused_jobs() == {}


def test_who_asks_is_one_clean_bounded_line_and_a_paused_job_shows_as_paused() -> None:
    from syncd.daemon.pauses import OPERATOR, who
    from syncd.daemon.run_history import Pause
    from syncd.daemon.views import paused_view

    assert who("ops\x1b[31m@host\n(cli)") == "ops@host (cli)"
    assert who(None) == who("  ") == OPERATOR and len(who("x" * 500)) == 100
    pause = Pause("sync", T0, "ops")
    idle = paused_view({"state": "idle", "next_run_at": "2026-03-01T12:00:00.000Z"}, pause)
    assert idle == {"state": "paused", "next_run_at": None, "paused": {"at": "2026-03-01T12:00:00.000Z", "by": "ops"}}
    running = paused_view({"state": "running", "next_run_at": None}, pause)
    assert running["state"] == "running" and running["paused"]["by"] == "ops"  # its run goes on
    assert paused_view({"state": "due", "next_run_at": None}, None)["paused"] is None


def test_the_paused_gauge_follows_a_job_and_goes_with_it() -> None:
    metrics = DaemonMetrics()
    metrics.job_paused("sync", True)
    assert metric_value(metrics.render().decode(), "syncd_job_paused", job="sync") == 1
    metrics.job_paused("sync", False)
    assert metric_value(metrics.render().decode(), "syncd_job_paused", job="sync") == 0
    metrics.forget_job("sync")
    assert metric_value(metrics.render().decode(), "syncd_job_paused", job="sync") is None
