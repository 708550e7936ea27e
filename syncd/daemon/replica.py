"""`syncd serve` as one replica of a fleet that shares a PostgreSQL (`state_url`, issue 13).

What changes against one daemon (`Daemon`), and nothing else does (control API, metrics,
signals, reloads, the jobs themselves):

- **Run history** is the fleet's (`FleetRunLog`): `/runs` and `/jobs` show every replica's runs,
  each naming the replica that ran it.
- **Scheduling**: each pass, the replica offers every job's due slot (`syncd.daemon.slots`: the
  same slot on every replica, made one run by the database), then claims due runs of jobs it
  is not running, with a lease (`FleetRunLog.claim`: `FOR UPDATE SKIP LOCKED`, one lease per
  job, so a job never runs twice at once, on any replica).
- **Triggers** queue a run for whichever replica is free (one waiting trigger per job); the
  replica asked looks at once, the others at their next poll (`fleet.poll`).
- **Leases**: a running run's lease is renewed every third of `fleet.lease`; a replica that
  cannot renew it (another took the run over: this one stalled or lost the database) cancels
  the run at once. Every write of the run checks the lease first (`syncd.pg.fencing`: in the
  transaction that journals its intent, and right before the request), so a replica that
  wakes up after losing its run sends nothing more; that run ends `cancelled`, "lost the
  lease", and its row is left to the replica that took it over (or takes it over: its lease
  has ended). Taking a run over ends the previous holder's sessions on the server, so the
  tenants' locks it held go at once. A replica killed with SIGKILL stops renewing: when its
  lease ends, another replica takes the run over (attempt + 1) and runs the job again; the
  job's own state (the write side's journal) settles what the dead one had started.
- **Pause and cancel** hold for the fleet: a pause is a row of `fleet_job_pauses` that every
  replica reads at each pass (no slot is offered or claimed for the job; triggers are refused;
  a resume's time is where its slots start again), and a cancel sent to any replica marks the
  running run's row (`cancel_requested`); its holder reads the mark at its next pass
  (`fleet.poll`) and cancels the run's own scope, as one daemon does. Why a mark and a poll, not
  LISTEN/NOTIFY: the replicas already ask the database every pass, a mark outlives a holder
  that dies (the replica that takes the run over cancels it), and no connection has to stay
  listening (and be watched and reopened) beside the short ones.
- **Failures** delay the job's next slot by the same backoff one daemon uses, read from the
  fleet's history, so every replica waits alike; a failure also moves the job's queued slots
  behind it, and while one slot waits out a backoff, the slots falling due meanwhile collapse
  into it (one retry, as one daemon makes, not a queue of them).

The database calls are short and synchronous (psycopg); the loop runs them in a worker thread.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from datetime import datetime, timedelta
from typing import Any

import anyio

from syncd.config import Settings
from syncd.daemon.fleet_runs import FleetRunLog, FleetRunRecord
from syncd.daemon.pauses import NothingToCancel
from syncd.daemon.run_end import log_run_end
from syncd.daemon.run_history import RunRecord, iso_utc
from syncd.daemon.schedule import failure_backoff
from syncd.daemon.service import Daemon, JobState, TriggerResult, log
from syncd.daemon.slots import due_slot, next_slot, not_before
from syncd.pg.connect import display_url
from syncd.pg.fencing import RunFence, fencing

__all__ = ["FleetDaemon", "daemon_for", "default_replica"]

_FAILURES_READ = 20


def default_replica() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"[:100]


def daemon_for(settings: Settings, **options: Any) -> Daemon:
    """One daemon on SQLite, or a fleet replica when `state_url` is set."""
    return FleetDaemon(settings, **options) if settings.state_url is not None else Daemon(settings, **options)


class FleetDaemon(Daemon):
    """A replica: `await FleetDaemon(settings).serve()`; see the module docstring."""

    runs: FleetRunLog | None  # type: ignore[assignment]

    def __init__(self, settings: Settings, **options: Any) -> None:
        super().__init__(settings, **options)
        assert settings.state_url is not None
        self.url_of_state = settings.state_url.get_secret_value()
        self.replica = settings.fleet.replica or default_replica()
        self._fences: dict[int, RunFence] = {}

    @property
    def lease(self) -> float:
        return self.settings.fleet.lease

    # -- lifecycle ----------------------------------------------------------------------------

    def _open_runs(self) -> FleetRunLog:
        return FleetRunLog(self.url_of_state, self.replica)

    def _joined(self, url: str) -> None:
        assert self.runs is not None
        self.runs.register_replica(self.replica, socket.gethostname(), os.getpid(), url, self.lease)
        log.info("fleet.joined", replica=self.replica, state=display_url(self.url_of_state), lease=self.lease)

    def _leaving(self) -> None:
        assert self.runs is not None
        try:
            self.runs.retire_replica(self.replica)
        except Exception as exc:  # noqa: BLE001 - the lease ends by itself; the stop goes on
            log.warning("fleet.retire_failed", replica=self.replica, error=str(exc))

    # -- scheduling ---------------------------------------------------------------------------

    async def _schedule_loop(self) -> None:
        async with anyio.create_task_group() as beating:
            beating.start_soon(self._beat_replica)
            while not self.stopping:
                self._wake = anyio.Event()
                self.metrics.scheduler_passes.inc()
                paused = await anyio.to_thread.run_sync(self._paused_jobs)
                await self._cancel_asked()
                await anyio.to_thread.run_sync(self._offer_due_slots, paused)
                await self._claim_runs(paused)
                with anyio.move_on_after(self.settings.fleet.poll):
                    await self._wake.wait()
            beating.cancel_scope.cancel()

    async def _beat_replica(self) -> None:
        assert self.runs is not None
        while True:
            await anyio.sleep(self.lease / 3)
            if not await anyio.to_thread.run_sync(self.runs.heartbeat_replica, self.replica, self.lease):
                log.error("fleet.replica_lost", replica=self.replica, detail="another process holds this replica's name")

    def _failures(self, job: str) -> tuple[int, datetime | None]:
        """The job's consecutive failures (newest first) and when the latest one ended."""
        assert self.runs is not None
        count, last = 0, None
        for record in self.runs.of_job(job, _FAILURES_READ):
            if not record.finished or record.outcome == "cancelled":
                continue
            if record.outcome != "failed":
                break
            count += 1
            last = last or record.ended_at
        return count, last

    def _paused_jobs(self) -> set[str]:
        """The jobs paused anywhere in the fleet (their gauge set to match)."""
        assert self.runs is not None
        paused = set(self.runs.paused_jobs())
        for name in self.jobs:
            self.metrics.job_paused(name, name in paused)
        return paused

    async def _cancel_asked(self) -> None:
        """Cancel the runs held here that an operator asked any replica to cancel."""
        assert self.runs is not None
        asked = await anyio.to_thread.run_sync(self.runs.cancels_asked, self.replica)
        for state in self.jobs.values():
            if state.current is not None and state.current.id in asked:
                self._cancel_here(state, asked[state.current.id])

    def _offer_due_slots(self, paused: set[str]) -> None:
        assert self.runs is not None
        now = self.clock()
        for name, state in list(self.jobs.items()):
            schedule = state.config.schedule
            if schedule is None or state.removed or name in paused:
                continue
            slot = due_slot(schedule, self.runs.slots_after(name), now, self.started_at)
            if slot is None:
                continue
            # Missed intervals give one run, not a burst: while a slot of the job waits for a
            # replica (the job still runs, or it is a failure's retry), later slots collapse into it.
            if self.runs.waiting_slot(name):
                continue
            failures, last_failure = self._failures(name)
            start = not_before(name, schedule, slot, failures, last_failure, self.settings.daemon.failure_backoff)
            offered = self.runs.offer_scheduled(name, state.config.kind, slot, start, reason="retry" if failures else "schedule")
            if offered is not None:
                log.info("fleet.slot_offered", job=name, run=offered.id, slot=slot.isoformat(), not_before=start.isoformat())

    async def _claim_runs(self, paused: set[str]) -> None:
        """Start every due run this replica can take now (jobs it is not running, not paused)."""
        assert self.runs is not None and self._runs_group is not None
        limit = self.settings.fleet.max_runs
        while not self.stopping:
            free = [name for name, state in self.jobs.items() if not state.removed and state.current is None and name not in paused]
            busy = sum(state.current is not None for state in self.jobs.values())
            if not free or (limit is not None and busy >= limit):  # full: the others take what is due
                return
            asked = time.monotonic()
            # A claim commits a running run leased to this replica: once asked, the run is
            # started or ended here, whatever the stop cancels meanwhile (shielded: a stop that
            # lands while the claim is in its thread would otherwise leave the run `running`).
            with anyio.CancelScope(shield=True):
                record = await anyio.to_thread.run_sync(self.runs.claim, self.replica, self.lease, free)
                if record is None:
                    return
                state = self.jobs.get(record.job)
                if state is None or state.removed or self.stopping:  # dropped or stopping meanwhile: give it back ended
                    record.outcome, record.error = "cancelled", f"replica {self.replica} claimed it while stopping or dropping the job"
                    await anyio.to_thread.run_sync(self.runs.finish, record)
                    continue
            if record.takeover:
                log.warning("fleet.run_taken_over", job=record.job, run=record.id, attempt=record.attempt, previous=record.taken_from)
            state.current = record
            fence = RunFence.leased(record.id, self.replica, record.attempt, self.lease, asked)
            self._fences[record.id] = fence
            self._runs_group.start_soon(functools.partial(self._run, state, record, fence), name=f"job {record.job} run {record.id}")

    def trigger(self, name: str) -> TriggerResult:
        assert self.runs is not None
        state = self._triggerable(name)
        offered = self.runs.offer_trigger(name, state.config.kind)
        # Another run of the job running makes this one its follow-up; the offered run itself may
        # already be running (this replica's scheduler claims in a worker thread meanwhile).
        running = any(r.outcome == "running" and r.id != offered.run.id for r in self.runs.of_job(name, 5))
        self._wake.set()
        return TriggerResult("coalesced" if running or not offered.new else "started", offered.run)

    def cancel(self, name: str, by: str) -> RunRecord:
        """Mark the job's running run, on whichever replica holds it, for cancelling: cancelled
        here at once when this replica holds it, else by its holder at its next pass."""
        assert self.runs is not None
        state = self._job(name)
        record = self.runs.request_cancel(name, by)
        if record is None:
            raise NothingToCancel(name)
        if state.current is not None and state.current.id == record.id:
            self._cancel_here(state, by)
            return state.current
        log.info("fleet.cancel_requested", job=name, run=record.id, holder=record.replica, by=by)
        return record

    # -- one run ------------------------------------------------------------------------------

    async def _run(self, state: JobState, record: RunRecord, fence: RunFence | None = None) -> None:
        """The run as one daemon runs it, its writes fenced by its lease (`syncd.pg.fencing`), the
        lease renewed beside it; a renewal refused (the run was taken over) cancels it at once."""
        assert isinstance(record, FleetRunRecord)
        if fence is None:
            fence = self._fences.setdefault(record.id, RunFence.leased(record.id, self.replica, record.attempt, self.lease, time.monotonic()))
        async with anyio.create_task_group() as group:
            with anyio.CancelScope() as run_scope, fencing(fence):

                async def renew() -> None:
                    assert self.runs is not None
                    while True:
                        await anyio.sleep(self.lease / 3)
                        asked = time.monotonic()
                        held = await anyio.to_thread.run_sync(self.runs.heartbeat, record.id, self.replica, self.lease, record.attempt)
                        if held:
                            fence.renewed(asked)
                            continue
                        log.error("fleet.lease_lost", job=record.job, run=record.id, detail="taken over by another replica: stopping it here")
                        fence.lose("another replica took the run over")
                        run_scope.cancel()
                        return

                group.start_soon(renew)
                await super()._run(state, record)
            group.cancel_scope.cancel()

    def _finish(self, state: JobState, record: RunRecord) -> None:
        assert self.runs is not None
        if record.ended_at is None:
            record.ended_at = self.clock()
        fence = self._fences.pop(record.id, None)
        lost = fence is not None and fence.lost is not None
        if not lost and not self.runs.finish(record):  # fenced: another replica holds the run now
            lost = True
            if fence is not None:
                fence.lose("another replica took the run over")
        if lost:
            # Whatever the run met on the way out (a refused write, its sessions ended by the
            # new holder), it ended because its lease did: the row is the new holder's, or
            # waits for one (its lease has ended), and is not written here.
            record.outcome = "cancelled"
            record.error = fence.lost if fence is not None else "this replica lost the run's lease (another replica took it over)"
            log.warning("fleet.run_lost", job=record.job, run=record.id, detail="the run is left to the replica that takes it over")
        elif record.outcome == "failed":
            self._back_off(record.job)
        seconds = record.seconds or 0.0
        self.metrics.run_finished(record.job, record.outcome, seconds, record.ended_at.timestamp(), record.explanation)
        log_run_end(record, seconds, replica=self.replica)
        state.current = None
        if state.removed:
            self.jobs.pop(record.job, None)
            self.metrics.forget_job(record.job)
        self._wake.set()

    def _back_off(self, job: str) -> None:
        """Hold the job's queued slots back by the backoff of its failures, as one daemon waits
        before a retry: slots that fell due while the failed run ran were offered before it
        failed, and would otherwise start at once, one failed retry after another."""
        assert self.runs is not None
        failures, last_failure = self._failures(job)
        if failures and last_failure is not None:
            backoff = failure_backoff(failures, self.settings.daemon.failure_backoff)
            self.runs.delay_scheduled(job, last_failure + timedelta(seconds=backoff))

    # -- views --------------------------------------------------------------------------------

    def _view(self, state: JobState) -> dict[str, Any]:
        """The job across the fleet: the run it has running or queued on any replica."""
        assert self.runs is not None
        view = super()._view(state)
        recent = self.runs.of_job(state.config.name, 10)
        running = next((r for r in recent if r.outcome == "running"), None)
        queued = next((r for r in recent if r.outcome == "queued"), None)
        failures, last_failure = self._failures(state.config.name)
        view.update(
            state="running" if running else "due" if queued else "idle",
            current_run=running.id if running else None,
            current_replica=getattr(running, "replica", None) if running else None,
            queued_run=queued.id if queued else None,
            next_run_at=None if running else iso_utc(self._next_start(state, queued is not None, failures, last_failure)),
            consecutive_failures=failures,
        )
        return view

    def _next_start(self, state: JobState, queued: bool, failures: int, last_failure: datetime | None) -> datetime | None:
        """When the job runs next anywhere in the fleet: its queued run's start, else its next
        slot's (with the slot's jitter and the backoff of its failures); None: on trigger only."""
        assert self.runs is not None
        name, schedule = state.config.name, state.config.schedule
        if queued:
            return self.runs.next_start(name)
        if schedule is None:
            return None
        slot = next_slot(schedule, self.runs.slots_after(name), self.clock(), self.started_at)
        return not_before(name, schedule, slot, failures, last_failure, self.settings.daemon.failure_backoff)
