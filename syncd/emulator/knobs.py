"""The run-time state of one emulator app beside its store: the knobs tests and benchmarks
turn (rate limit, faults, refusals), the request statistics, the start a reset returns to, and
the app keys they live under. Kept apart from the app so the admin routes read and reset them
without importing the app that registers those routes."""

from __future__ import annotations

import copy
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

from syncd.emulator.faults import Faults
from syncd.emulator.http import CAPS, STORE, ServerCaps
from syncd.emulator.profile import PROFILE, Profile
from syncd.emulator.ratelimit import RateLimiter
from syncd.emulator.store import Store


@dataclass
class Stats:
    """Requests by (method, route, status); faults count under their own status names."""

    by_route: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def record(self, method: str, route: str, status: str) -> None:
        self.by_route[(method, route, status)] += 1

    def as_dict(self) -> dict[str, object]:
        rows = [
            {"method": m, "route": r, "status": s, "count": n}
            for (m, r, s), n in sorted(self.by_route.items())
        ]
        by_status: Counter[str] = Counter()
        for (_, _, status), n in self.by_route.items():
            by_status[status] += n
        return {"total": sum(self.by_route.values()), "by_status": dict(by_status), "routes": rows}


@dataclass
class Emulator:
    """Knobs that tests and benchmarks change at run time (through the admin routes too)."""

    store: Store
    limiter: RateLimiter = field(default_factory=RateLimiter)
    faults: Faults = field(default_factory=Faults)
    stats: Stats = field(default_factory=Stats)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    forbidden: list[str] = field(default_factory=list)
    """Regexes of paths answered 403 (a sub-resource the token may not read), matched against
    the path and against `METHOD path` (so `^GET /v1/...` refuses a listing, not its create)."""
    corrupt: list[str] = field(default_factory=list)
    """Regexes of list paths whose first item is answered as a malformed object."""


EMULATOR: web.AppKey[Emulator] = web.AppKey("emulator", Emulator)


@dataclass(frozen=True)
class Start:
    """What the emulator was when it started serving, kept by a resettable app only: tests that
    share one emulator process (its start costs more than most tests) return it there between
    tests, `POST /_emulator/reset`, instead of starting another."""

    store: Store
    """A deep copy, never served: each reset serves a fresh copy of it."""
    profile: Profile
    caps: ServerCaps
    rate: float
    burst: float | None
    faults: dict[str, float] | None
    fault_seed: int


START: web.AppKey[Start] = web.AppKey("start", Start)


def new_knobs(store: Store, rate: float, burst: float | None, faults: dict[str, float] | None, fault_seed: int) -> Emulator:
    """The run-time knobs of a new app, and of one reset to its start (`reset_app`)."""
    # Buckets refill on the emulator's clock: real time plus what `POST /_emulator/clock` added.
    limiter = RateLimiter(clock=lambda: time.monotonic() + store.clock_offset(), wall=lambda: time.time() + store.clock_offset())
    emu = Emulator(store=store, limiter=limiter, rng=random.Random(fault_seed))
    emu.limiter.configure(rate, burst)
    if faults:
        emu.faults.update(faults)
    return emu


def reset_app(app: web.Application) -> None:
    """Everything back to the start, built as `create_app` built it. A started app's keys cannot
    be replaced, so the objects they hold (the store, the knobs, the profile, the caps) take the
    contents of new ones."""
    start = app[START]
    store = app[STORE]
    vars(store).clear()
    vars(store).update(vars(copy.deepcopy(start.store)))
    vars(app[EMULATOR]).update(vars(new_knobs(store, start.rate, start.burst, start.faults, start.fault_seed)))
    app[PROFILE].profile = start.profile
    vars(app[CAPS]).update(vars(start.caps))
