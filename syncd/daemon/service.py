"""`syncd serve`: the long-lived service that runs the configured jobs on their schedules.

Structure (one event loop, everything supervised by anyio task groups):

- the **scheduler loop** starts each job whose timer (`JobTimer`) is due, and sleeps until
  the next due time or until something wakes it (a trigger, a finished run, a reload);
- each **run** is a task in the runs' task group with its own cancel scope; runs of jobs
  that write the same state file take turns (one lock per file), other jobs run in parallel;
  any exception ends the run as `failed` with its reason and never reaches the daemon;
- an operator may **pause** a job (its schedule does not fire, triggers are refused; kept in
  `daemon.db`, so across restarts), **resume** it (due again from its next schedule time,
  not for the times it missed), and **cancel** its run: the run's own cancel scope, the path
  a shutdown takes, so the run ends `cancelled` with its state as consistent as after SIGTERM;
- the **signal watcher**: SIGHUP reloads the configuration (a broken file is rejected with
  a log line and the old configuration stays), read in a thread within `RELOAD_DEADLINE` so
  that a slow or strange file never stops the loop; SIGTERM/SIGINT stop the scheduler, give
  the runs `daemon.shutdown_deadline` to finish, then cancel them (a second signal cancels at
  once). A cancelled crawl leaves its mirror run unfinished (the previous snapshot stays
  current) and a cancelled apply leaves its intents in the journal, to be settled by the
  next run: cancellation is safe at any await;
- the **control API** (`syncd.daemon.control`) reads this object's state.

A lock on the state directory (`state/daemon.lock`) keeps a second daemon off the same state.

The control API always wants a bearer token: `daemon.token`, or, when none is configured, one
this object makes at start and writes to `state/daemon.json` (mode 0600, replaced atomically)
for `syncd jobs` / `syncd trigger` and the operator's `curl`. A reload never leaves the address
actually listened on (which only a restart changes) without a configured token off loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import SecretStr

from syncd.api.telemetry import observing
from syncd.config import JobConfig, MirrorJob, Settings, _is_loopback, load_settings
from syncd.daemon.control_token import ControlToken
from syncd.daemon.detached import in_detached_thread
from syncd.daemon.jobs import execute_job, save_mirror_plan, state_files
from syncd.daemon.listening import listening
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.pauses import JobPaused, NothingToCancel, cancelled_by, paused_before_start
from syncd.daemon.progress import reporting
from syncd.daemon.remote import local_url
from syncd.daemon.run_end import RunFailed, describe_error, log_run_end
from syncd.daemon.run_history import NEVER_STARTED, Pause, RunHistory, RunRecord
from syncd.daemon.runs import RunLog
from syncd.daemon.schedule import JobTimer
from syncd.daemon.views import JobState, TriggerResult, job_view, paused_view
from syncd.errors import ConfigError, SyncdError
from syncd.files import private_dir, replace_private
from syncd.logging import get_logger
from syncd.state.lock import WriterLock
from syncd.temp_dir import choose as choose_temp_dir
from syncd.temp_dir import use_chosen as use_temp_dir

__all__ = ["Daemon", "DaemonBusyError", "JobState", "TriggerResult"]

log = get_logger("syncd.daemon")
_IDLE_WAKE = 60.0
"""Longest sleep of the scheduler loop: a clock jump is noticed within a minute."""
RELOAD_DEADLINE = 10.0
"""Longest a SIGHUP's reading of the configuration (the file, the job's token files) may take,
in a worker thread; past it the reload is rejected and the running configuration stays."""


class DaemonBusyError(SyncdError):
    """Another daemon holds the state directory."""

    exit_code = 2


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_job_tokens(settings: Settings) -> None:
    """Every token a job needs is at hand (`token_env` set, `token_file` readable): a missing
    one stops the start (exit 2) or rejects a reload, rather than failing each run later."""
    for job in settings.jobs:
        for ref in (job.source, job.target):
            if ref is not None:
                try:
                    settings.tenant(ref.tenant).resolved_token()
                except ConfigError as exc:
                    raise ConfigError(f"job {job.name}: {exc}") from None


def check_reload(running: Settings, new: Settings) -> None:
    """A reload must not open the control API: the address listened on stays until a restart
    (whatever the new file says), so off loopback the new file must keep a token."""
    host = running.daemon.host
    if new.daemon.token is None and not _is_loopback(host):
        raise ConfigError(
            f"daemon.token: the control API listens on {host} until the daemon restarts, and a "
            "configuration without daemon.token (or SYNCD_DAEMON__TOKEN) would open it to the network; "
            "keep the token, or restart the daemon to move it to loopback"
        )


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, readable by its owner only whatever it was before
    (a reader sees the old file or the new one)."""
    with replace_private(path, keep_mode=False) as handle:
        handle.write(text)


