"""Per-token token buckets, announced on every answer as the service does."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


@dataclass
class Bucket:
    tokens: float
    updated: float


@dataclass
class RateLimiter:
    """`rate` requests a second per token, bursts up to `burst`; rate 0 means unlimited."""

    rate: float = 0.0
    burst: float = 0.0
    clock: "callable[[], float]" = time.monotonic  # type: ignore[valid-type]
    wall: "callable[[], float]" = time.time  # type: ignore[valid-type]
    buckets: dict[str, Bucket] = field(default_factory=dict)
    limited: int = 0

    def configure(self, rate: float, burst: float | None = None) -> None:
        self.rate = max(0.0, rate)
        self.burst = max(1.0, burst if burst else self.rate)
        self.buckets.clear()

    def take(self, key: str) -> tuple[bool, dict[str, str]]:
        """Spend one token for `key`: (allowed, headers to send with the answer)."""
        if self.rate <= 0:
            return True, {}
        now = self.clock()
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = Bucket(self.burst, now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        allowed = bucket.tokens >= 1.0
        if allowed:
            bucket.tokens -= 1.0
        else:
            self.limited += 1
        full_in = (self.burst - bucket.tokens) / self.rate
        headers = {
            "X-RateLimit-Limit": str(int(self.burst)),
            "X-RateLimit-Remaining": str(int(math.floor(bucket.tokens))),
            "X-RateLimit-Reset": str(int(math.ceil(self.wall() + full_in))),
        }
        if not allowed:
            wait = (1.0 - bucket.tokens) / self.rate
            headers["Retry-After"] = str(max(1, int(math.ceil(wait))))
        return allowed, headers
