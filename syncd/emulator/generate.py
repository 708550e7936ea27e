"""Deterministic generator of realistic organizations for the emulator.

`orgs=2,collections=20,spaces=200,pages=20,sites=5` and a seed always give the same
organizations, ids and timestamps. Each route family seeds its own kinds (`seed` in its
module); this module parses the spec, makes users and organizations, and calls them in
dependency order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

from syncd.emulator.route_table import FAMILIES
from syncd.emulator.routes.orgs import new_org
from syncd.emulator.store import Store

DEFAULTS: dict[str, int] = {
    "orgs": 1,
    "collections": 6,
    "spaces": 12,
    "pages": 8,
    "files": 2,
    "sites": 2,
    "sections": 3,
    "members": 5,
    "teams": 3,
    "saml": 1,
    "openapi": 2,
    "translations": 1,
    "custom_fields": 3,
    "comments": 2,
    "change_requests": 1,
    "integrations": 2,
    "empty_orgs": 0,
}
GENERATION_EPOCH = datetime(2025, 1, 6, 9, 0, 0, tzinfo=UTC)


@dataclass
class Generated:
    org_ids: list[str] = field(default_factory=list)
    tokens: dict[str, list[str]] = field(default_factory=dict)
    """token -> ids of the organizations it sees."""


def parse_spec(spec: str | None) -> dict[str, int]:
    """`key=N,...` over DEFAULTS; unknown keys and bad numbers raise ValueError."""
    params = dict(DEFAULTS)
    for part in filter(None, (p.strip() for p in (spec or "").split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in DEFAULTS:
            raise ValueError(f"generate: unknown item {part!r} (known: {', '.join(DEFAULTS)})")
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"generate: {key} must be a whole number, got {raw!r}") from None
        if value < 0:
            raise ValueError(f"generate: {key} must not be negative")
        params[key] = value
    return params


def generate(store: Store, params: dict[str, int], seed: int = 0, all_token: str | None = None) -> Generated:
    """Fill `store`: per organization an owner with token `org<N>-token`, plus `all_token`
    (when given) for a user who is admin of every generated organization. `empty_orgs`
    more organizations follow the generated ones with nothing in them (copy targets)."""
    rng = random.Random(seed)
    store.freeze_clock(GENERATION_EPOCH)
    result = Generated()
    everyone = store.add_user("Emulator Admin", "admin@emulator.test", all_token) if all_token else None
    try:
        offset = len(store.orgs)
        for index in range(offset + 1, offset + params["orgs"] + params["empty_orgs"] + 1):
            org = new_org(store, f"Organization {index}", emailDomains=[f"org{index}.example.com"])
            owner = store.add_user(f"Owner {index}", f"owner@org{index}.example.com", f"org{index}-token")
            store.add_member(org["id"], owner["id"], "admin")
            result.tokens[f"org{index}-token"] = [org["id"]]
            if everyone is not None:
                store.add_member(org["id"], everyone["id"], "admin")
            result.org_ids.append(org["id"])
            if index > offset + params["orgs"]:
                continue  # an empty organization: a target to copy into
            for family in FAMILIES:
                if family.seed is not None:
                    family.seed(store, org["id"], random.Random(rng.random()), params)
                    store.advance_clock(60)
        if all_token:
            result.tokens[all_token] = list(result.org_ids)
    finally:
        # Back to wall time: objects made later through the API get current timestamps.
        store.freeze_clock(None)
        store.reset_clock_offset()
    return result