class Daemon:
    """The service; `await Daemon(settings).serve()` runs until SIGTERM / SIGINT."""

    def __init__(
        self,
        settings: Settings,
        *,
        reload: Callable[[], Settings] | None = None,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._reload_settings = reload if reload is not None else (lambda: load_settings(settings.config_file, record_temp_dir=False))
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.metrics = DaemonMetrics()
        self.jobs: dict[str, JobState] = {}
        self.runs: RunHistory | None = None
        self.stopping = False
        self.url: str | None = None
        self.started_at = clock()
        self._wake = anyio.Event()
        self._stop = anyio.Event()
        self._file_locks: dict[str, anyio.Lock] = {}
        self._runs_group: TaskGroup | None = None
        self._token = ControlToken()
        self._reload_wanted = anyio.Event()

    @property
    def control_token(self) -> SecretStr:
        """The bearer token the control API wants (`syncd.daemon.control_token`)."""
        return self._token.current(self.settings)

    # -- lifecycle -----------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        return self.settings.state_dir

    def _prepare_state_dir(self) -> None:
        try:
            private_dir(self.state_dir)
        except OSError as exc:
            raise ConfigError(f"state_dir {self.state_dir}: cannot create it: {exc.strerror or exc}") from None
        if not os.access(self.state_dir, os.W_OK | os.X_OK):
            raise ConfigError(f"state_dir {self.state_dir}: not writable by this user")
        choose_temp_dir(self.settings.temp_path)
        use_temp_dir(create=True)  # before any job's thread: SQLite's temporary files go there from the start

    def _state_lock(self) -> WriterLock:
        directory = self.state_dir
        return WriterLock(
            directory / "daemon",
            lock_path=directory / "daemon.lock",
            busy=lambda holder: DaemonBusyError(
                f"another syncd daemon is running on state directory {directory} ({holder}); "
                "stop it, or give this one another state_dir"
            ),
        )

    async def serve(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until stopped; `task_status.started(url)` once the control API listens."""
        check_job_tokens(self.settings)
        self._prepare_state_dir()
        lock = self._state_lock()
        lock.acquire()
        info_file = self.state_dir / "daemon.json"
        try:
            self.runs = self._open_runs()
            self._adopt_jobs(self.settings.jobs)
            # Listen first: a port in use is a plain error, not one wrapped by a task group.
            async with self._control_api() as url, anyio.create_task_group() as group:
                await group.start(self._watch_signals)
                group.start_soon(self._reload_when_asked)
                self.url = url
                self._joined(url)
                self._write_info(self.settings)
                log.info(
                    "daemon.started", url=url, jobs=sorted(self.jobs), state_dir=str(self.state_dir), pid=os.getpid(),
                    control_auth=self._auth_word(self.settings),
                )
                task_status.started(url)
                async with anyio.create_task_group() as runs:
                    self._runs_group = runs
                    group.start_soon(self._schedule_loop)
                    await self._stop.wait()
                    await self._drain(runs)
                group.cancel_scope.cancel()
            log.info("daemon.stopped")
        finally:
            info_file.unlink(missing_ok=True)
            if self.runs is not None:
                self._leaving()
                self.runs.close()
            lock.release()

    def _open_runs(self) -> RunHistory:
        """The run history: `daemon.db` in the state directory (a fleet's is in PostgreSQL)."""
        return RunLog(self.state_dir / "daemon.db")

    def _joined(self, url: str) -> None:
        """The control API listens at `url` (a fleet replica announces itself here)."""

    def _leaving(self) -> None:
        """The daemon is about to close its run history (a fleet replica retires here)."""

    @staticmethod
    def _auth_word(settings: Settings) -> str:
        return "daemon.token" if settings.daemon.token is not None else "token made at start, in daemon.json"

    def _write_info(self, settings: Settings) -> None:
        """`state/daemon.json`: how `syncd jobs` / `trigger` (and `curl`) reach this daemon; the
        token is in it only when the daemon made it (a configured one is never written)."""
        info: dict[str, Any] = {"pid": os.getpid(), "url": self.url, "started_at": self.started_at.isoformat()}
        if settings.daemon.token is None:
            info["token"] = self._token.made().get_secret_value()
        write_private(self.state_dir / "daemon.json", json.dumps(info) + "\n")

    def stop(self, reason: str = "requested") -> None:
        """Stop taking new work; `serve` drains the running jobs and returns."""
        if self.stopping:
            return
        self.stopping = True
        log.info("daemon.stopping", reason=reason, running=[s.config.name for s in self.jobs.values() if s.current], deadline=self.settings.daemon.shutdown_deadline)
        self._stop.set()
        self._wake.set()

    async def _drain(self, runs: TaskGroup) -> None:
        deadline = self.settings.daemon.shutdown_deadline
        with anyio.move_on_after(deadline):
            while any(state.current for state in self.jobs.values()):
                self._wake = anyio.Event()
                await self._wake.wait()
        still = [state.config.name for state in self.jobs.values() if state.current]
        if still:
            log.warning("daemon.cancelling_runs", jobs=still, after_seconds=deadline)
        runs.cancel_scope.cancel()
        for state in self.jobs.values():
            if state.queued is not None:
                self._close_unstarted(state.queued)
                state.queued = None

    def _close_unstarted(self, record: RunRecord, why: str = NEVER_STARTED) -> None:
        assert self.runs is not None
        record.outcome, record.error, record.ended_at = "cancelled", why, self.clock()
        self.runs.save(record)

    async def _watch_signals(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                if signum == signal.SIGHUP:
                    self._reload_wanted.set()  # read by `_reload_when_asked`: this loop stays free for SIGTERM
                elif self.stopping:
                    log.warning("daemon.cancel_now", signal=signal.Signals(signum).name)
                    if self._runs_group is not None:
                        self._runs_group.cancel_scope.cancel()
                else:
                    self.stop(signal.Signals(signum).name)

    # -- configuration ------------------------------------------------------------------

    def _new_timer(self, job: JobConfig, now: datetime) -> JobTimer:
        assert self.runs is not None
        timer = JobTimer.create(job.schedule, now, self.rng, last_start=self.runs.last_start(job.name))
        timer.backoff_base = self.settings.daemon.failure_backoff
        return timer

    def _adopt_jobs(self, jobs: list[JobConfig]) -> dict[str, list[str]]:
        """Make the tracked jobs those of `jobs`; returns what was added, changed, removed."""
        assert self.runs is not None
        now = self.clock()
        wanted = {job.name: job for job in jobs}
        paused = self.runs.paused_jobs()
        report: dict[str, list[str]] = {"added": [], "changed": [], "removed": []}
        for name, state in list(self.jobs.items()):
            if name not in wanted:
                report["removed"].append(name)
                if state.queued is not None:
                    self._close_unstarted(state.queued)
                    state.queued = None
                if state.current is not None:
                    state.removed = True
                else:
                    del self.jobs[name]
                    self.metrics.forget_job(name)
        for name, job in wanted.items():
            state = self.jobs.get(name)
            if state is None:
                self.jobs[name] = JobState(job, self._new_timer(job, now))
                self.metrics.job_known(name)
                self.metrics.job_paused(name, name in paused)
                report["added"].append(name)
                continue
            state.removed = False
            state.timer.backoff_base = self.settings.daemon.failure_backoff
            if state.config != job:
                report["changed"].append(name)
                state.config = job
                state.timer.reschedule(job.schedule, now, self.rng)
        return report

    def _read_settings(self) -> Settings:
        """The configuration as the files say now, with every token its jobs need read: what a
        reload would adopt. Reads files only: run in a worker thread (`reload_off_loop`)."""
        new = self._reload_settings()
        check_job_tokens(new)
        return new

    def _reject_reload(self, error: str) -> bool:
        self.metrics.reloads.labels("rejected").inc()
        log.error("config.reload_rejected", error=error, kept="the running configuration")
        return False

    def reload(self) -> bool:
        """Re-read the configuration here and now; a broken one is rejected and the old one
        stays. The daemon reads it off its loop instead (`reload_off_loop`)."""
        try:
            new = self._read_settings()
        except Exception as exc:  # noqa: BLE001 - whatever broke, the running configuration stays
            return self._reject_reload(describe_error(exc))
        return self._adopt_settings(new)

    async def reload_off_loop(self) -> bool:
        """`reload`, the configuration read in a thread of its own: a file that is slow to read
        (a hung network mount) never stops the loop, and one not read within `RELOAD_DEADLINE`
        rejects the reload (the thread is left to end on its own, and never keeps the process
        from exiting: `in_detached_thread`)."""
        try:
            new = await in_detached_thread(self._read_settings, deadline=RELOAD_DEADLINE, name="syncd reload")
        except TimeoutError:
            return self._reject_reload(f"the configuration was not read within {RELOAD_DEADLINE:g} s (a file that does not answer?)")
        except Exception as exc:  # noqa: BLE001 - whatever broke, the running configuration stays
            return self._reject_reload(describe_error(exc))
        return self._adopt_settings(new)

    async def _reload_when_asked(self) -> None:
        """Reload once per SIGHUP, one at a time; SIGHUPs that come during a reload make one more."""
        while True:
            await self._reload_wanted.wait()
            self._reload_wanted = anyio.Event()
            await self.reload_off_loop()

    def _adopt_settings(self, new: Settings) -> bool:
        """Run with `new` from now on, unless it would open the control API (rejected)."""
        try:
            check_reload(self.settings, new)
            if (new.daemon.token is None) != (self.settings.daemon.token is None) and self.url is not None:
                self._write_info(new)  # the token clients must read from it comes or goes
        except Exception as exc:  # noqa: BLE001 - whatever broke, the running configuration stays
            return self._reject_reload(describe_error(exc))
        needs_restart = [
            key for key in ("host", "port") if getattr(new.daemon, key) != getattr(self.settings.daemon, key)
        ] + (["state_dir"] if new.state_dir != self.settings.state_dir else []) + (
            ["state_url"] if new.state_url != self.settings.state_url or new.fleet != self.settings.fleet else []
        ) + (["temp_dir"] if new.temp_dir != self.settings.temp_dir else [])
        if needs_restart:
            log.warning("config.restart_needed", settings=needs_restart, detail="these take effect when the daemon restarts")
            new.state_dir, new.state_url, new.fleet = self.settings.state_dir, self.settings.state_url, self.settings.fleet
            new.temp_dir = self.settings.temp_dir  # SQLite's temporary directory is the process's: moved by a restart only
            new.daemon = new.daemon.model_copy(update={"host": self.settings.daemon.host, "port": self.settings.daemon.port})
        self.settings = new
        report = self._adopt_jobs(new.jobs)
        self.metrics.reloads.labels("accepted").inc()
        log.info("config.reloaded", jobs=sorted(self.jobs), control_auth=self._auth_word(new), **{k: v for k, v in report.items() if v})
        self._wake.set()
        return True

    # -- scheduling -----------------------------------------------------------------------

    async def _schedule_loop(self) -> None:
        while not self.stopping:
            self._wake = anyio.Event()
            self.metrics.scheduler_passes.inc()
            now = self.clock()
            assert self.runs is not None
            paused = self.runs.paused_jobs()
            for name, state in list(self.jobs.items()):
                if not state.removed and name not in paused and state.timer.due(now):
                    self._start(state, now)
            pending = [
                state.timer.next_due for name, state in self.jobs.items()
                if state.timer.next_due is not None and not state.timer.running and name not in paused
            ]  # fmt: skip
            delay = _IDLE_WAKE
            if pending:
                delay = min(delay, max(0.0, (min(pending) - self.clock()).total_seconds()))
            with anyio.move_on_after(delay):
                await self._wake.wait()

    def _job(self, name: str) -> JobState:
        """The configured job `name`: KeyError if unknown (or dropped)."""
        state = self.jobs.get(name)
        if state is None or state.removed:
            raise KeyError(name)
        return state

    def _triggerable(self, name: str) -> JobState:
        """The job a trigger asks for: KeyError if unknown (or dropped), RuntimeError while
        stopping, JobPaused while an operator has it paused."""
        assert self.runs is not None
        state = self._job(name)
        if self.stopping:
            raise RuntimeError("the daemon is stopping")
        pause = self.runs.paused_jobs().get(name)
        if pause is not None:
            raise JobPaused(pause)
        return state

    def trigger(self, name: str) -> TriggerResult:
        """Run `name` now, or once more right after its current run (coalesced); JobPaused
        while an operator has it paused."""
        assert self.runs is not None
        state = self._triggerable(name)
        now = self.clock()
        status = state.timer.trigger(now)
        if status == "coalesced":
            if state.queued is None:
                state.queued = self.runs.new(name, state.config.kind, "trigger", now)
            log.info("job.trigger_coalesced", job=name, run=state.queued.id, running=state.current.id if state.current else None)
            return TriggerResult("coalesced", state.queued)
        # A coalesced follow-up may already be queued and due, waiting for the scheduler's next
        # turn (its run just ended): start that one, rather than a new run beside it that would
        # leave it `queued` forever (and the callers it was promised to waiting for nothing).
        if state.queued is None:
            state.queued = self.runs.new(name, state.config.kind, "trigger", now)
        record = self._start(state, now)
        return TriggerResult("started", record)

    # -- pause, resume, cancel ------------------------------------------------------------

    def pause(self, name: str, by: str) -> tuple[Pause, bool]:
        """Hold `name`: its schedule does not fire and triggers are refused until `resume`; a
        run it has queued behind its current one ends unstarted (the current one goes on:
        `cancel` ends it). The pause, and whether it is new (False: it already was)."""
        assert self.runs is not None
        state = self._job(name)
        pause, new = self.runs.pause(name, by, self.clock())
        state.timer.pending_trigger = False
        if state.queued is not None:
            self._close_unstarted(state.queued, paused_before_start(by))
            state.queued = None
        self.metrics.job_paused(name, True)
        log.info("job.paused", job=name, by=by, since=pause.at.isoformat(), already=not new)
        return pause, new

    def resume(self, name: str, by: str) -> bool:
        """Lift the pause of `name`: due again from its next schedule time (the times it
        missed while paused give no run). False when it was not paused."""
        assert self.runs is not None
        state = self._job(name)
        now = self.clock()
        resumed = self.runs.resume(name, by, now)
        if resumed:
            state.timer.resume(now, self.rng)
            log.info("job.resumed", job=name, by=by)
        self.metrics.job_paused(name, False)
        self._wake.set()
        return resumed

    def cancel(self, name: str, by: str) -> RunRecord:
        """Cancel the job's current run (it ends `cancelled`, its reason naming `by`);
        NothingToCancel when it has none."""
        state = self._job(name)
        if state.current is None:
            raise NothingToCancel(name)
        self._cancel_here(state, by)
        return state.current

    def _cancel_here(self, state: JobState, by: str) -> None:
        """Cancel the run of `state` this process runs: its own cancel scope, once it has one
        (a run not yet in its task is cancelled as it enters it)."""
        if state.cancelled_by is None:
            state.cancelled_by = by
            log.warning("job.cancel_requested", job=state.config.name, run=state.current.id if state.current else None, by=by)
        if state.cancel_scope is not None:
            state.cancel_scope.cancel()

    @property
    def plans_dir(self) -> Path:
        """Where the page finds saved plans and saves the ones it asks for (`syncd.daemon.ui.plans`)."""
        return self.state_dir / "plans"

    async def plan_job(self, name: str) -> Path:
        """The plan mirror job `name` would apply now, saved in `plans_dir`; nothing is applied.
        Made under the locks of the files a run of the job writes, so never beside its run."""
        state = self._triggerable(name)
        job = state.config
        if not isinstance(job, MirrorJob):
            raise ValueError(f"job {name!r} is a {job.kind} job: only a mirror job makes a plan")
        async with self._files_locked(state_files(self.settings, job)):
            return await save_mirror_plan(self.settings, job, self.plans_dir, self.clock())

    def _start(self, state: JobState, now: datetime) -> RunRecord:
        assert self.runs is not None and self._runs_group is not None
        if state.queued is not None:
            record, state.queued = state.queued, None
        else:
            cause = "retry" if state.timer.consecutive_failures else "schedule"
            record = self.runs.new(state.config.name, state.config.kind, cause, now)
        state.timer.start(now)
        state.current = record
        self._runs_group.start_soon(self._run, state, record, name=f"job {state.config.name} run {record.id}")
        return record

    @contextlib.asynccontextmanager
    async def _files_locked(self, paths: list[Path | str]) -> AsyncIterator[None]:
        """Take the locks of what a run writes (`state_files`: files, or keys), in one order."""
        keys = sorted(str(path.resolve()) if isinstance(path, Path) else path for path in paths)
        async with contextlib.AsyncExitStack() as stack:
            for key in keys:
                await stack.enter_async_context(self._file_locks.setdefault(key, anyio.Lock()))
            yield

    async def _run(self, state: JobState, record: RunRecord) -> None:
        assert self.runs is not None
        settings, job = self.settings, state.config
        with anyio.CancelScope() as own:  # an operator's cancel (`cancel`) cancels this run alone
            state.cancel_scope = own
            if state.cancelled_by is not None:
                own.cancel()
            try:
                async with self._files_locked(state_files(settings, job)):
                    record.started_at, record.outcome = self.clock(), "running"
                    self.runs.save(record)
                    log.info("job.run_started", job=job.name, run=record.id, cause=record.cause)
                    self.metrics.run_started(job.name)
                    full = self._full_due(job, record.started_at)
                    with observing(self.metrics), reporting(lambda progress: setattr(record, "progress", progress)):
                        result = await execute_job(settings, job, self.metrics, full=full)
                    record.outcome, record.summary = result.outcome, result.summary
            except Exception as exc:  # noqa: BLE001 - a run's failure must never stop the daemon
                # An error raised while the run was being cancelled is the cancellation's doing.
                cancelling = own.cancel_called or (self._runs_group is not None and self._runs_group.cancel_scope.cancel_called)
                record.outcome, record.error = ("cancelled" if cancelling else "failed"), describe_error(exc)
                if isinstance(exc, RunFailed):
                    record.summary = exc.summary  # what it did before it failed (a commit made, its push failed)
                if own.cancel_called and state.cancelled_by is not None:
                    record.error = cancelled_by(state.cancelled_by)
            finally:
                # No await in here: this also runs while the run is being cancelled.
                if not record.finished:
                    record.outcome = "cancelled"
                    by = state.cancelled_by
                    record.error = record.error or (cancelled_by(by) if by else "cancelled: the daemon stopped before the run ended")
                if record.outcome == "cancelled" and not record.summary and record.progress:
                    record.summary = {"stopped_at": dict(record.progress)}  # where it was: kept with the run
                state.cancel_scope = state.cancelled_by = None
                self._finish(state, record)

    def _full_due(self, job: JobConfig, now: datetime) -> bool:
        """Whether this run reads everything: the job's last full read is `full_every` old."""
        assert self.runs is not None
        if not job.full_every:
            return False
        last = self.runs.last_full(job.name)
        return last is None or (now - last).total_seconds() >= job.full_every

    def _finish(self, state: JobState, record: RunRecord) -> None:
        assert self.runs is not None
        now = self.clock()
        record.ended_at = now
        self.runs.save(record)
        seconds = record.seconds or 0.0
        self.metrics.run_finished(record.job, record.outcome, seconds, now.timestamp(), record.explanation)
        log_run_end(record, seconds)
        state.timer.finish(now, ok=record.outcome in ("succeeded", "partial"), rng=self.rng)
        if record.outcome == "failed" and state.timer.next_due is not None:
            log.info("job.retry_scheduled", job=record.job, at=state.timer.next_due.isoformat(), failures=state.timer.consecutive_failures)
        state.current = None
        if state.removed:
            self.jobs.pop(record.job, None)
            self.metrics.forget_job(record.job)
        self._wake.set()

    # -- views for the control API --------------------------------------------------------

    def ready(self) -> tuple[bool, list[str]]:
        problems = []
        if self.stopping:
            problems.append("stopping")
        if self.runs is None:
            problems.append("not started")
        if not os.access(self.state_dir, os.W_OK):
            problems.append(f"state_dir {self.state_dir} is not writable")
        return not problems, problems

    def job_view(self, state: JobState) -> dict[str, Any]:
        """The job as `/jobs` shows it (`syncd.daemon.views.job_view`), with its pause."""
        assert self.runs is not None
        return paused_view(self._view(state), self.runs.paused_jobs().get(state.config.name))

    def jobs_view(self) -> list[dict[str, Any]]:
        """Every configured job as `job_view` shows it, by name; the pauses read once for all."""
        assert self.runs is not None
        paused = self.runs.paused_jobs()
        return [paused_view(self._view(state), paused.get(name)) for name, state in sorted(self.jobs.items()) if not state.removed]

    def _view(self, state: JobState) -> dict[str, Any]:
        assert self.runs is not None
        return job_view(state, self.runs, self.clock)

    @contextlib.asynccontextmanager
    async def _control_api(self) -> AsyncIterator[str]:
        from syncd.daemon.control import create_control_app

        config = self.settings.daemon
        async with listening(create_control_app(self), config.host, config.port, "control API") as (host, port):
            yield local_url(host, port)
