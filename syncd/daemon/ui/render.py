"""Templates of the page (Jinja2, autoescaped) and the filters they use.

Why one environment with autoescape for every template: names, titles and messages come from
organizations, plan files and errors; escaping them is the template engine's job, everywhere,
not each template's. `StrictUndefined`: a misspelt name fails the test that renders it instead
of showing an empty cell.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined

from syncd.daemon.run_history import TIME_FORMAT, shown_utc

__all__ = ["ago", "duration", "page", "render", "when"]


def _parse(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def ago(value: str | datetime | None, now: datetime | None = None) -> str:
    """`3 min ago`, `in 2 h`: how far a time is from now, in the largest whole unit."""
    moment = _parse(value)
    if moment is None:
        return ""
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            amount = f"{int(seconds // size)} {unit}"
            break
    else:
        amount = f"{int(seconds)} s"
    return f"in {amount}" if future else f"{amount} ago"


def when(value: str | datetime | None, zone: str | None = "UTC") -> str:
    """A time as every page shows one: `2026-11-28 12:05:09 UTC`, and where the job has a
    time zone of its own the same moment there too: `2026-11-28 12:05:09 UTC (2026-11-28
    13:05:09 Europe/Berlin)`. The one format of the page (an unknown zone is left out)."""
    moment = _parse(value)
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # the daemon's times are UTC
    text = shown_utc(moment)
    if zone and zone != "UTC":
        try:
            local = moment.astimezone(ZoneInfo(zone)).strftime(TIME_FORMAT)
        except (ZoneInfoNotFoundError, ValueError):
            return text
        text += f" ({local} {zone})"
    return text


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


_ENV = Environment(
    loader=PackageLoader("syncd.daemon.ui", "templates"), autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True
)
_ENV.filters.update(ago=ago, when=when, duration=duration)
_ENV.globals["ui"] = "/ui/"  # where the page's URLs start; behind a proxy the pages pass `/PREFIX/ui/`


def render(template: str, **values: Any) -> str:
    return _ENV.get_template(template).render(**values)


def page(template: str, *, status: int = 200, **values: Any) -> web.Response:
    """An HTML answer; the security headers are added by the page's middleware."""
    return web.Response(text=render(template, **values), status=status, content_type="text/html", charset="utf-8")
