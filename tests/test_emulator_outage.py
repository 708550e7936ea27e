"""The emulator's simulated outage (`POST /_emulator/outage`): while down nothing answers
(new connections are refused, requests on kept-alive connections are hung up on), then the
same URL serves the same data again. Timeouts below are safety nets, not expectations: an
outage a test checks lasts a minute and the test ends it (`Listener.end_outage`) when its
checks are done, so no check races the clock."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import sys
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from yarl import URL

from syncd.api.client import TenantClient
from syncd.config import RetryConfig
from syncd.emulator.app import create_app
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.listener import LISTENER
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store

TOKEN = "outage-token"
SPEC = "orgs=2,collections=2,spaces=4,pages=2,files=1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SAFETY = 10.0
"""Seconds after which a wait is a failure."""
LONG = 60.0
"""Seconds of an outage the test ends itself: far longer than any check inside it."""


def _store() -> Store:
    store = Store(seed=5)
    generate(store, parse_spec(SPEC), seed=5, all_token=TOKEN)
    return store


@pytest.fixture
async def running() -> AsyncIterator[RunningEmulator]:
    async with serve_emulator(_store()) as emulator:
        yield emulator


async def wait_until(predicate: Callable[[], bool], what: str, timeout: float = SAFETY) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"still not {what} after {timeout:g}s")
        await asyncio.sleep(0.01)


async def get_json(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url, headers=AUTH) as resp:
        return resp.status, await resp.json(content_type=None)


async def answers(url: str) -> bool:
    """True if a fresh connection to `url` gets an HTTP answer."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url + "/_emulator/info") as resp:
            await resp.read()
            return True
    except aiohttp.ClientConnectionError:
        return False


async def wait_for(probe: Callable[[], Awaitable[object]], want: object, failure: str) -> None:
    """Poll `probe` until it gives `want`; fail with `failure` after SAFETY seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SAFETY
    while await probe() != want:
        if loop.time() > deadline:
            pytest.fail(f"{failure} after {SAFETY:g}s")
        await asyncio.sleep(0.02)


async def wait_answering(url: str, answering: bool) -> None:
    await wait_for(lambda: answers(url), answering, f"{url} still {'not ' if answering else ''}answering")


async def outages_over(url: str) -> int:
    """`outages` of the emulator's statistics; -1 while it does not answer."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url + "/_emulator/stats") as resp:
            return int((await resp.json())["outages"])
    except aiohttp.ClientConnectionError:
        return -1


async def wait_outages(url: str, count: int) -> None:
    await wait_for(lambda: outages_over(url), count, f"{url} did not report {count} outage(s) over")


