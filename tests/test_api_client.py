"""The API client against the emulator over loopback: errors, retries, pacing, limits, redirects.

Counts, never timings: the emulator's statistics and the client's own say what happened. Where
time matters (Retry-After) the client's retry sleep moves the emulator's clock instead of
waiting; the few tiny servers left play what the emulator cannot (each says what).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
from importlib.metadata import version
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anyio
import pytest
from aiohttp import web

from syncd.api import (
    ApiError,
    AuthError,
    MalformedResponse,
    NotFound,
    Pacer,
    RateLimited,
    ServerError,
    TenantClient,
    TransportError,
    make_global_limiter,
    parse_rate_headers,
)
from syncd.api.answers import AnswerBudget, allocation_bound
from syncd.api.inflight import DEFAULT_START
from syncd.api.telemetry import observing
from syncd.config import RetryConfig, Settings
from syncd.emulator.server import serve_app
from syncd.errors import SyncdError
from syncd.logging import configure_logging, redact_text
from syncd.pg.budget import SharedBudget
from tests.conftest import ALL_TOKEN

MiB = 1024 * 1024
FAST = RetryConfig(max_attempts=8, initial_wait=0.001, max_wait=0.01)
ONCE = RetryConfig(max_attempts=1, initial_wait=0.001, max_wait=0.001)
"""No retry: the first attempt's error is the one raised."""
SAFETY = 30.0
"""Seconds after which waiting for the emulator's statistics is a failure."""


def client(emulator: Any, token: str = ALL_TOKEN, **options: Any) -> TenantClient:
    options.setdefault("retry", FAST)
    return TenantClient("src", emulator.url, token, **options)


async def admin(emulator: Any, method: str, path: str, body: Any = None) -> Any:
    """Call an `/_emulator` admin route (no auth)."""
    async with aiohttp.ClientSession() as session:
        async with session.request(method, emulator.url + "/_emulator" + path, json=body) as resp:
            assert resp.status < 300, await resp.text()
            return await resp.json() if resp.status != 204 else None


def route_count(stats: dict[str, Any], method: str, route: str) -> dict[str, int]:
    """Requests the emulator saw for one route, by status."""
    return {r["status"]: r["count"] for r in stats["routes"] if r["method"] == method and r["route"] == route}


async def stats_when(emulator: Any, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The emulator's statistics once `check` holds for them (answers it is still delaying
    count once they are done)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SAFETY
    while not check(stats := await admin(emulator, "GET", "/stats")):
        if loop.time() > deadline:
            pytest.fail(f"the emulator's statistics never got there: {stats['routes']}")
        await asyncio.sleep(0.02)
    return stats


def emulator_time(emulator: Any, waits: list[float]) -> Callable[[float], Awaitable[None]]:
    """A retry sleep that records each wait and moves the emulator's clock on by it (rate-limit
    buckets refill) instead of waiting: Retry-After is honoured, or not, in no real time."""

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await admin(emulator, "POST", "/clock", {"advance_seconds": seconds})

    return sleep


class Heard:
    """An observer of clients (`syncd.api.telemetry`) that keeps what it hears, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.links: list[tuple[str, int, float | None]] = []

    def on_response(self, tenant: str, method: str, status: int | str, remaining: int | None) -> None:
        self.calls.append(("response", tenant, method, status, remaining))

    def on_retry(self, tenant: str) -> None:
        self.calls.append(("retry", tenant))

    def on_link(self, tenant: str, inflight_limit: int, rtt_seconds: float | None) -> None:
        self.links.append((tenant, inflight_limit, rtt_seconds))


async def no_sleep(seconds: float) -> None:
    """A client's retry sleep that takes no time."""


def serve(app: web.Application) -> contextlib.AbstractAsyncContextManager[str]:
    """A tiny aiohttp server on a free loopback port, for answers the emulator never gives."""
    return serve_app(app)


def app_with(*routes: tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]) -> web.Application:
    app = web.Application()
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    return app


# ----------------------------------------------------------------------------- errors


async def test_bad_token_is_an_auth_error_that_never_shows_the_token(emulator: Any) -> None:
    token = "wrong-secret-token-4711"
    async with client(emulator, token) as api:
        with pytest.raises(AuthError) as caught:
            await api.get_json("/v1/orgs")
    error = caught.value
    assert isinstance(error, ApiError) and isinstance(error, SyncdError)
    assert (error.status, error.code, error.method, error.path) == (401, 401, "GET", "/v1/orgs")
    assert "invalid API token" in str(error) and "token" in error.hint()
    assert error.may_have_applied is False and error.attempts == 1
    for text in (str(error), repr(error), repr(api), str(error.args)):
        assert token not in text
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "GET", "/v1/orgs") == {"401": 1}  # an auth error is not retried


async def test_not_found_and_other_client_errors_are_typed_and_not_retried(emulator: Any, org_id: str) -> None:
    async with client(emulator) as api:
        with pytest.raises(NotFound) as caught:
            await api.get_json("/v1/orgs/no-such-org", params={"verbose": True})
        assert caught.value.status == 404 and caught.value.path == "/v1/orgs/no-such-org"
        assert "no-such-org" in caught.value.message and "verbose" not in str(caught.value)
        with pytest.raises(ApiError) as bad:
            await api.request("GET", f"/v1/orgs/{org_id}/collections", params={"limit": 5000})
        assert bad.value.status == 400 and "limit" in bad.value.message
        assert type(bad.value) is ApiError and bad.value.may_have_applied is False
        assert api.stats.retries == 0 and api.stats.responses == {404: 1, 400: 1}


