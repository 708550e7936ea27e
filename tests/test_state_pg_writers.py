"""Writers of the PostgreSQL state a fleet shares (issue 13): one process at a time per TENANT,
waited for a bounded time (`syncd.state.pg_writers`). Replicas write different tenants side by
side; a second writer of a tenant waits for the first; a dead writer's run is failed by the next
writer of ITS tenant only; a wait ends in one line naming the holder; waits never close a
circle; a crawl waits off the event loop and can be cancelled while it waits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from syncd.api import TenantClient
from syncd.config import TargetRef
from syncd.copy import copy_org
from syncd.emulator.canonical import dump_org
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.read.crawl import Crawler
from syncd.read.crawl_stats import CrawlResult
from syncd.state import StateStore, StateBusyError, Row, content_hash
from tests.conftest import ALL_TOKEN
from tests.copy_support import settings_for
from tests.oracle import copied_view
from tests.state_support import count_rows

DEADLINE = 60.0  # generous: every wait below ends on an event long before this


def space(tenant: str, id: str, title: str) -> Row:
    data = {"id": id, "title": title}
    return Row(tenant, "space", id, "o1", "org", "o1", 0, "/v1/orgs/o1/spaces", None, data, content_hash(data))


def stage(mirror: StateStore, run: int, tenant: str, titles: dict[str, str]) -> None:
    """What a crawl of `tenant` reads: its spaces (one listing, read cleanly)."""
    mirror.stage(run, [space(tenant, id, title) for id, title in titles.items()])
    mirror.record_listing(run, tenant, "/v1/orgs/o1/spaces", True)


def titles(mirror: StateStore, tenant: str) -> dict[str, str]:
    return {row["id"]: row["data"]["title"] for row in mirror.current(tenant, kind="space")}


def status(mirror: StateStore, run: int) -> str:
    info = mirror.run(run)
    assert info is not None
    return str(info["status"])


@pytest.fixture
def seeded(pg_url: str) -> str:
    """The state with one finished run of tenants A and B each."""
    with StateStore(pg_url) as mirror:
        for tenant in ("A", "B"):
            run = mirror.start_run("sync", tenant, tenant)
            stage(mirror, run, tenant, {"s1": f"{tenant} one", "s2": f"{tenant} two"})
            mirror.finish_run(run)
    return pg_url


def test_two_replicas_write_two_tenants_at_the_same_time(seeded: str) -> None:
    with StateStore(seeded, lock_wait=0) as one, StateStore(seeded, lock_wait=0) as two:  # never waits
        run_a = one.start_run("sync", "A", "A")
        stage(one, run_a, "A", {"s1": "A one, renamed"})
        run_b = two.start_run("sync", "B", "B")  # A's run is open in another process
        assert status(one, run_a) == "running" and count_rows(seeded, "staged", "run = ?", [run_a]) == 1
        with ThreadPoolExecutor(2) as pool:  # both write and merge at once
            merges = [
                pool.submit(lambda: one.finish_run(run_a)),
                pool.submit(lambda: (stage(two, run_b, "B", {"s2": "B two", "s3": "B three"}), two.finish_run(run_b))[1]),
            ]
            summary_a, summary_b = (merge.result(DEADLINE) for merge in merges)
        assert summary_a.to_dict() == {"space": {"updated": 1, "deleted": 1}}
        assert summary_b.to_dict() == {"space": {"created": 1, "deleted": 1}}
    with StateStore(seeded) as mirror:
        assert titles(mirror, "A") == {"s1": "A one, renamed"}
        assert titles(mirror, "B") == {"s2": "B two", "s3": "B three"}
        assert status(mirror, run_a) == status(mirror, run_b) == "complete"


def test_a_second_writer_of_a_tenant_waits_for_the_first_then_goes_on(seeded: str) -> None:
    with StateStore(seeded) as first, StateStore(seeded, lock_wait=DEADLINE) as second:
        run1 = first.start_run("sync", "A", "A")
        stage(first, run1, "A", {"s1": "A one, first"})
        waiting, outcome = threading.Event(), {}

        def later() -> None:
            try:
                outcome["run"] = second.start_run("sync", "A", "A", on_wait=waiting.set)
            except BaseException as exc:  # noqa: BLE001  (reported by the assertions below)
                outcome["error"] = exc

        thread = threading.Thread(target=later)
        thread.start()
        try:
            assert waiting.wait(DEADLINE), outcome
            assert outcome == {}  # still waiting: the first run holds tenant A
            assert titles(second, "A") == {"s1": "A one", "s2": "A two"}  # the waiting StateStore still answers
            first.finish_run(run1)
        finally:
            thread.join(DEADLINE)
        run2 = outcome.get("run")
        assert run2 is not None, outcome
        assert status(first, run1) == "complete"  # the run waited for was not taken for dead
        stage(second, run2, "A", {"s1": "A one, second", "s3": "A three"})
        assert second.finish_run(run2).to_dict() == {"space": {"created": 1, "updated": 1}}  # after the first's merge
        assert titles(second, "A") == {"s1": "A one, second", "s3": "A three"}
        assert titles(second, "B") == {"s1": "B one", "s2": "B two"}


WRITER = """
import sys
from syncd.state import StateStore, Row, content_hash
data = {"id": "s9", "title": "never current"}
m = StateStore(sys.argv[1])
run = m.start_run("sync", "A", "A")
m.stage(run, [Row("A", "space", "s9", "o1", "org", "o1", 0, "/v1/orgs/o1/spaces", None, data, content_hash(data))])
m.record_listing(run, "A", "/v1/orgs/o1/spaces", True)
print(run, flush=True)
sys.stdin.read()  # writes on until killed
"""


@pytest.fixture
def killed_writer(seeded: str) -> Iterator[Callable[[], int]]:
    """Start a process writing a run of A, kill it (SIGKILL) mid-run; returns its run."""
    started: list[subprocess.Popen[str]] = []

    def run_and_kill() -> int:
        process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), seeded],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        process.kill()
        _, errors = process.communicate(timeout=DEADLINE)
        assert line.strip().isdigit(), errors
        return int(line)

    yield run_and_kill
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)


def test_a_killed_writer_is_recovered_by_the_next_writer_of_its_tenant_only(seeded: str, killed_writer: Callable[[], int]) -> None:
    with StateStore(seeded) as live:
        run_b = live.start_run("sync", "B", "B")
        stage(live, run_b, "B", {"s1": "B one, live"})
        dead = killed_writer()
        with StateStore(seeded, lock_wait=DEADLINE) as next_a:  # the server may take a moment to see the death
            assert status(next_a, dead) == "running"
            run_a = next_a.start_run("sync", "A", "A")
            info = next_a.run(dead)
            assert info is not None and info["status"] == "failed" and "ended before it finished" in info["reason"]
            assert count_rows(seeded, "staged", "run = ?", [dead]) == 0
            assert status(next_a, run_b) == "running" and count_rows(seeded, "staged", "run = ?", [run_b]) == 1
            assert next_a.recover() == [] and status(next_a, run_b) == "running"  # B's writer is alive
            stage(next_a, run_a, "A", {"s1": "A one", "s2": "A two"})
            assert not next_a.finish_run(run_a)
        live.finish_run(run_b)
        assert titles(live, "A") == {"s1": "A one", "s2": "A two"}  # the dead run's row never became current
        assert titles(live, "B") == {"s1": "B one, live"}
        assert status(live, run_b) == "complete"


def test_the_wait_ends_in_one_line_naming_the_holder(seeded: str) -> None:
    with StateStore(seeded) as first, StateStore(seeded, lock_wait=0.2) as second:
        run = first.start_run("sync", "A", "A")
        tries: list[None] = []
        with pytest.raises(StateBusyError) as caught:
            second.start_run("sync", "A", "A", on_wait=lambda: tries.append(None))
        message = str(caught.value)
        assert tries and "\n" not in message
        assert message.startswith("tenant 'A' of the PostgreSQL state at ")
        assert "being written by another syncd process" in message and "waited 0.2 s" in message
        assert f"server pid {first.db.conn.info.backend_pid}, syncd mirror pid " in message
        assert f"its run {run}: sync, pid " in message
        assert status(first, run) == "running"
        other = second.start_run("sync", "B", "B")  # nothing of A is left held by the failed wait
        second.abandon_run(other)
        first.abandon_run(run)


def test_writers_of_several_tenants_never_wait_for_each_other_in_a_circle(seeded: str) -> None:
    with StateStore(seeded, lock_wait=DEADLINE) as one, StateStore(seeded, lock_wait=DEADLINE) as two:
        low, high = one._writer.in_order(["A", "B"])  # the order every process takes locks in
        run_high = one.start_run("sync", high, high)
        run_low = two.start_run("sync", low, low)
        waiting, outcome = threading.Event(), {}

        def up() -> None:  # waiting up the order is allowed
            try:
                outcome["run"] = two.start_run("sync", high, high, on_wait=waiting.set)
            except BaseException as exc:  # noqa: BLE001
                outcome["error"] = exc

        thread = threading.Thread(target=up)
        thread.start()
        try:
            assert waiting.wait(DEADLINE), outcome
            with pytest.raises(StateBusyError, match=f"this process writes tenant '{high}' and cannot wait for it"):
                one.start_run("sync", low, low)  # down the order: at once, or the two would wait for each other
            one.abandon_run(run_high)
        finally:
            thread.join(DEADLINE)
        assert "run" in outcome, outcome
        two.abandon_run(outcome["run"])
        two.abandon_run(run_low)


def test_holding_several_tenants_in_any_order_takes_turns(seeded: str) -> None:
    with StateStore(seeded, lock_wait=DEADLINE) as one, StateStore(seeded, lock_wait=DEADLINE) as two:
        one.hold(["A", "B"])
        waiting, outcome = threading.Event(), {}

        def hold() -> None:
            try:
                two.hold(["B", "A"], on_wait=waiting.set)
                outcome["held"] = True
            except BaseException as exc:  # noqa: BLE001
                outcome["error"] = exc

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            assert waiting.wait(DEADLINE), outcome
            run = one.start_run("sync", "B", "B")  # held: no wait, whatever `two` does
            one.abandon_run(run)
            one.unhold(["B", "A"])
        finally:
            thread.join(DEADLINE)
        assert outcome == {"held": True}
        one.lock_wait = 0
        for tenant in ("A", "B"):
            with pytest.raises(StateBusyError):
                one.start_run("sync", tenant, tenant)
        two.unhold(["A", "B"])
        one.abandon_run(one.start_run("sync", "A", "A"))


class Watched(StateStore):
    """A StateStore that says when a run it opens is waiting for another writer, and how
    `start_run` ended when it raised."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting = threading.Event()
        self.raised: BaseException | None = None

    def start_run(self, job: str, tenant: str, scope_ref: str, *, on_wait: Callable[[], object] | None = None) -> int:
        def said() -> None:
            self.waiting.set()
            if on_wait is not None:
                on_wait()

        try:
            return super().start_run(job, tenant, scope_ref, on_wait=said)
        except BaseException as exc:
            self.raised = exc
            raise


