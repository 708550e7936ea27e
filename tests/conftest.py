"""Shared fixtures: a real emulator on a loopback port and a client that talks to it."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from syncd.emulator.generate import Generated, generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from tests.coverage_pause import coverage_tracer_off, is_property_test
from tests.cpu_stress import OPTION, Burners, burner_count
from tests.pg_support import pg_server, pg_url  # noqa: F401  (fixtures: a real PostgreSQL, never skipped)
from tests.state_support import backend, other_state, state  # noqa: F401  (fixtures: a SQLite state file, then a PostgreSQL state)

# Hypothesis: few examples by default, no per-example deadline (a loaded machine must not fail a
# property); `HYPOTHESIS_PROFILE=slow` draws many more, and larger organizations (tests/strategies.py).
hypothesis_settings.register_profile("default", max_examples=50, deadline=None)
hypothesis_settings.register_profile(
    "slow", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ALL_TOKEN = "test-token"
SMALL = "orgs=2,collections=4,spaces=8,pages=5,files=2,sites=2,sections=3,members=4,teams=2,comments=2,change_requests=1"


# The CPU-stress harness (tests/cpu_stress.py): `pytest --stress-cpu=N` runs the session with N
# burner processes spinning beside it; `bench/stress_runs.py` runs the suite so, K times in a row.
_BURNERS = pytest.StashKey[Burners]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, metavar="N", default=None,
                     help="keep N CPU burner processes spinning for the whole session (default 0)")


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line, file=sys.__stderr__, flush=True)


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists, to say that the load is on
def pytest_configure(config: pytest.Config) -> None:
    try:
        count = burner_count(config.getoption(OPTION))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if count and not hasattr(config, "workerinput"):  # the load is the session's: xdist workers start none
        burners = config.stash[_BURNERS] = Burners.start(count)
        _say(config, burners.started_line())


def pytest_unconfigure(config: pytest.Config) -> None:
    """Runs however the session ends (passed, failed, Ctrl-C): the burners stop with it."""
    burners = config.stash.get(_BURNERS, None)
    if burners is not None:
        del config.stash[_BURNERS]
        _say(config, burners.stopped_line(burners.stop()))


LONG_LANES = 2
"""Workers whose queues start with the `long` tests (tests/conftest.py `placed_in_lanes`)."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker a core, and one more: the `long` tests spend most of their minutes
    waiting on schedules and child processes, and the extra worker keeps the cores busy
    meanwhile. (Two more cost a tenth more CPU, module fixtures set up on more workers, and
    were no faster: the suite is bound by the two cores.)"""
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `long` tests (a minute or more) are shared between `LONG_LANES` workers, each lane's
    at the front of that worker's queue, so that no worker runs them all one after another:
    that chain (six minutes) was the suite's wall time. The ones that mostly wait (on schedules
    and child processes) share the first lane, the busy ones the others: two waiting tests side
    by side left a core idle for two minutes. The others fill in around them, and steal from the
    ends of queues when theirs run out."""
    long = sorted((item for item in items if item.get_closest_marker("long")), key=_expected_seconds, reverse=True)
    rest = [item for item in items if not item.get_closest_marker("long")]  # keep their order
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items[:] = placed_in_lanes(long, rest, workers, min(LONG_LANES, workers - 1), _expected_seconds, _busy)


def _expected_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("long")
    return float(marker.kwargs.get("seconds", 60)) if marker is not None else 0.0