async def test_reads_survive_5xx_html_drops_and_truncated_bodies(emulator: Any, org_id: str) -> None:
    paths = ["/v1/orgs", f"/v1/orgs/{org_id}", f"/v1/orgs/{org_id}/collections", f"/v1/orgs/{org_id}/members"]
    retry = RetryConfig(max_attempts=25, initial_wait=0.001, max_wait=0.005)
    async with client(emulator, retry=retry) as api:
        expected = {path: await api.get_json(path) for path in paths}
        await admin(emulator, "PUT", "/faults", {"5xx": 0.3, "html502": 0.05, "drop": 0.1, "truncate": 0.1})
        got: list[tuple[str, Any]] = []
        jobs = iter(itertools.islice(itertools.cycle(paths), 240))

        async def worker() -> None:
            for path in jobs:
                got.append((path, await api.get_json(path)))

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(worker)
    assert len(got) == 240
    assert all(data == expected[path] for path, data in got)
    assert api.stats.retries > 0 and api.stats.transport_errors > 0 and api.stats.malformed > 0
    assert api.stats.responses[500] + api.stats.responses[503] > 0 and api.stats.responses[502] > 0
    by_status = (await admin(emulator, "GET", "/stats"))["by_status"]
    assert by_status["dropped"] > 0 and by_status["truncated"] > 0 and by_status["fault-502"] > 0


@pytest.mark.parametrize(
    ("fault", "error", "counted", "said"),
    [
        ("lost", TransportError, "lost-answer", "may have taken effect"),  # connection cut after the write
        ("truncate_write", MalformedResponse, "truncated", ""),  # half an answer after the write
    ],
)
async def test_a_post_whose_answer_is_lost_is_not_retried_and_may_have_applied(
    emulator: Any, org_id: str, fault: str, error: type[Exception], counted: str, said: str
) -> None:
    route = "/v1/orgs/{organizationId}/collections"
    async with client(emulator) as api:
        await admin(emulator, "PUT", "/faults", {fault: 1.0})
        with pytest.raises(error) as caught:
            await api.request("POST", f"/v1/orgs/{org_id}/collections", json={"title": "Once only"})
        await admin(emulator, "PUT", "/faults", {"reset": True})
        titles = [c["title"] async for page in api.paginate(f"/v1/orgs/{org_id}/collections") for c in page]
    assert caught.value.may_have_applied is True and caught.value.attempts == 1  # type: ignore[attr-defined]
    assert said in str(caught.value)
    assert route_count(await admin(emulator, "GET", "/stats"), "POST", route) == {counted: 1}
    assert titles.count("Once only") == 1  # it did take effect: the write side must reconcile


async def test_a_post_answered_5xx_is_not_retried_but_idempotent_writes_are(emulator: Any, org_id: str) -> None:
    async with client(emulator, retry=RetryConfig(max_attempts=25, initial_wait=0.001, max_wait=0.005)) as api:
        collection = (await api.request("POST", f"/v1/orgs/{org_id}/collections", json={"title": "Before"})).data
        await admin(emulator, "PUT", "/faults", {"5xx": 1.0})
        with pytest.raises(ServerError) as caught:
            await api.request("POST", f"/v1/orgs/{org_id}/collections", json={"title": "Never"})
        assert caught.value.may_have_applied is True and caught.value.attempts == 1
        with pytest.raises(ServerError) as also:
            await api.request("PATCH", f"/v1/collections/{collection['id']}", json={"title": "X"}, idempotent=False)
        assert also.value.attempts == 1
        await admin(emulator, "PUT", "/faults", {"reset": True, "5xx": 0.3, "lost": 0.3})
        for n in range(10):
            answer = await api.request("PATCH", f"/v1/collections/{collection['id']}", json={"title": f"After {n}"})
            assert answer.status == 200 and answer.data["title"] == f"After {n}"
        assert api.stats.retries > 0
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "POST", "/v1/orgs/{organizationId}/collections") == {"201": 1, "fault-5xx": 1}


async def test_a_post_that_never_left_is_retried(unused_tcp_port: int) -> None:
    retry = RetryConfig(max_attempts=3, initial_wait=0.001, max_wait=0.005)
    async with TenantClient("src", f"http://127.0.0.1:{unused_tcp_port}", ALL_TOKEN, retry=retry) as api:
        with pytest.raises(TransportError) as caught:
            await api.request("POST", "/v1/orgs/x/collections", json={"title": "t"})
    assert caught.value.may_have_applied is False and caught.value.sent is False
    assert caught.value.attempts == 3 and "gave up after 3 attempts" in str(caught.value)


async def test_timeouts_retry_reads_and_flag_writes(emulator: Any, org_id: str) -> None:
    # Every answer 1 s late, the client waits 0.1 s: both timers run in this one event loop,
    # so the client's always fires first, however slow the machine.
    await admin(emulator, "PUT", "/faults", {"latency": 1000})
    retry = RetryConfig(max_attempts=2, initial_wait=0.001, max_wait=0.005)
    async with client(emulator, retry=retry, timeout=0.1) as api:
        with pytest.raises(TransportError) as read:
            await api.get_json(f"/v1/orgs/{org_id}")
        with pytest.raises(TransportError) as write:
            await api.request("POST", f"/v1/orgs/{org_id}/collections", json={"title": "Too late"})
    assert read.value.message == "timed out: no complete answer within 0.1s (request_timeout)"  # nothing after: no detail
    assert "timed out" in str(read.value) and read.value.may_have_applied is False and read.value.attempts == 2
    assert write.value.may_have_applied is True and write.value.attempts == 1
    # The emulator saw each call (counted once its latency was over): two GETs, one POST.
    create = "/v1/orgs/{organizationId}/collections"
    stats = await stats_when(emulator, lambda stats: sum(route_count(stats, "POST", create).values()) >= 1)
    assert route_count(stats, "GET", "/v1/orgs/{organizationId}") == {"200": 2}
    assert sum(route_count(stats, "POST", create).values()) == 1, stats["routes"]


# ----------------------------------------------------------------------------- rate limits


async def test_a_post_answered_429_is_retried_after_retry_after(emulator: Any, org_id: str) -> None:
    # One request per 100 s: real time refills nothing during the test, the retry sleep moves
    # the emulator's clock on by what it waits.
    await admin(emulator, "PUT", "/rate-limit", {"rate": 0.01, "burst": 1})
    waits: list[float] = []
    retry = RetryConfig(max_attempts=4, initial_wait=0.001, max_wait=1000)
    async with client(emulator, retry=retry, pace=False, sleep=emulator_time(emulator, waits)) as api:
        await api.get_json(f"/v1/orgs/{org_id}")  # spends the only token
        created = await api.request("POST", f"/v1/orgs/{org_id}/collections", json={"title": "After 429"})
    assert created.status == 201
    # Retry-After (100 s, less the real time since the GET) was honoured: one 429, one long
    # wait, then success; a retry after the bare backoff (1 ms) would have been refused again.
    assert api.stats.rate_limited == 1 and api.stats.retries == 1
    assert len(waits) == 1 and waits[0] >= 50, waits
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "POST", "/v1/orgs/{organizationId}/collections") == {"429": 1, "201": 1}


