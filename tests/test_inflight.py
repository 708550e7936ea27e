"""The limit of requests in flight: the controller as a pure function (latency and rate in, limit
out), then a client over loopback against the emulator with its latency knob.

No timings are asserted: the controller is fed times by the test, and the loopback test checks
the limit the client reached and that it measured a plausible round trip.
"""

from __future__ import annotations

import io
import json
from typing import Any

import anyio
import pytest

from syncd.api import TenantClient, link_text
from syncd.api.inflight import DEFAULT_FLOOR, InFlightLimit, bdp_target, outcome_of
from syncd.api.inflight_gate import InFlightGate, capped_notice
from syncd.config import RetryConfig
from syncd.daemon.metrics import DaemonMetrics
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from syncd.logging import configure_logging
from tests.conftest import ALL_TOKEN


def fed(control: InFlightLimit, *, rate: float, rtt: float, seconds: float, start: float = 0.0,
        server_rate: float | None = None, shared: bool = False, status: int = 200) -> float:  # fmt: skip
    """Answers arriving evenly at `rate` per second for `seconds`, each `rtt` after it was sent;
    returns the time of the last one."""
    control.set_rate(server_rate, shared=shared)
    now = start
    for _ in range(int(rate * seconds)):
        now += 1 / rate
        control.answered(now, status, rtt)
    return now


def settled(rate: float, rtt: float, ceiling: int = 64, **options: Any) -> InFlightLimit:
    control = InFlightLimit(ceiling)
    fed(control, rate=rate, rtt=rtt, seconds=5, server_rate=options.pop("server_rate", rate), **options)
    return control


def test_the_limit_is_rate_times_round_trip_with_headroom() -> None:
    at_150 = settled(100, 0.15)
    assert 22 <= at_150.limit <= 26 and at_150.limit == bdp_target(100, 0.15)
    assert at_150.rtt == pytest.approx(0.15)
    at_300 = settled(100, 0.3)
    assert 45 <= at_300.limit <= 49
    assert settled(100, 0.02).limit < 8  # a near link needs few
    assert settled(10, 0.15).limit == bdp_target(10, 0.15) < 8  # a slow rate too


def test_429s_halve_the_limit_once_per_round_trip_and_clean_answers_grow_it_back() -> None:
    control = settled(100, 0.15)
    before, now = control.limit, 5.0
    control.answered(now, 429)
    control.answered(now + 0.01, 429)  # same round trip: one cut
    assert control.limit == before // 2
    control.answered(now + 0.2, 503)
    assert control.limit == before // 4
    now = fed(control, rate=100, rtt=0.15, seconds=1, start=now + 0.2, server_rate=100)
    assert before // 4 < control.limit < before  # additive increase: one per round trip
    fed(control, rate=100, rtt=0.15, seconds=5, start=now, server_rate=100)
    assert control.limit == before


def test_timeouts_and_dropped_connections_shrink_it_and_a_404_does_not() -> None:
    assert [outcome_of(s) for s in (None, 429, 500, 503, 200, 204, 404, 409)] == ["congested"] * 4 + ["clean"] * 4
    control = settled(100, 0.3)
    before = control.limit
    control.answered(5.0, 404, 0.3)
    assert control.limit >= before
    control.answered(5.5, None)
    assert control.limit == before // 2


def test_never_above_the_ceiling_nor_below_the_floor() -> None:
    capped = settled(100, 0.3, ceiling=16)
    assert capped.limit == 16 and (capped.wanted() or 0) >= bdp_target(100, 0.3) > 16
    control = settled(100, 0.15)
    for i in range(40):
        control.answered(10.0 + i, 429)
    assert control.limit == DEFAULT_FLOOR
    assert InFlightLimit(1).limit == 1  # a ceiling of 1 is one at a time, whatever the floor


def test_the_ceiling_is_said_when_it_holds_the_link_back() -> None:
    control = InFlightLimit(16)
    fed(control, rate=50, rtt=0.3, seconds=3, server_rate=100)  # half the rate arrives: 16 / 0.3 s
    assert control.capped()
    wanted, rate, rtt = control.wanted(), control.rate(), control.rtt
    assert wanted is not None and rate is not None and rtt is not None
    assert capped_notice("src", 16, wanted, rate, rtt) == (
        "tenant src: concurrency 16 caps requests in flight; the link needs about 47 "
        "(rate 100/s x RTT 300 ms x 1.5): raise `concurrency`"
    )
    assert not settled(100, 0.15).capped()  # under the ceiling: nothing to say
    assert not settled(100, 0.3, ceiling=48).capped()