def _busy(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("long")
    return bool(marker is not None and marker.kwargs.get("busy", False))


def placed_in_lanes(
    long: list[Any], rest: list[Any], workers: int, lanes: int, seconds: Callable[[Any], float],
    busy: Callable[[Any], bool] = lambda item: False,
) -> list[Any]:  # fmt: skip
    """`long` spread over `lanes` chains, chain k at the front of worker k's share, with `rest`
    around them in its order: the tests that wait all in the first chain, the `busy` ones
    (longest first) each to the chain of the others that ends soonest (the first, with one
    lane). xdist's worksteal hands the workers contiguous shares of the collection: worker i
    takes `remaining // (workers - i)` from the front. Where that leaves no room, the long
    tests simply go first."""
    if lanes < 1 or not long:
        return long + rest
    chains: list[list[Any]] = [[] for _ in range(lanes)]
    ends = [0.0] * lanes
    for item in long:
        k = 0 if not busy(item) or lanes == 1 else min(range(1, lanes), key=ends.__getitem__)
        chains[k].append(item)
        ends[k] += seconds(item)
    remaining, placed, rest_left = len(long) + len(rest), [], iter(rest)
    for i in range(workers):
        share = remaining // (workers - i)
        remaining -= share
        chain = chains[i] if i < lanes else []
        if len(chain) > share:
            return long + rest
        placed.extend(chain)
        placed.extend(itertools.islice(rest_left, share - len(chain)))
    return placed


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    """A property test's body runs without coverage's tracer (tests/coverage_pause.py says why)."""
    if not is_property_test(item):
        return (yield)
    with coverage_tracer_off():
        return (yield)


class Api:
    """A thin test client: `await api.get("/v1/orgs")` -> (status, parsed JSON or None)."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str | None) -> None:
        self.session, self.base, self.token = session, base, token

    def as_token(self, token: str | None) -> "Api":
        return Api(self.session, self.base, token)

    async def call(self, method: str, path: str, json: Any = None, **params: Any) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        query = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items() if v is not None}
        url = path if path.startswith("http") else self.base + path
        async with self.session.request(method, url, json=json, params=query, headers=headers) as resp:
            raw = await resp.read()
            self.last_headers = resp.headers
            if not raw:
                return resp.status, None
            try:
                return resp.status, await resp.json(content_type=None)
            except ValueError:
                return resp.status, raw.decode(errors="replace")

    async def get(self, path: str, **params: Any) -> tuple[int, Any]:
        return await self.call("GET", path, **params)

    async def post(self, path: str, json: Any = None, **params: Any) -> tuple[int, Any]:
        return await self.call("POST", path, json=json, **params)

    async def put(self, path: str, json: Any = None, **params: Any) -> tuple[int, Any]:
        return await self.call("PUT", path, json=json, **params)

    async def patch(self, path: str, json: Any = None, **params: Any) -> tuple[int, Any]:
        return await self.call("PATCH", path, json=json, **params)

    async def delete(self, path: str, **params: Any) -> tuple[int, Any]:
        return await self.call("DELETE", path, **params)

    async def all_items(self, path: str, limit: int = 1000, **params: Any) -> list[Any]:
        """Every item of a list, following `next.page`."""
        items: list[Any] = []
        page = None
        while True:
            status, data = await self.get(path, limit=limit, page=page, **params)
            assert status == 200, (path, status, data)
            items.extend(data["items"])
            page = (data.get("next") or {}).get("page")
            if not page:
                return items


@pytest.fixture
def emulator_profile() -> str:
    """The emulator's behaviour where the spec is silent (`syncd.emulator.profile`), for fixtures
    that take it (`copy_support.blank`); a test parametrizes it to run against more than one."""
    return "default"


@pytest.fixture
async def emulator() -> AsyncIterator[RunningEmulator]:
    """A generated two-organization emulator with no rate limit and no faults."""
    store = Store(seed=7)
    generated = generate(store, parse_spec(SMALL), seed=7, all_token=ALL_TOKEN)
    async with serve_emulator(store) as running:
        running.generated = generated
        yield running


@pytest.fixture
async def api(emulator: RunningEmulator) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, emulator.url, ALL_TOKEN)


@pytest.fixture
def generated(emulator: RunningEmulator) -> Generated:
    return emulator.generated


@pytest.fixture
def org_id(generated: Generated) -> str:
    return generated.org_ids[0]