async def post_outage(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with session.post(url + "/_emulator/outage", data=data, headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json(content_type=None)


async def test_outage_refuses_and_hangs_up_then_the_same_url_serves_the_same_data(running: RunningEmulator) -> None:
    url, listener = running.url, running.listener
    org_id = next(iter(running.store.orgs))
    async with aiohttp.ClientSession() as api, aiohttp.ClientSession() as admin:
        status, orgs_before = await get_json(api, url + "/v1/orgs")
        assert status == 200 and orgs_before["items"]
        status, dump_before = await get_json(admin, f"{url}/_emulator/orgs/{org_id}/dump")
        assert status == 200

        status, answer = await post_outage(admin, url, {"seconds": LONG})
        assert (status, answer) == (202, {"down_for": LONG})
        await wait_until(lambda: listener.down, "down")

        # A new connection is refused: nothing listens.
        async with aiohttp.ClientSession() as fresh:
            with pytest.raises(aiohttp.ClientConnectorError):
                await get_json(fresh, url + "/v1/orgs")
        # Kept-alive connections (an API one and an admin one) are hung up on without an answer.
        with pytest.raises(aiohttp.ClientConnectionError):
            await get_json(api, url + "/v1/orgs")
        with pytest.raises(aiohttp.ClientConnectionError):
            await get_json(admin, url + "/_emulator/stats")
        assert listener.down and listener.dropped >= 2

        listener.end_outage()
        await wait_until(lambda: not listener.down, "back")
        await wait_answering(url, True)
        status, orgs_after = await get_json(api, url + "/v1/orgs")
        assert status == 200 and orgs_after == orgs_before
        status, dump_after = await get_json(admin, f"{url}/_emulator/orgs/{org_id}/dump")
        assert status == 200 and dump_after == dump_before
    assert listener.port == URL(url).port and listener.url == url
    assert not listener.busy and listener.outages == 1


async def test_outage_awaited_directly_comes_back_on_the_same_port(running: RunningEmulator) -> None:
    listener = running.listener
    port = listener.port
    await listener.outage(0.2)
    assert not listener.down and not listener.busy and listener.port == port
    assert await answers(running.url)


@pytest.mark.parametrize(
    "body",
    [{}, {"seconds": 0}, {"seconds": -1}, {"seconds": 3601}, {"seconds": "1"}, {"seconds": True}, {"seconds": None}, [1], b"not json"],
)
async def test_invalid_bodies_are_400_and_change_nothing(running: RunningEmulator, body: Any) -> None:
    async with aiohttp.ClientSession() as session:
        status, data = await post_outage(session, running.url, body)
        assert status == 400 and data["error"]["code"] == 400
        assert "seconds" in data["error"]["message"] or "body" in data["error"]["message"]
        assert not running.listener.busy and not running.listener.down
        status, _ = await get_json(session, running.url + "/v1/orgs")
        assert status == 200


async def test_outage_while_one_is_pending_is_409(running: RunningEmulator) -> None:
    running.listener.schedule_outage(1.0, delay=SAFETY * 6)  # pending for the whole test
    async with aiohttp.ClientSession() as session:
        status, data = await post_outage(session, running.url, {"seconds": 1})
    assert status == 409 and "already" in data["error"]["message"]
    assert not running.listener.down


async def test_app_not_served_through_serve_app_is_409() -> None:
    app = create_app(_store())
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        assert LISTENER not in app
        status, data = await post_outage(session, str(server.make_url("")).rstrip("/"), {"seconds": 1})
    assert status == 409 and "serve_app" in data["error"]["message"]


async def test_leaving_serve_emulator_during_an_outage_cancels_it_quietly() -> None:
    loop = asyncio.get_running_loop()
    problems: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: problems.append(context))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with serve_emulator(_store()) as emulator, aiohttp.ClientSession() as session:
                url, listener = emulator.url, emulator.listener
                status, _ = await post_outage(session, url, {"seconds": 60})
                assert status == 202
                await wait_until(lambda: listener.down, "down")
                task = listener._task
            # Left while down: no exception, the restart task is finished, nothing listens.
            assert task is not None and task.cancelled()
            assert not listener.busy
            assert not [t for t in asyncio.all_tasks() if t.get_name() == "emulator-outage"]
            assert not await answers(url)
            with pytest.raises(RuntimeError):
                listener.schedule_outage(1.0)
            gc.collect()
            await asyncio.sleep(0)
        assert not [w for w in caught if not issubclass(w.category, DeprecationWarning)], [str(w.message) for w in caught]
    finally:
        loop.set_exception_handler(previous)
    assert problems == []


async def test_tenant_client_retries_through_the_outage(running: RunningEmulator) -> None:
    retry = RetryConfig(max_attempts=15, initial_wait=0.2, max_wait=1.0)
    async with TenantClient("t", running.url, "org1-token", retry=retry) as client, aiohttp.ClientSession() as admin:
        before = await client.get_json("/v1/orgs")  # leaves a kept-alive connection in the pool
        assert len(before["items"]) == 1  # org1-token sees its own organization only
        status, _ = await post_outage(admin, running.url, {"seconds": LONG})
        assert status == 202
        await wait_until(lambda: running.listener.down, "down")
        call = asyncio.create_task(client.get_json("/v1/orgs"))
        await wait_until(lambda: client.stats.retries >= 2 or call.done(), "retrying")  # two failed attempts, then back
        running.listener.end_outage()
        after = await call
    assert after == before
    stats = client.stats
    assert stats.transport_errors >= 1 and stats.retries == stats.transport_errors
    assert set(stats.responses) == {200} and stats.malformed == 0 and stats.rate_limited == 0


async def test_cli_emulator_serve_has_the_outage_route() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "syncd.cli", "emulator", "serve", "--port", "0", "--json", "--token", TOKEN,
        "--rate-limit", "0", "--generate", "orgs=1,collections=1,spaces=2,pages=1", "--seed", "2",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        report = json.loads(await asyncio.wait_for(proc.stdout.readline(), SAFETY * 3))
        url = report["url"]
        async with aiohttp.ClientSession() as session:
            status, before = await get_json(session, url + "/v1/orgs")
            assert status == 200
            status, _ = await post_outage(session, url, {"seconds": LONG})
            assert status == 202
        await wait_answering(url, False)
        proc.send_signal(signal.SIGUSR1)  # ends the outage early
        await wait_outages(url, 1)
        async with aiohttp.ClientSession() as session:
            status, after = await get_json(session, url + "/v1/orgs")
        assert status == 200 and after == before
    finally:
        if proc.returncode is None:
            proc.terminate()
        code = await asyncio.wait_for(proc.wait(), SAFETY)
    assert code == 0
