"""Fault injection: the network and server failures a client must survive.

A spec string such as `5xx=0.1,html502=0.02,drop=0.05,lost=0.1,truncate=0.05,truncate_write=0.05,repeat_page=0.01,429=0.2,latency=20,jitter=10`
sets each fault's probability (latency and jitter in milliseconds).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields
from typing import Any

FAULT_KEYS = {
    "5xx": "error_5xx",
    "html502": "html_502",
    "drop": "drop",
    "lost": "lost_write",
    "truncate": "truncate",
    "truncate_write": "truncate_write",
    "repeat_page": "repeat_page",
    "429": "rate_limited",
    "latency": "latency_ms",
    "jitter": "jitter_ms",
}
_PROBABILITIES = ("error_5xx", "html_502", "drop", "lost_write", "truncate", "truncate_write", "repeat_page", "rate_limited")


@dataclass
class Faults:
    error_5xx: float = 0.0
    """500 or 503 with the JSON error body."""
    html_502: float = 0.0
    """502 with an HTML body, as a proxy in front of the service answers."""
    drop: float = 0.0
    """The connection is closed before any answer; nothing happened on the server."""
    lost_write: float = 0.0
    """A write takes effect, then the connection is closed before the answer."""
    truncate: float = 0.0
    """A 200 whose JSON body is cut short."""
    truncate_write: float = 0.0
    """A write's 2xx whose JSON body is cut short: the write took effect, its answer is unreadable."""
    repeat_page: float = 0.0
    """A list page whose `next.page` repeats the token it was asked with (a paging loop)."""
    rate_limited: float = 0.0
    """A 429 with `Retry-After: 1` and an empty bucket, whatever the client's pace: the
    token's limit spent by someone else (a 429 storm the client cannot pace away)."""
    latency_ms: float = 0.0
    jitter_ms: float = 0.0

    def update(self, values: dict[str, Any]) -> None:
        names = {f.name for f in fields(self)}
        for key, value in values.items():
            name = FAULT_KEYS.get(key, key)
            if name not in names:
                raise ValueError(f"unknown fault {key!r} (known: {', '.join(FAULT_KEYS)})")
            number = float(value)
            if name in _PROBABILITIES and not 0.0 <= number <= 1.0:
                raise ValueError(f"fault {key}: probability must be between 0 and 1")
            if number < 0:
                raise ValueError(f"fault {key}: must not be negative")
            setattr(self, name, number)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def delay_seconds(self, rng: random.Random) -> float:
        if self.latency_ms <= 0 and self.jitter_ms <= 0:
            return 0.0
        return max(0.0, self.latency_ms + rng.uniform(-self.jitter_ms, self.jitter_ms)) / 1000.0


def parse_faults(spec: str) -> dict[str, float]:
    """`key=value,...` into a dict; raises ValueError with the offending part."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, raw = part.partition("=")
        if not sep:
            raise ValueError(f"fault {part!r}: expected key=value")
        try:
            values[key.strip()] = float(raw)
        except ValueError:
            raise ValueError(f"fault {part!r}: {raw!r} is not a number") from None
    Faults().update(values)  # validates keys and ranges
    return values
