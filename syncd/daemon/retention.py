"""Which backups a retention policy keeps: restic's `forget` rules, as a pure function.

A policy is a count per rule (`keep_last`, `keep_hourly`, `keep_daily`, `keep_weekly`,
`keep_monthly`, `keep_yearly`). Going through the backups newest first, each rule keeps the
newest backup of each of its next N periods (hours, days, ISO weeks, months, years) that hold a
backup; `keep_last` keeps the newest N. Periods with no backup are skipped, not counted: a
daily rule of 7 keeps the last 7 days that have a backup, however far back they go. A backup
kept by any rule stays, and the reasons say which rules keep it. A policy with no rule keeps
everything (restic refuses to run without one; syncd just prunes nothing).

Periods are calendar periods in the time zone given (the job's `timezone`): the "day" of a
backup taken at 23:30 UTC is the next day in Berlin. Times must be aware datetimes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Generic, TypeVar

__all__ = ["RULES", "Choice", "Policy", "choose_kept"]

T = TypeVar("T")

_PERIODS: dict[str, Callable[[datetime], str]] = {
    "hourly": lambda t: t.strftime("%Y-%m-%d %H:00"),
    "daily": lambda t: t.strftime("%Y-%m-%d"),
    "weekly": lambda t: "{}-W{:02d}".format(*t.isocalendar()[:2]),
    "monthly": lambda t: t.strftime("%Y-%m"),
    "yearly": lambda t: t.strftime("%Y"),
}
"""How each rule names the period a (local) time falls in; equal names, same period."""
RULES = ("last", *_PERIODS)
"""The rules in restic's order: `keep_last`, then the calendar ones."""


@dataclass(frozen=True)
class Policy:
    """How many backups each rule keeps (None: the rule is not used)."""

    last: int | None = None
    hourly: int | None = None
    daily: int | None = None
    weekly: int | None = None
    monthly: int | None = None
    yearly: int | None = None

    def __post_init__(self) -> None:
        for rule in RULES:
            count = getattr(self, rule)
            if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
                raise ValueError(f"keep_{rule} must be a whole number of at least 1, got {count!r}")

    @classmethod
    def of(cls, rules: Mapping[str, int]) -> Policy:
        """From `{"keep_daily": 7, ...}` (a job's `retention_policy()`)."""
        return cls(**{name.removeprefix("keep_"): count for name, count in rules.items()})

    def rules(self) -> dict[str, int]:
        """The rules in use, in restic's order: `{"last": 3, "daily": 7}`."""
        return {rule: count for rule in RULES if (count := getattr(self, rule)) is not None}

    def __str__(self) -> str:
        return " ".join(f"keep_{rule}={count}" for rule, count in self.rules().items()) or "keep everything"


@dataclass
class Choice(Generic[T]):
    """What a policy keeps and what it lets go; `kept` and `doomed` are newest first."""

    kept: dict[T, list[str]] = field(default_factory=dict)
    """Each kept backup with why: `last`, `daily 2026-11-26`, `weekly 2026-W48`..."""
    doomed: list[T] = field(default_factory=list)
    full: bool = False
    """Every rule found all the backups it may keep: an older backup would be kept by none."""


def choose_kept(backups: Iterable[tuple[T, datetime]], policy: Policy, tz: tzinfo = UTC) -> Choice[T]:
    """Split `backups` (each an item and when it was taken, any order) into kept and doomed.

    With no rule in `policy` every backup is kept (reason `no retention policy`) and `full` is
    False. Ties in time are broken by the order given (the later one counts as newer).
    """
    ordered: Sequence[tuple[T, datetime]] = [
        item for _, item in sorted(enumerate(backups), key=lambda pair: (pair[1][1], pair[0]), reverse=True)
    ]
    rules = policy.rules()
    choice: Choice[T] = Choice()
    if not rules:
        choice.kept = {item: ["no retention policy"] for item, _ in ordered}
        return choice
    left = dict(rules)
    latest: dict[str, str] = {}
    for index, (item, taken) in enumerate(ordered):
        if taken.tzinfo is None or taken.utcoffset() is None:
            raise ValueError(f"the time of backup {item!r} must be timezone-aware, got {taken!r}")
        local = taken.astimezone(tz)
        reasons = []
        for rule in rules:
            if left[rule] <= 0:
                continue
            period = str(index) if rule == "last" else _PERIODS[rule](local)
            if latest.get(rule) != period:
                latest[rule] = period
                left[rule] -= 1
                reasons.append("last" if rule == "last" else f"{rule} {period}")
        if reasons:
            choice.kept[item] = reasons
        else:
            choice.doomed.append(item)
    choice.full = all(count <= 0 for count in left.values())
    return choice