async def crawl_into(running: RunningEmulator, mirror: StateStore) -> CrawlResult:
    async with TenantClient("src", running.url, ALL_TOKEN, concurrency=4) as client:
        return await Crawler(client, mirror, "src", workers=4).crawl(running.generated.org_ids[0])


async def test_crawls_of_one_tenant_wait_for_each_other_off_the_event_loop(emulator: RunningEmulator, pg_url: str) -> None:
    with StateStore(pg_url) as blocker, Watched(pg_url, lock_wait=DEADLINE) as first, Watched(pg_url, lock_wait=DEADLINE) as second:
        held = blocker.start_run("sync", "src", "src")
        results: dict[str, CrawlResult] = {}

        async def crawl(name: str, mirror: StateStore) -> None:
            results[name] = await crawl_into(emulator, mirror)

        async with anyio.create_task_group() as tg:
            tg.start_soon(crawl, "first", first)
            tg.start_soon(crawl, "second", second)
            for mirror in (first, second):  # both wait; this task (and the emulator) still runs
                assert await anyio.to_thread.run_sync(mirror.waiting.wait, DEADLINE)
            blocker.abandon_run(held)
        assert {name: result.status for name, result in results.items()} == {"first": "complete", "second": "complete"}
        assert results["first"].run != results["second"].run
        assert status(blocker, held) == "cancelled"


