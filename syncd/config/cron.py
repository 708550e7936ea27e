"""Cron expressions and time zones, read by a maintained library (`cronsim`) instead of by hand.

What syncd accepts: the 5 classic fields (minute hour day-of-month month day-of-week) with `*`,
`a-b`, `/n` steps and lists; month and weekday names (`JAN`, `MON-FRI`, any case); cronsim's
`L` (last day of the month; `5L` the last Friday), `LW` (last weekday) and `#` (`MON#1`, the
first Monday); and the macros of cron (`@hourly`, `@daily`/`@midnight`, `@weekly`, `@monthly`,
`@yearly`/`@annually`), which are the 5-field expressions they stand for. Day-of-month and
day-of-week follow Vixie cron: when both are restricted, a day matching either is enough.
An expression that can never match (`0 0 30 2 *`) is refused when it is read, not found out
at run time. A sixth (seconds) field is refused: jobs are scheduled by the minute.

Times are read in a time zone (an IANA name, `zoneinfo`): `UTC` by default. Across a daylight
saving change syncd does what cronsim does, which is what Debian's cron does:
- an expression with a fixed minute and hour (`30 2 * * *`) whose time is skipped (clocks go
  forward over 02:30) runs at the first minute after the gap (03:00), once; whose time comes
  twice (clocks go back over 02:30) runs the first time only;
- an expression with `*` (or `*/n`, `a-b`...) in its minute or hour field runs by the real
  clock: `*/15 * * * *` runs every 15 minutes through the change, so four times in the hour
  that comes twice and never in the hour that is skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from cronsim.cronsim import Field

__all__ = ["MACROS", "YEARS_SEARCHED", "CronError", "next_after", "validate_cron", "validate_timezone", "zone"]

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""cron's macros and the 5-field expressions they stand for (as in cronie and Vixie cron)."""
YEARS_SEARCHED = 50
"""How far cronsim looks for the next time before it gives up (`MON#5` in February is rare)."""


class CronError(ValueError):
    """An expression or time zone syncd cannot use: the message is one line for the user."""


def _same(a: str, b: str) -> bool:
    return int(a) == int(b) if a.isdigit() and b.isdigit() else a.upper() == b.upper()


def _one_value_steps(field: str) -> str:
    """`5-5/2` as `5`: cronsim 2.8 reads a stepped range of one value as `5/2` (5 to the end
    of the field, every other one), which is not what the range says."""
    items = []
    for item in field.split(","):
        base, slash, _ = item.partition("/")
        first, dash, last = base.partition("-")
        items.append(first if slash and dash and first and _same(first, last) else item)
    return ",".join(items)


def _fields(expr: str) -> str:
    """The 5-field form of `expr` that cronsim reads (a macro replaced by its expression)."""
    text = " ".join(expr.split())
    if text.startswith("@"):
        fields = MACROS.get(text.lower())
        if fields is None:
            raise CronError(f"unknown cron macro {text!r}: use one of {', '.join(MACROS)}")
        return fields
    return " ".join(_one_value_steps(field) for field in text.split())


_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31, L or LW"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 or SUN-SAT, with L or #"),
)


def _parses(field: Field, text: str) -> bool:
    try:
        field.parse(text.upper())
    except (CronSimError, ValueError, IndexError):
        return False
    return True


def _why(message: str, fields: str) -> str:
    """cronsim's `Bad hour` as `bad hour field '25' (0-23, lists, ranges and /steps)`."""
    parts = fields.split()
    if message == "Bad day-of-month" and _parses(Field.DAY, parts[2]) and _parses(Field.MONTH, parts[3]):
        return f"day-of-month {parts[2]!r} never comes in month {parts[3]!r}: the job would never run"
    for index, (name, values) in enumerate(_FIELDS):
        if message == f"Bad {name}":
            return f"bad {name} field {fields.split()[index]!r} ({values}; lists, ranges and /steps)"
    return message[:1].lower() + message[1:] if message else "cannot be read"


def validate_cron(expr: str) -> str:
    """Check `expr` (module docstring); return it with spaces normalised and a macro in lower case.

    The text is kept as written (`0 9 * * MON-FRI` stays so, not numbers): it is what the
    user sees in `syncd jobs`. CronError (a ValueError) says what is wrong in one line.
    """
    if not isinstance(expr, str):
        raise CronError(f"a cron expression is text, got {type(expr).__name__}")
    text = " ".join(expr.split())
    fields = _fields(text)
    count = len(fields.split())
    if count != 5:
        raise CronError(
            f"cron expression must have 5 fields (minute hour day-of-month month day-of-week) "
            f"or be a macro such as @daily, got {count} in {expr!r}"
        )
    try:
        CronSim(fields, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError, IndexError) as exc:
        raise CronError(f"cron expression {text!r}: {_why(str(exc), fields)}") from None
    return text.lower() if text.startswith("@") else text


@lru_cache(maxsize=64)
def zone(name: str) -> tzinfo:
    """The time zone called `name` (an IANA name such as `Europe/Berlin`, or `UTC`).

    `UTC` is `datetime.UTC` itself: cronsim reads it without any DST handling, and faster.
    CronError for a name the time zone database does not know.
    """
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name!r}: give an IANA name such as Europe/Berlin, America/New_York or UTC") from None


def validate_timezone(name: str) -> str:
    """`name` when it names a time zone (`zone`), CronError otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise CronError("a time zone is an IANA name such as Europe/Berlin, America/New_York or UTC")
    zone(name.strip())
    return "UTC" if name.strip().upper() == "UTC" else name.strip()


def next_after(expr: str, after: datetime, tz: tzinfo = UTC) -> datetime:
    """The first time of `expr` (read in `tz`) strictly after the aware datetime `after`, in UTC.

    CronError when there is none within `YEARS_SEARCHED` years.
    """
    local = after.astimezone(tz)
    times = CronSim(_fields(expr), local)
    try:
        while True:
            found = next(times).astimezone(UTC)
            # A fixed time in a repeated hour: cronsim counts wall-clock time, so starting in the
            # second pass of the hour it would give the first pass again (already past).
            if found > after:
                return found
    except StopIteration:
        raise CronError(f"cron expression {expr!r} has no matching time within {YEARS_SEARCHED} years after {local.isoformat()}") from None