def scripted(*answers: web.Response) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A handler that gives `answers` in order, then an empty page every time after."""
    queue = list(answers)

    async def handler(request: web.Request) -> web.Response:
        return queue.pop(0) if queue else web.json_response({"items": [], "next": None})

    return handler


async def get_with_recorded_waits(handler: Callable[[web.Request], Awaitable[web.Response]], retry: RetryConfig, token: str) -> tuple[TenantClient, list[float]]:
    """GET /v1/orgs of a tiny server through a client whose retry sleeps only record their
    wait (no real time passes); it must end in an empty page."""
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    async with serve(app_with(("GET", "/v1/orgs", handler))) as url:
        async with TenantClient("t", url, token, retry=retry, pace=False, sleep=record) as api:
            assert await api.get_json("/v1/orgs") == {"items": [], "next": None}
    return api, waits


async def test_a_503_with_retry_after_waits_at_least_that() -> None:
    # The emulator's injected 5xx carries no hint; a tiny server answers the first call 503
    # with `Retry-After: 100`, then 200.
    down = web.json_response({"error": {"code": 503, "message": "down for maintenance"}}, status=503, headers={"Retry-After": "100"})
    api, waits = await get_with_recorded_waits(scripted(down), RetryConfig(max_attempts=3, initial_wait=0.001, max_wait=1000), "tok-retry-after")
    assert api.stats.retries == 1 and api.stats.rate_limited == 0
    assert len(waits) == 1 and 100 <= waits[0] <= 120, waits  # the hint (jittered up to 1.2x), not 1 ms


async def test_a_429_without_retry_after_waits_until_the_reset_header_and_counts_each() -> None:
    # Two 429s that give only `X-RateLimit-Reset` (an epoch second 50 s ahead), then a 200: each
    # retry waits until the reset, not the 1 ms the backoff starts at, and both are counted.
    def limited() -> web.Response:
        reset = int(time.time()) + 50
        return web.json_response({"error": {"code": 429, "message": "slow down"}}, status=429, headers={"X-RateLimit-Reset": str(reset)})

    api, waits = await get_with_recorded_waits(scripted(limited(), limited()), RetryConfig(max_attempts=4, initial_wait=0.001, max_wait=1000), "tok-reset")
    assert api.stats.rate_limited == 2 and api.stats.retries == 2
    assert len(waits) == 2 and all(40 <= wait <= 61 for wait in waits), waits  # ~50 s (jittered up to 1.2x)


async def test_error_bodies_not_in_the_documented_shape_are_told_as_they_came() -> None:
    """A proxy's text, an empty body and a text body over the 1 MiB an error may take: the error
    says what came (the text's start, `HTTP 404 with an empty body`, the start and the cut)."""

    async def text(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such thing here, says the proxy")

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=404)

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=400, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            await response.write(b"refused, and then " + b"x" * (2 * 1024 * 1024))
        return response

    found: dict[str, ApiError] = {}
    async with serve(app_with(("GET", "/text", text), ("GET", "/empty", empty), ("GET", "/huge", huge))) as url:
        async with TenantClient("t", url, "tok-bodies", retry=FAST, pace=False) as api:
            for path in ("/text", "/empty", "/huge"):
                with pytest.raises(ApiError) as caught:
                    await api.get_json(path)
                found[path] = caught.value
    assert found["/text"].status == 404 and "no such thing here, says the proxy" in found["/text"].message
    assert found["/empty"].message == "HTTP 404 with an empty body"
    cut = found["/huge"]
    assert cut.status == 400 and cut.message.startswith("refused, and then xxx"), cut.message[:100]
    assert cut.message.endswith("... [error body over 1 MiB: cut]"), cut.message[-100:]  # the start kept, then the marker
    assert api.stats.too_large == 0 and api.stats.rate_limited == 0


async def test_the_observer_hears_each_attempt_and_each_retry_by_tenant() -> None:
    """What the daemon's metrics count (syncd.api.telemetry): a 503, the retry, then the 200,
    and an attempt that got no answer, each under the client's tenant name."""
    heard = Heard()
    answers = [web.json_response({"error": {"code": 503, "message": "busy"}}, status=503)]

    async def flaky(request: web.Request) -> web.Response:
        return answers.pop() if answers else web.json_response({"items": []}, headers={"X-RateLimit-Remaining": "7"})

    async with serve(app_with(("GET", "/v1/orgs", flaky))) as url:
        with observing(heard):
            async with TenantClient("observed", url, "tok-observed", retry=FAST, pace=False, sleep=no_sleep) as api:
                await api.get_json("/v1/orgs")
    assert heard.calls == [("response", "observed", "GET", 503, None), ("retry", "observed"), ("response", "observed", "GET", 200, 7)]
    # The in-flight limit after each attempt: the 503 halved the first window, the 200 measured a round trip.
    assert [(tenant, limit) for tenant, limit, _ in heard.links] == [("observed", DEFAULT_START // 2)] * 2
    assert heard.links[0][2] is None and (heard.links[1][2] or 0) > 0


async def test_backoff_doubles_from_the_initial_wait_up_to_the_maximum() -> None:
    async def down(request: web.Request) -> web.Response:
        return web.json_response({"error": {"code": 503, "message": "down"}}, status=503)

    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    retry = RetryConfig(max_attempts=6, initial_wait=1.0, max_wait=10.0)
    async with serve(app_with(("GET", "/v1/orgs", down))) as url:
        async with TenantClient("t", url, "tok-backoff", retry=retry, pace=False, sleep=record) as api:
            with pytest.raises(ServerError):
                await api.get_json("/v1/orgs")
    # Jittered between half and all of 1, 2, 4, 8, then 16 clamped to 10 s.
    bounds = [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (5.0, 10.0)]
    assert len(waits) == 5 and all(low <= wait <= high for wait, (low, high) in zip(waits, bounds, strict=True)), waits


async def test_a_connection_reset_after_sending_is_told_and_may_have_applied_a_write() -> None:
    """A connection the server resets once the request is in: `connection failed`, with the
    error's type and text; a POST may have been applied, a GET is just failed."""

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with TenantClient("t", f"http://127.0.0.1:{port}", "tok-reset", retry=ONCE, pace=False) as api:
            with pytest.raises(TransportError) as read:
                await api.get_json("/v1/orgs")
            with pytest.raises(TransportError) as write:
                await api.request("POST", "/v1/orgs/x/collections", json={"title": "t"})
    finally:
        server.close()
        await server.wait_closed()
    for caught in (read, write):
        assert caught.value.message.startswith("connection failed: ClientOSError: ") and "reset" in caught.value.message.lower(), caught.value.message
        assert caught.value.sent is True
    assert read.value.may_have_applied is False and write.value.may_have_applied is True
    assert api.stats.transport_errors == 2


async def test_retry_after_wins_over_the_reset_header_and_a_past_reset_waits_nothing() -> None:
    now = int(time.time())
    answers = {
        "/v1/both": [web.json_response({}, status=429, headers={"Retry-After": "100", "X-RateLimit-Reset": str(now + 5)})],
        "/v1/past": [web.json_response({}, status=429, headers={"X-RateLimit-Reset": str(now - 3600)})],
    }

    async def limited(request: web.Request) -> web.Response:
        waiting = answers[request.path]
        return waiting.pop() if waiting else web.json_response({"items": []})

    waits: dict[str, list[float]] = {"/v1/both": [], "/v1/past": []}
    current = ["/v1/both"]

    async def record(seconds: float) -> None:
        waits[current[0]].append(seconds)

    retry = RetryConfig(max_attempts=3, initial_wait=0.001, max_wait=1000)
    async with serve(app_with(("GET", "/v1/both", limited), ("GET", "/v1/past", limited))) as url:
        async with TenantClient("t", url, "tok-hints", retry=retry, pace=False, sleep=record) as api:
            for path in ("/v1/both", "/v1/past"):
                current[0] = path
                assert await api.get_json(path) == {"items": []}
    assert len(waits["/v1/both"]) == 1 and 100 <= waits["/v1/both"][0] <= 120, waits  # Retry-After, not the reset
    assert len(waits["/v1/past"]) == 1 and waits["/v1/past"][0] <= 0.001, waits  # the backoff alone


async def test_which_error_answers_mean_a_write_may_have_applied() -> None:
    """A 5xx to a write may have come after the write was done; a 4xx refused it; a read
    changes nothing either way. Every error names the client's tenant."""

    async def status_of(request: web.Request) -> web.Response:
        return web.json_response({"error": {"code": 0, "message": "no"}}, status=int(request.match_info["status"]))

    seen: dict[tuple[str, int], ApiError] = {}
    async with serve(app_with(("*", "/v1/status/{status}", status_of))) as url:
        async with TenantClient("tenant-x", url, "tok-status", retry=ONCE, pace=False) as api:
            for method in ("GET", "POST"):
                for status in (400, 499, 500, 502):
                    with pytest.raises(ApiError) as caught:
                        await api.request(method, f"/v1/status/{status}", json={} if method == "POST" else None)
                    seen[method, status] = caught.value
    assert {key: error.may_have_applied for key, error in seen.items()} == {
        ("GET", 400): False, ("GET", 499): False, ("GET", 500): False, ("GET", 502): False,
        ("POST", 400): False, ("POST", 499): False, ("POST", 500): True, ("POST", 502): True,
    }  # fmt: skip
    assert {error.tenant for error in seen.values()} == {"tenant-x"}


async def test_aiohttp_never_resends_a_write_on_its_own_when_the_connection_drops() -> None:
    """A PUT that creates (teams) whose connection drops unanswered may have been applied:
    syncd alone decides whether to send it again. aiohttp by default re-sends an idempotent
    request once on a new connection, unseen (no retry counted, a second team made)."""
    seen: list[bytes] = []

    async def drop_the_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b" ", 1)[0])
        if len(seen) == 1:
            writer.close()  # the request is in; the answer is lost
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(drop_the_first, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with TenantClient("t", f"http://127.0.0.1:{port}", "tok-drop", retry=ONCE, pace=False) as api:
            with pytest.raises(TransportError) as caught:
                await api.request("PUT", "/v1/orgs/x/teams/t", json={"title": "t"})
    finally:
        server.close()
        await server.wait_closed()
    assert seen == [b"PUT"], seen  # sent once: no hidden second PUT
    assert caught.value.sent is True and caught.value.may_have_applied is True
    assert api.stats.retries == 0


async def test_a_body_cut_short_and_a_connection_closed_unanswered_are_told_apart() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"items\": [")
        await writer.drain()
        writer.close()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    errors: list[TransportError] = []
    for handler in (cut, silent):
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            async with TenantClient("t", f"http://127.0.0.1:{port}", "tok-cut", retry=ONCE, pace=False) as api:
                with pytest.raises(TransportError) as caught:
                    await api.get_json("/v1/orgs")
                errors.append(caught.value)
        finally:
            server.close()
            await server.wait_closed()
    assert errors[0].message.startswith("answer cut short (Response payload is not completed") and errors[0].message.endswith(")"), errors[0].message
    assert errors[1].message == "connection dropped before the answer", errors[1].message


async def test_pacing_keeps_sequential_calls_under_a_tiny_limit(emulator: Any, org_id: str) -> None:
    await admin(emulator, "PUT", "/rate-limit", {"rate": 2, "burst": 1})
    async with client(emulator) as api:
        for _ in range(3):
            await api.get_json(f"/v1/orgs/{org_id}")
    assert api.stats.rate_limited == 0 and api.stats.requests == 3
    assert (await admin(emulator, "GET", "/stats"))["by_status"] == {"200": 3}


async def test_pacing_keeps_a_concurrent_crawl_at_the_limit_under_one_percent_429(emulator: Any, org_id: str) -> None:
    await admin(emulator, "PUT", "/rate-limit", {"rate": 50, "burst": 10})
    await admin(emulator, "DELETE", "/stats")
    paths = itertools.cycle([f"/v1/orgs/{org_id}", f"/v1/orgs/{org_id}/collections", "/v1/orgs"])
    jobs = iter(itertools.islice(paths, 250))
    async with client(emulator, concurrency=8) as api:

        async def worker() -> None:
            for path in jobs:
                await api.get_json(path)

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(worker)
    by_status = (await admin(emulator, "GET", "/stats"))["by_status"]
    served = sum(by_status.values())
    assert by_status["200"] == 250
    assert by_status.get("429", 0) < 0.01 * served
    assert api.stats.rate_limited == by_status.get("429", 0)
    assert api.stats.paced_waits > 0 and api.stats.server_rate is not None
    # The measured refill rate is about the real one (50/s): it measures 49-51 with both
    # cores loaded four times over; the bounds leave half of it either way.
    assert 25 < api.stats.server_rate < 75


def test_rate_headers_are_read_leniently() -> None:
    info = parse_rate_headers(
        {"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "1700000005", "Retry-After": "2"},
        wall_now=1_700_000_000.0,
    )
    assert (info.limit, info.remaining, info.reset, info.retry_after) == (10, 3, 1_700_000_005.0, 2.0)
    date = "Wed, 21 Oct 2015 07:28:00 GMT"  # = 1445412480 epoch seconds
    delta = parse_rate_headers({"X-RateLimit-Reset": "30", "Retry-After": date}, wall_now=1_445_412_475.0)
    assert delta.reset == 1_445_412_505.0 and delta.retry_after == 5.0
    assert parse_rate_headers({"X-RateLimit-Remaining": "many", "Retry-After": "soon"}) == parse_rate_headers({})


# ----------------------------------------------------------------------------- limits


async def test_tenant_and_global_limiters_bound_requests_in_flight() -> None:
    # A tiny server: the emulator does not count the requests it has in flight.
    state = {"now": 0, "peak": 0}

    async def busy(request: web.Request) -> web.Response:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return web.json_response({"ok": True})

    async def crawl(api: TenantClient, n: int) -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(api.get_json, "/v1/busy")

    async with serve(app_with(("GET", "/v1/busy", busy))) as url:
        async with TenantClient("a", url, "tok-123456", concurrency=3) as api:
            await crawl(api, 30)
        assert state["peak"] == 3
        state["peak"] = 0
        shared = make_global_limiter(Settings(concurrency=5))
        async with (
            TenantClient("a", url, "tok-123456", concurrency=4, global_limiter=shared) as a,
            TenantClient("b", url, "tok-654321", concurrency=4, global_limiter=shared) as b,
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(crawl, a, 30)
                tg.start_soon(crawl, b, 30)
        assert state["peak"] == 5


# ----------------------------------------------------------------------------- urls, settings, redirects


async def test_base_url_ending_in_v1_and_query_values(emulator: Any, org_id: str) -> None:
    async with TenantClient("src", emulator.url + "/v1/", ALL_TOKEN) as api:
        orgs = await api.get_json("/v1/orgs")
        nested = await api.get_json(f"/v1/orgs/{org_id}/collections", params={"nested": False, "page": None})
    assert {o["id"] for o in orgs["items"]} >= {org_id}
    assert isinstance(nested["items"], list)


async def test_absolute_urls_to_another_origin_are_refused(emulator: Any) -> None:
    async with client(emulator) as api:
        same = await api.get_json(emulator.url + "/v1/orgs")
        assert same["items"]
        with pytest.raises(ApiError, match="another origin"):
            await api.get_json("http://example.invalid/v1/orgs")
        with pytest.raises(ApiError, match="another origin") as secure:
            await api.get_json("https://example.invalid/v1/orgs")
    assert (secure.value.method, secure.value.path, secure.value.tenant) == ("GET", "/v1/orgs", api.name)
    assert api.stats.requests == 1


async def test_from_settings_uses_the_tenant_configuration(emulator: Any, org_id: str) -> None:
    settings = Settings.model_validate(
        {
            "tenants": {"SRC": {"base_url": emulator.url, "token": ALL_TOKEN, "concurrency": 3}},
            "request_timeout": "5s",
            "retry": {"max_attempts": 2, "initial_wait": 0.01, "max_wait": 0.02},
        }
    )
    async with TenantClient.from_settings(settings, "src", make_global_limiter(settings)) as api:
        assert (api.name, api.concurrency, api.timeout, api.retry.max_attempts) == ("src", 3, 5.0, 2)
        assert (await api.get_json(f"/v1/orgs/{org_id}"))["id"] == org_id
    with pytest.raises(RuntimeError, match="closed"):
        await api.get_json("/v1/orgs")


async def test_clients_from_one_settings_share_its_answer_budget_and_limiter() -> None:
    settings = Settings.model_validate(
        {"tenants": {"a": {"base_url": "http://127.0.0.1:9", "token": "tok-a"}, "b": {"base_url": "http://127.0.0.1:9", "token": "tok-b"}},
         "answer_budget": "200MiB", "max_answer_bytes": "8MiB"}
    )  # fmt: skip
    limiter = make_global_limiter(settings)
    a, b = TenantClient.from_settings(settings, "a", limiter), TenantClient.from_settings(settings, "b", limiter)
    try:
        assert a.answer_budget is b.answer_budget and a.answer_budget.limit == 200 * 1024 * 1024
        assert a._global_limiter is limiter and b._global_limiter is limiter
        assert a._owned_budget is None and a.pacer.shared is None  # no PostgreSQL state: each paces alone
    finally:
        await a.aclose()
        await b.aclose()


async def test_with_a_postgresql_state_a_client_paces_through_the_tokens_shared_budget(pg_url: str) -> None:
    settings = Settings.model_validate({"tenants": {"a": {"base_url": "http://127.0.0.1:9", "token": "tok-a"}}, "state_url": pg_url})
    client = TenantClient.from_settings(settings, "a")
    try:
        assert client._owned_budget is not None and client.pacer.shared is client._owned_budget
    finally:
        await client.aclose()
    given = Pacer(enabled=True)
    with_pacer = TenantClient.from_settings(settings, "a", pacer=given)
    try:
        assert with_pacer._owned_budget is None and with_pacer.pacer is given  # the caller's pacing, not a second budget
    finally:
        await with_pacer.aclose()
    async with SharedBudget(pg_url, "http://127.0.0.1:9", "tok-a") as budget:
        with_budget = TenantClient.from_settings(settings, "a", budget=budget)
        try:
            assert with_budget._owned_budget is None and with_budget.pacer.shared is budget  # the caller's budget
        finally:
            await with_budget.aclose()


async def test_what_a_2xx_body_may_be_and_what_is_malformed() -> None:
    """An empty body is fine from a write or as a 204, not as a read's 200; a body that is not
    JSON, or JSON of the wrong shape, is malformed (counted, named, retried like a 5xx)."""

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=int(request.query.get("status", "200")))

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=200, body=b"{", content_type="application/json")

    async def listing(request: web.Request) -> web.Response:
        return web.json_response({"items": "not a list"})

    def items_are_a_list(data: Any) -> None:
        if not isinstance(data["items"], list):
            raise ValueError("items is not a list")

    routes = (("*", "/v1/empty", empty), ("GET", "/v1/broken", broken), ("GET", "/v1/listing", listing))
    async with serve(app_with(*routes)) as url:
        async with TenantClient("t", url, "tok-bodies", retry=ONCE, pace=False) as api:
            assert (await api.request("GET", "/v1/empty", params={"status": 204})).data is None
            assert (await api.request("POST", "/v1/empty")).data is None
            assert (await api.request("PUT", "/v1/empty")).data is None
            assert (await api.request("GET", "/v1/listing")).data == {"items": "not a list"}  # no check asked for
            problems = []
            for method, path, check in (("GET", "/v1/empty", None), ("GET", "/v1/broken", None), ("GET", "/v1/listing", items_are_a_list)):
                with pytest.raises(MalformedResponse) as caught:
                    await api.request(method, path, validate=check)
                assert (caught.value.status, caught.value.method, caught.value.path, caught.value.tenant) == (200, method, path, "t")
                problems.append(caught.value.message)
    assert problems[0] == "empty body"
    assert problems[1].startswith("unparsable JSON body (1 bytes): "), problems[1]
    assert problems[2] == "unexpected answer: items is not a list"
    assert api.stats.malformed == 3


async def test_an_absolute_next_page_url_keeps_its_query_and_a_bare_origin_is_the_root() -> None:
    """`next.page` may be a whole URL of the same origin, whatever its format: one whose query
    itself holds a URL (`?after=http://...`) is sent with that query whole, and the bare origin
    asks for `/`, not for a path made of the host."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response({"items": [], "next": None})

    async with serve(app_with(("GET", "/{tail:.*}", record))) as base:
        async with TenantClient("t", base, "tok-next", retry=ONCE, pace=False) as api:
            await api.get_json(f"{base}/v1/orgs?after={base}/v1/orgs/x")
            await api.get_json(base)
    assert seen[0] == f"/v1/orgs?after={base}/v1/orgs/x", seen
    assert seen[1] == "/", seen


async def test_an_answers_bytes_are_held_in_the_budget_while_it_is_read_and_given_back() -> None:
    """The process-wide answer budget bounds the memory of answers in flight only if every
    attempt reads its answer INTO its holding: a 300 KB answer raises the budget's peak to at
    least its size, and nothing stays held once it is decoded."""
    items = [{"id": f"x{i:05d}", "title": "t" * 90} for i in range(3000)]

    async def big(request: web.Request) -> web.Response:
        return web.json_response({"items": items, "next": None})

    budget = AnswerBudget(allocation_bound(MiB))
    async with serve(app_with(("GET", "/v1/big", big))) as base:
        async with TenantClient("t", base, "tok-big", retry=ONCE, pace=False, max_answer_bytes=MiB, answer_budget=budget) as api:
            answer = await api.get_json("/v1/big")
    size = len(json.dumps({"items": items, "next": None}))
    assert len(answer["items"]) == 3000 and size > 300_000
    assert budget.peak >= size, (budget.peak, size)
    assert budget.held == 0


async def test_query_values_are_sent_as_the_api_reads_them() -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"query": [[key, value] for key, value in request.query.items()]})

    async with serve(app_with(("GET", "/v1/echo", echo))) as url:
        async with TenantClient("t", url, "tok-query", pace=False) as api:
            data = await api.get_json("/v1/echo", params={"left_out": None, "yes": True, "no": False, "after": "x", "ids": [1, False, "z"]})
    assert data["query"] == [["yes", "true"], ["no", "false"], ["after", "x"], ["ids", "1"], ["ids", "false"], ["ids", "z"]]


async def test_paginate_sends_the_callers_parameters_and_page_size() -> None:
    async def listing(request: web.Request) -> web.Response:
        return web.json_response({"items": [dict(request.query)], "next": None})

    async with serve(app_with(("GET", "/v1/things", listing))) as url:
        async with TenantClient("t", url, "tok-pages", pace=False) as api:
            pages = [page async for page in api.paginate("/v1/things", {"verbose": True}, limit=7, max_pages=3)]
    assert pages == [[{"verbose": "true", "limit": "7"}]]


async def test_a_path_is_sent_as_given_with_dot_segments_and_lone_percents_escaped() -> None:
    async def raw(request: web.Request) -> web.Response:
        return web.json_response({"raw": request.raw_path})

    async with serve(app_with(("GET", "/{tail:.*}", raw))) as url:
        async with TenantClient("t", url + "/", "tok-paths", pace=False) as api:  # (a base URL's trailing slash is dropped)
            sent = (await api.get_json("/v1/x/./y/../a b/100%/%41/k:v@w;p=q,r")).get("raw")
    assert sent == "/v1/x/%2E/y/%2E%2E/a%20b/100%25/%41/k:v@w;p=q,r", sent
    assert api.base_url == url


async def test_a_client_keeps_its_defaults_and_refuses_what_cannot_work() -> None:
    api = TenantClient("t", "http://127.0.0.1:9", "tok-defaults-0913")
    try:
        assert (api.concurrency, api.timeout, api.pacer.max_block) == (64, 30.0, api.retry.max_wait)
        patient = TenantClient("p", "http://127.0.0.1:9", "tok", retry=RetryConfig(max_attempts=2, initial_wait=0.1, max_wait=5))
        assert patient.pacer.max_block == 5.0  # a pause for the rate limit no longer than the longest retry wait
        assert "tok-defaults-0913" not in redact_text("sent tok-defaults-0913 to the log")  # the token is a secret from the start
    finally:
        await api.aclose()
    with pytest.raises(ValueError, match="^tenant 'e': the API token is empty$"):
        TenantClient("e", "http://127.0.0.1:9", "")
    fits = AnswerBudget(allocation_bound(MiB))
    TenantClient("fits", "http://127.0.0.1:9", "tok", max_answer_bytes=MiB, answer_budget=fits)  # exactly one answer: enough
    with pytest.raises(ValueError, match=r"^tenant 'small': an answer budget of \d+ bytes cannot hold one answer of max_answer_bytes \(1048576 bytes\)"):
        TenantClient("small", "http://127.0.0.1:9", "tok", max_answer_bytes=MiB, answer_budget=AnswerBudget(allocation_bound(MiB) - 1))


async def test_requests_say_who_sends_them_keep_no_cookies_and_ignore_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Accept and User-Agent on every request; a cookie the server sets is not sent back (a
    session's state is not syncd's); proxy variables of the environment are not used (nor a
    .netrc, which would replace the Bearer token)."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")

    async def echo(request: web.Request) -> web.Response:
        response = web.json_response({name: request.headers.get(name) for name in ("Accept", "User-Agent", "Cookie", "Authorization")})
        response.set_cookie("session", "abc")
        return response

    async with serve(app_with(("GET", "/v1/echo", echo))) as url:
        # By name: aiohttp's own cookie jar would keep no cookie of a bare IP address anyway.
        async with TenantClient("t", url.replace("127.0.0.1", "localhost"), "tok-headers", pace=False) as api:
            first = await api.get_json("/v1/echo")
            second = await api.get_json("/v1/echo")
    assert first["Accept"] == "application/json" and first["User-Agent"] == f"syncd/{version('syncd')}"
    assert first["Authorization"] == second["Authorization"] == "Bearer tok-headers"
    assert first["Cookie"] is None and second["Cookie"] is None


async def test_redirects_never_carry_the_token_to_another_host() -> None:
    # Tiny servers: the emulator never redirects, nor echoes a request's headers.
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"authorization": request.headers.get("Authorization")})

    async with serve(app_with(("GET", "/v1/echo", echo))) as other:

        async def away(request: web.Request) -> web.Response:
            raise web.HTTPFound(other + "/v1/echo")

        async def home(request: web.Request) -> web.Response:
            raise web.HTTPTemporaryRedirect("/v1/echo")

        routes = (("GET", "/v1/away", away), ("GET", "/v1/home", home), ("GET", "/v1/echo", echo))
        async with serve(app_with(*routes)) as url:
            async with TenantClient("t", url, "tok-redirect-secret") as api:
                assert await api.get_json("/v1/away") == {"authorization": None}
                assert await api.get_json("/v1/home") == {"authorization": "Bearer tok-redirect-secret"}


async def test_a_redirect_loop_and_a_broken_redirect_are_errors_of_that_request() -> None:
    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/v1/loop")

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "http://[not-an-address/v1/x"})

    async with serve(app_with(("GET", "/v1/loop", loop), ("GET", "/v1/broken", broken))) as url:
        async with TenantClient("t", url, "tok-loop", retry=FAST, pace=False) as api:
            with pytest.raises(ApiError) as looped:
                await api.get_json("/v1/loop")
            with pytest.raises(ApiError) as bad:
                await api.get_json("/v1/broken")
    assert looped.value.message == "more than 5 redirects"
    assert (looped.value.method, looped.value.path, looped.value.tenant) == ("GET", "/v1/loop", "t")
    assert bad.value.message.startswith("invalid redirect: ") and "not-an-address" in bad.value.message, bad.value.message
    assert (bad.value.method, bad.value.path, bad.value.tenant) == ("GET", "/v1/broken", "t")
    assert api.stats.transport_errors == 0 and api.stats.retries == 0  # the server's doing: no retry


async def test_the_token_never_reaches_the_logs(emulator: Any) -> None:
    token = "log-secret-token-99"
    buffer = io.StringIO()
    configure_logging("json", "debug", stream=buffer)
    try:
        await admin(emulator, "PUT", "/faults", {"5xx": 1.0})
        async with client(emulator, token, retry=RetryConfig(max_attempts=3, initial_wait=0.001, max_wait=0.002)) as api:
            with pytest.raises(ServerError):
                await api.get_json("/v1/orgs")
    finally:
        configure_logging()
    text = buffer.getvalue()
    assert "retry 1/2 in" in text and "retry 2/2 in" in text and token not in text


async def test_rate_limited_error_after_the_budget(emulator: Any) -> None:
    # One request per 100 s; the retry waits at most 5 ms (moving the emulator's clock on by
    # that): the second call is refused twice, however slow the machine.
    await admin(emulator, "PUT", "/rate-limit", {"rate": 0.01, "burst": 1})
    waits: list[float] = []
    retry = RetryConfig(max_attempts=2, initial_wait=0.001, max_wait=0.005)
    async with client(emulator, retry=retry, pace=False, sleep=emulator_time(emulator, waits)) as api:
        await api.get_json("/v1/orgs")
        with pytest.raises(RateLimited) as caught:
            await api.get_json("/v1/orgs")
    assert caught.value.retry_after is not None and caught.value.retry_after >= 50  # 100 s less the time since the first
    assert caught.value.attempts == 2 and caught.value.may_have_applied is False
    assert len(waits) == 1 and waits[0] <= 0.005


async def test_what_a_client_counts_of_its_answers_and_tells_its_observer() -> None:
    """Each answer counted by status and its bytes summed; a 2xx answer's headers handed on; a
    300 is no success; at most 5 redirects followed; an attempt that got no answer heard by the
    observer as "error", with the tenant and method."""
    body = json.dumps({"items": [], "next": None}).encode()
    heard = Heard()

    async def ok(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json", headers={"X-Probe": "yes"})

    async def multiple(request: web.Request) -> web.Response:
        return web.json_response({"items": []}, status=300)

    async def hop(request: web.Request) -> web.Response:
        left = int(request.match_info["left"])
        if left:
            raise web.HTTPFound(f"/v1/hop/{left - 1}")
        return web.Response(body=body, content_type="application/json")

    big = json.dumps({"items": [{"title": "x" * 1000}] * 2000, "next": None}).encode()  # 2 MB: over an error's cap

    async def large(request: web.Request) -> web.Response:
        return web.Response(body=big, content_type="application/json")

    async def silent(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()  # no answer at all
        return web.Response()

    app = app_with(("GET", "/v1/ok", ok), ("GET", "/v1/multiple", multiple), ("GET", "/v1/hop/{left}", hop), ("GET", "/v1/silent", silent),
                   ("GET", "/v1/large", large))
    async with serve(app) as url:
        with observing(heard):
            async with TenantClient("counted", url, "tok-counted", retry=ONCE, pace=False) as api:
                first = await api.request("GET", "/v1/ok")
                await api.request("GET", "/v1/ok")
                assert first.headers["X-Probe"] == "yes" and first.data == {"items": [], "next": None}
                assert api.stats.responses[200] == 2 and api.stats.bytes_received == 2 * len(body)
                with pytest.raises(ApiError) as not_ok:
                    await api.request("GET", "/v1/multiple")
                assert not_ok.value.status == 300
                assert len((await api.request("GET", "/v1/large")).data["items"]) == 2000  # a 2xx is read up to max_answer_bytes
                assert (await api.request("GET", "/v1/hop/4")).status == 200
                with pytest.raises(ApiError, match="more than 5 redirects"):
                    await api.request("GET", "/v1/hop/6")
                heard.calls.clear()
                with pytest.raises(TransportError):
                    await api.request("GET", "/v1/silent")
    assert heard.calls == [("response", "counted", "GET", "error", None)]


async def test_paths_as_callers_write_them_reach_the_server_as_the_api_names_them() -> None:
    """A path without its leading slash, a base URL ending in /v1 with paths that repeat it, an
    empty query, fragments (one or two `#`): the request line the server reads. An error names
    the path as the caller gave it, without query or fragment, whatever the base URL."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        if "nope" in request.path:
            return web.json_response({"error": {"code": 404, "message": "no such thing"}}, status=404)
        return web.json_response({"items": [], "next": None})

    async with serve(app_with(("GET", "/{tail:.*}", record))) as base:
        async with TenantClient("t", base, "tok-paths", retry=ONCE, pace=False) as api:
            for path in ("v1/orgs", "/v1/orgs?", "/v1/a#b#c?d", "/v1/b?x=1#f#g"):
                await api.get_json(path)
            with pytest.raises(NotFound) as plain:
                await api.get_json("/v1/nope?a=1?b#c#d")
            with pytest.raises(NotFound) as fragments:
                await api.get_json("/v1/nope#x#y")
        async with TenantClient("t", base + "/v1", "tok-paths", retry=ONCE, pace=False) as api:
            for path in ("/v1/orgs", "/v1", "/v1?x=1", "orgs", "/v1x"):
                await api.get_json(path)
            with pytest.raises(NotFound) as under_v1:
                await api.get_json("/v1/nope?a=1")
    assert seen == [
        "/v1/orgs", "/v1/orgs", "/v1/a", "/v1/b?x=1", "/v1/nope?a=1?b", "/v1/nope",
        "/v1/orgs", "/v1", "/v1?x=1", "/v1/orgs", "/v1/v1x", "/v1/nope?a=1",
    ], seen
    assert plain.value.path == fragments.value.path == under_v1.value.path == "/v1/nope"


async def test_a_300_is_read_as_an_error_and_rate_headers_count_only_from_the_apis_origin() -> None:
    """A 300's body is an error's: read up to 1 MiB and told as cut. An answer that a redirect
    fetched from another origin says nothing about this API's rate limit."""
    heard = Heard()

    async def choices(request: web.Request) -> web.Response:
        return web.Response(status=300, text="x" * (2 * MiB), content_type="text/plain")

    async def elsewhere(request: web.Request) -> web.Response:
        return web.json_response({"items": []}, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "100"})

    async with serve(app_with(("GET", "/v1/elsewhere", elsewhere))) as other:
        async def away(request: web.Request) -> web.Response:
            raise web.HTTPFound(f"{other}/v1/elsewhere")

        async with serve(app_with(("GET", "/v1/choices", choices), ("GET", "/v1/away", away))) as url:
            with observing(heard):
                async with TenantClient("t", url, "tok-origin", retry=ONCE, pace=False) as api:
                    with pytest.raises(ApiError, match=r"\[error body over 1\.0 MiB: cut\]|error body over 1 MiB: cut"):
                        await api.request("GET", "/v1/choices")
                    await api.request("GET", "/v1/away")
    assert heard.calls == [("response", "t", "GET", 300, None), ("response", "t", "GET", 200, None)]


async def test_an_error_that_is_not_retried_ends_the_retries_whatever_came_before() -> None:
    """A 503 is retried; the 404 that answers the retry is not, though a later call would succeed."""
    down = web.json_response({"error": {"code": 503, "message": "busy"}}, status=503)
    gone = web.json_response({"error": {"code": 404, "message": "no such org"}}, status=404)
    async with serve(app_with(("GET", "/v1/orgs", scripted(down, gone)))) as url:
        async with TenantClient("t", url, "tok-no-retry", retry=FAST, pace=False, sleep=no_sleep) as api:
            with pytest.raises(NotFound) as caught:
                await api.get_json("/v1/orgs")
    assert caught.value.attempts == 2 and api.stats.retries == 1