async def test_a_crawl_waiting_for_its_tenant_is_cancelled(emulator: RunningEmulator, pg_url: str) -> None:
    with StateStore(pg_url) as blocker, Watched(pg_url, lock_wait=DEADLINE) as waiter:
        held = blocker.start_run("sync", "src", "src")
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(crawl_into, emulator, waiter)
                assert await anyio.to_thread.run_sync(waiter.waiting.wait, DEADLINE)
                scope.cancel()
        assert scope.cancelled_caught
        assert isinstance(waiter.raised, anyio.get_cancelled_exc_class())  # the wait itself ended, not ran out
        assert [run["id"] for run in blocker.runs("src")] == [held] and status(blocker, held) == "running"
        blocker.abandon_run(held)


COPY_SPEC = "orgs=2,empty_orgs=2,collections=3,spaces=5,pages=2,files=1,sites=1,sections=2,members=1,teams=1,saml=0,openapi=1,translations=1,custom_fields=1,comments=0,change_requests=0,integrations=0"


async def test_copies_between_two_tenants_in_opposite_directions_both_finish(pg_url: str, tmp_path: Path) -> None:
    """Each copy reads both tenants into one StateStore at once: it holds both writer locks, taken
    in the one order, so the two copies take turns instead of each holding one and failing."""
    store = Store(seed=5)
    orgs = generate(store, parse_spec(COPY_SPEC), seed=5, all_token=ALL_TOKEN).org_ids
    async with serve_emulator(store) as running:
        settings = settings_for(running.url, tmp_path / "state", src=ALL_TOKEN, dst=ALL_TOKEN)
        reports: dict[str, Any] = {}

        async def copy(name: str, source: TargetRef, target: TargetRef) -> None:
            reports[name] = await copy_org(settings, source, target, db=pg_url)

        async with anyio.create_task_group() as tg:
            tg.start_soon(copy, "there", TargetRef("src", orgs[0]), TargetRef("dst", orgs[2]))
            tg.start_soon(copy, "back", TargetRef("dst", orgs[1]), TargetRef("src", orgs[3]))
        for org, copied in ((0, 2), (1, 3)):
            assert copied_view(dump_org(store, orgs[copied])) == copied_view(dump_org(store, orgs[org]))
    assert reports["there"].equal and reports["back"].equal
    with StateStore(pg_url) as mirror:
        assert {run["status"] for run in mirror.runs()} == {"complete"}
