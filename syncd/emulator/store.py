"""In-memory, multi-tenant state of the emulator.

Records are plain dicts kept close to the API's shapes; each route family renders its own
records. Everything that must survive a restart of the emulator in a test (ids, ordering,
timestamps) is derived from the seeded RNG and the store's clock, so a seed gives the same
organizations every time.
"""

from __future__ import annotations

import random
import string
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from syncd.emulator.errors import bad_request, forbidden, not_found
from syncd.ordering import PositionError, place

ROLES = ("admin", "create", "review", "edit", "comment", "read")
ROLE_RANK = {role: rank for rank, role in enumerate(reversed(ROLES))}
_ID_ALPHABET = string.ascii_letters + string.digits

Record = dict[str, Any]


def iso(ts: datetime) -> str:
    """ISO 8601 with milliseconds and a Z, as the service writes timestamps."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Store:
    """All organizations, users and resources the emulator serves.

    `tables[kind][id]` holds records of every kind but organizations and users;
    `orders[key]` holds the sibling order of positioned kinds (collections and spaces
    share one order per parent, as the move API references both as `space`).
    """

    def __init__(self, seed: int = 0, start: datetime | None = None) -> None:
        self.rng = random.Random(seed)
        self.users: dict[str, Record] = {}
        self.tokens: dict[str, str] = {}
        self.orgs: dict[str, Record] = {}
        self.members: dict[str, dict[str, Record]] = defaultdict(dict)
        self.tables: dict[str, dict[str, Record]] = defaultdict(dict)
        self.orders: dict[tuple[str, ...], list[str]] = defaultdict(list)
        self._clock_offset = timedelta(0)
        self._fixed_now = start
        self.counters: dict[str, int] = defaultdict(int)

    # ----- time and ids -----------------------------------------------------------------

    def now(self) -> datetime:
        """Current emulator time: a fixed start (generation) or wall time, plus any advance."""
        base = self._fixed_now or datetime.now(UTC)
        return base + self._clock_offset

    def now_iso(self) -> str:
        return iso(self.now())

    def freeze_clock(self, at: datetime | None) -> None:
        """Pin the clock (the generator does, for reproducible timestamps); None releases it."""
        self._fixed_now = at

    def advance_clock(self, seconds: float) -> None:
        self._clock_offset += timedelta(seconds=seconds)

    def clock_offset(self) -> float:
        """Seconds the clock was moved on: rate-limit buckets and page tokens age by it too."""
        return self._clock_offset.total_seconds()

    def reset_clock_offset(self) -> None:
        self._clock_offset = timedelta(0)

    def new_id(self, length: int = 20) -> str:
        return "".join(self.rng.choice(_ID_ALPHABET) for _ in range(length))

    def next_number(self, scope: str) -> int:
        self.counters[scope] += 1
        return self.counters[scope]

    # ----- users, tokens, membership ----------------------------------------------------

    def add_user(self, display_name: str, email: str, token: str | None = None) -> Record:
        user = {"id": self.new_id(), "displayName": display_name, "email": email}
        self.users[user["id"]] = user
        if token:
            self.tokens[token] = user["id"]
        return user

    def add_token(self, token: str, user_id: str) -> None:
        self.tokens[token] = user_id

    def add_member(self, org_id: str, user_id: str, role: str | None = "admin") -> Record:
        ts = self.now_iso()
        member = {
            "role": role,
            "joinedAt": ts,
            "lastSeenAt": ts,
            "sso": False,
            "disabled": False,
        }
        self.members[org_id][user_id] = member
        return member

    def role_in(self, user_id: str, org_id: str) -> str | None:
        member = self.members.get(org_id, {}).get(user_id)
        return member["role"] if member else None

    def org_for(self, user_id: str, org_id: str) -> Record:
        """The organization if the user belongs to it; 404 otherwise (invisible = unknown)."""
        org = self.orgs.get(org_id)
        if org is None or user_id not in self.members.get(org_id, {}):
            raise not_found(f"organization {org_id!r} not found")
        return org

    def require_admin(self, user_id: str, org_id: str) -> None:
        role = self.role_in(user_id, org_id)
        if role != "admin":
            raise forbidden("this operation needs the admin role in the organization")

    def user_orgs(self, user_id: str) -> list[Record]:
        return [org for org_id, org in self.orgs.items() if user_id in self.members.get(org_id, {})]

    # ----- generic records --------------------------------------------------------------

    def add(self, kind: str, record: Record) -> Record:
        record.setdefault("id", self.new_id())
        self.tables[kind][record["id"]] = record
        return record

    def get(self, kind: str, record_id: str) -> Record | None:
        return self.tables[kind].get(record_id)

    def visible(self, kind: str, record_id: str, user_id: str, label: str | None = None) -> Record:
        """A record of `kind` whose organization the user belongs to; 404 otherwise."""
        record = self.tables[kind].get(record_id)
        if record is None or user_id not in self.members.get(record.get("org", ""), {}):
            raise not_found(f"{label or kind} {record_id!r} not found")
        return record

    def remove(self, kind: str, record_id: str) -> Record | None:
        return self.tables[kind].pop(record_id, None)

    def where(self, kind: str, **match: Any) -> list[Record]:
        return [r for r in self.tables[kind].values() if all(r.get(k) == v for k, v in match.items())]

    # ----- ordering ---------------------------------------------------------------------

    def place(
        self,
        key: tuple[str, ...],
        item_id: str,
        before: str | None = None,
        after: str | None = None,
    ) -> None:
        """Put `item_id` in the sibling list `key`, before/after a sibling, or at the end."""
        try:
            place(self.orders[key], item_id, before, after)
        except PositionError as exc:
            raise bad_request(str(exc)) from None

    def unplace(self, key: tuple[str, ...], item_id: str) -> None:
        order = self.orders.get(key)
        if order and item_id in order:
            order.remove(item_id)

    def ordered(self, key: tuple[str, ...]) -> list[str]:
        return list(self.orders.get(key, ()))