def test_replicas_sharing_a_token_each_size_the_limit_to_their_share() -> None:
    alone = settled(100, 0.15, shared=True)
    halves = [settled(50, 0.15, server_rate=100, shared=True) for _ in range(2)]
    for half in halves:
        assert half.limit == bdp_target(50, 0.15)
        assert half.limit <= 0.6 * alone.limit
    # The same share without knowing it is shared would claim the whole token's rate.
    assert settled(50, 0.15, server_rate=100).limit == alone.limit


def test_without_a_rate_announced_it_grows_with_what_is_delivered() -> None:
    """A closed loop: every round trip, as many answers come back as were allowed in flight."""
    control, now, rtt = InFlightLimit(64), 0.0, 0.15
    for _ in range(60):
        sent = control.limit
        for _ in range(sent):
            now += rtt / sent
            control.answered(now, 200, rtt)
    assert control.limit == 64


def test_the_words_shown() -> None:
    assert link_text(24, 0.1524) == "in flight ≤ 24 (rtt 152 ms)"
    assert link_text(4, None) == "in flight ≤ 4"


async def test_the_gate_resizes_its_limiter_and_says_once_that_the_ceiling_holds_the_link_back() -> None:
    now = [0.0]
    gate = InFlightGate(16, clock=lambda: now[0])
    assert gate.limiter.total_tokens == 10  # slow start's first window
    buffer = io.StringIO()
    configure_logging("json", "info", stream=buffer)
    try:
        for _ in range(300):  # 300 ms away, 50 answers/s of the service's 100: the ceiling holds it
            now[0] += 0.02
            gate.answered("src", 200, 0.3, 100.0, shared=False)
        assert gate.limiter.total_tokens == gate.limit == 16
        now[0] += 1
        assert gate.answered("src", 429, None, 100.0, shared=False) == 8
        assert gate.limiter.total_tokens == 8  # lowered: the requests in flight finish, no new one starts
    finally:
        configure_logging()
    said = [json.loads(line) for line in buffer.getvalue().splitlines()]
    notices = [line["event"] for line in said if "caps requests in flight" in line["event"]]
    assert notices == ["tenant src: concurrency 16 caps requests in flight; the link needs about 47 "
                       "(rate 100/s x RTT 300 ms x 1.5): raise `concurrency`"]  # fmt: skip


async def test_over_a_slow_link_the_client_raises_its_limit_past_the_old_default() -> None:
    """The emulator 100 ms away at 100 requests/s: the old fixed 8 allowed 80 requests/s; the
    client measures the round trip and goes past it. /metrics shows the same figures."""
    store = Store(seed=3)
    generated = generate(store, parse_spec("orgs=1,spaces=4,pages=3"), seed=3, all_token=ALL_TOKEN)
    metrics = DaemonMetrics()
    async with serve_emulator(store, rate_limit=100, faults={"latency": 100}) as running:
        from syncd.api.telemetry import observing

        with observing(metrics):
            api = TenantClient("src", running.url, ALL_TOKEN, retry=RetryConfig(max_attempts=8, initial_wait=0.01, max_wait=0.5))
        async with api:
            path = f"/v1/orgs/{generated.org_ids[0]}"

            async def read(n: int) -> None:
                for _ in range(n):
                    await api.get_json(path)

            async with anyio.create_task_group() as tg:
                for _ in range(40):
                    tg.start_soon(read, 6)
    stats = api.stats
    assert stats.inflight_limit_peak > 8
    assert stats.inflight_limit <= api.concurrency
    assert stats.rtt_seconds is not None and 0.08 <= stats.rtt_seconds < 5.0
    shown = stats.as_dict()
    assert shown["inflight_limit"] == stats.inflight_limit and shown["inflight_limit_peak"] == stats.inflight_limit_peak
    assert shown["rtt_seconds"] == pytest.approx(stats.rtt_seconds, abs=1e-3)
    text = metrics.render().decode()
    assert "# TYPE syncd_inflight_limit gauge" in text and "# HELP syncd_round_trip_seconds" in text
    assert f'syncd_inflight_limit{{tenant="src"}} {float(stats.inflight_limit)}' in text
