"""Request parsing, validation and answers shared by every route family.

Validation follows the spec's documented limits, enums and patterns; every failure is a
400 with a message naming the field, as a client needs to fix its call.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from syncd.emulator.errors import bad_request
from syncd.emulator.profile import profile_of, unordered
from syncd.emulator.store import ROLES, Record, Store
from syncd.ordering import PositionError, parse_position

MAX_LIMIT_DEFAULT = 1000
ADMIN_PREFIX = "/_emulator"
"""Where the admin routes live, outside `/v1`: the admin module's and the families' own
(e.g. adding pages without a revision round trip) share it."""

STORE: web.AppKey[Store] = web.AppKey("store", Store)


@dataclass
class ServerCaps:
    """Server-side limits that tests change at run time (the app's state is frozen once started).

    Both start from the app's profile; the admin routes `page-cap` and `page-tokens` change them."""

    page_cap: int = MAX_LIMIT_DEFAULT
    page_token_ttl: float | None = None
    """Seconds a page token stays valid, measured on the monotonic clock; None: forever."""


CAPS: web.AppKey[ServerCaps] = web.AppKey("caps", ServerCaps)
USER_ID: web.RequestKey[str] = web.RequestKey("user_id", str)
FAULT_STATUS: web.RequestKey[str] = web.RequestKey("fault_status", str)
MAX_LIMIT = 1000
DEFAULT_LIMIT = 50

_MISSING = object()


def store_of(request: web.Request) -> Store:
    return request.app[STORE]


def user_of(request: web.Request) -> str:
    """Id of the authenticated user (set by the auth middleware)."""
    return request[USER_ID]


def base_url(request: web.Request) -> str:
    return str(request.url.origin())


ANSWER_DATA: web.ResponseKey[Any] = web.ResponseKey("answer_data", Any)  # type: ignore[arg-type]
"""The object a JSON answer was encoded from (a key of the response): the profile's reshaping
(`app.shape_middleware`) reads it there instead of decoding the body it was just encoded into."""


def json_answer(data: Any, status: int = 200) -> web.Response:
    response = web.Response(
        status=status,
        body=json.dumps(data, separators=(",", ":")).encode(),
        content_type="application/json",
    )
    response[ANSWER_DATA] = data
    return response


def no_content() -> web.Response:
    return web.Response(status=204)


async def json_body(request: web.Request, required: bool = True) -> dict[str, Any]:
    """The request's JSON object; an empty body is `{}` when the body is optional."""
    raw = await request.read()
    if not raw.strip():
        if required:
            raise bad_request("request body: a JSON object is required")
        return {}
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(f"request body: invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise bad_request("request body: must be a JSON object")
    return data


# ----- field validation -----------------------------------------------------------------


def _given(body: dict[str, Any], name: str, required: bool) -> bool:
    """Whether a field was sent; a missing required field is a 400 naming it."""
    if name in body:
        return True
    if required:
        raise bad_request(f"{name}: is required")
    return False


def text(
    body: dict[str, Any],
    name: str,
    *,
    required: bool = False,
    min_len: int = 0,
    max_len: int | None = None,
    pattern: str | None = None,
    nullable: bool = False,
    default: Any = _MISSING,
) -> Any:
    """A string field checked against the spec's bounds; returns `default` when absent."""
    if not _given(body, name, required):
        return None if default is _MISSING else default
    value = body[name]
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise bad_request(f"{name}: must be a string")
    if len(value) < min_len:
        raise bad_request(f"{name}: must be at least {min_len} characters")
    if max_len is not None and len(value) > max_len:
        raise bad_request(f"{name}: must be at most {max_len} characters")
    if pattern is not None and not re.fullmatch(pattern, value):
        raise bad_request(f"{name}: does not match the pattern {pattern}")
    return value


def url_field(body: dict[str, Any], name: str, max_len: int = 2048, *, required: bool = False, allow_empty: bool = False) -> str | None:
    """An absolute http(s) URL (format `uri`); `allow_empty` lets "" clear an optional URL."""
    value = text(body, name, required=required, max_len=max_len)
    if value is None or (allow_empty and value == ""):
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or " " in value:
        raise bad_request(f"{name}: must be an absolute http(s) URL")
    return value


def choice(
    body: dict[str, Any],
    name: str,
    allowed: Sequence[str],
    *,
    required: bool = False,
    nullable: bool = False,
    default: Any = _MISSING,
) -> Any:
    if not _given(body, name, required):
        return None if default is _MISSING else default
    value = body[name]
    if value is None and nullable:
        return None
    if value not in allowed:
        raise bad_request(f"{name}: must be one of {', '.join(allowed)}")
    return value


def role(body: dict[str, Any], name: str, *, required: bool = False, nullable: bool = False) -> Any:
    return choice(body, name, ROLES, required=required, nullable=nullable)


def boolean(body: dict[str, Any], name: str, *, required: bool = False) -> bool | None:
    if not _given(body, name, required):
        return None
    value = body[name]
    if not isinstance(value, bool):
        raise bad_request(f"{name}: must be a boolean")
    return value


def string_list(
    body: dict[str, Any],
    name: str,
    *,
    required: bool = False,
    min_items: int = 0,
    max_items: int | None = None,
    item_max_len: int | None = None,
) -> list[str] | None:
    if not _given(body, name, required):
        return None
    value = body[name]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request(f"{name}: must be an array of strings")
    if len(value) < min_items:
        raise bad_request(f"{name}: must have at least {min_items} items")
    if max_items is not None and len(value) > max_items:
        raise bad_request(f"{name}: must have at most {max_items} items")
    if item_max_len is not None and any(len(v) > item_max_len for v in value):
        raise bad_request(f"{name}: items must be at most {item_max_len} characters")
    return value


def obj(body: dict[str, Any], name: str, *, required: bool = False, nullable: bool = False) -> Any:
    if not _given(body, name, required):
        return None
    value = body[name]
    if value is None and nullable:
        return None
    if not isinstance(value, dict):
        raise bad_request(f"{name}: must be an object")
    return value


def query_bool(request: web.Request, name: str, default: bool | None = None) -> bool | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise bad_request(f"{name}: must be true or false")


def query_choice(request: web.Request, name: str, allowed: Sequence[str], default: str | None = None) -> str | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    if raw not in allowed:
        raise bad_request(f"{name}: must be one of {', '.join(allowed)}")
    return raw


def query_text(request: web.Request, name: str, *, required: bool = False, max_len: int | None = None) -> str | None:
    raw = request.query.get(name)
    if raw is None:
        if required:
            raise bad_request(f"{name}: query parameter is required")
        return None
    if max_len is not None and len(raw) > max_len:
        raise bad_request(f"{name}: must be at most {max_len} characters")
    return raw


def position(body: dict[str, Any], ref_type: str | tuple[str, ...], ref_key: str) -> tuple[str | None, str | None]:
    """(before, after) sibling ids of a move body's `position`; (None, None) moves to the end.

    `ref_type` is the reference type the spec documents, or several accepted spellings.
    """
    types = (ref_type,) if isinstance(ref_type, str) else ref_type
    try:
        return parse_position(obj(body, "position", nullable=True), types, ref_key)
    except PositionError as exc:
        raise bad_request(str(exc)) from None


# ----- paging ---------------------------------------------------------------------------


PAGE_EXPIRED = "page: the page token has expired; list again from the first page"
token_clock: Callable[[], float] = time.monotonic
"""The clock page tokens are stamped and aged with: real time (tests may move it on), plus
what `POST /_emulator/clock` added (`_page_clock`)."""


def _page_clock(request: web.Request) -> float:
    return token_clock() + store_of(request).clock_offset()


def _encode_page(offset: int, scope: str, now: float | None = None) -> str:
    """An opaque token: the offset, the list it belongs to, and when it was issued (monotonic
    seconds, so that a token's age is real time, plus any advance of the emulator's clock,
    whatever the store's frozen or generated timestamps say)."""
    issued = token_clock() if now is None else now
    raw = json.dumps([offset, scope, round(issued, 3)], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_page(token: str, scope: str, ttl: float | None, now: float | None = None) -> int:
    try:
        padded = token + "=" * (-len(token) % 4)
        offset, token_scope, *rest = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise bad_request("page: invalid page token") from None
    if token_scope != scope or not isinstance(offset, int) or offset < 0:
        raise bad_request("page: the page token does not belong to this list")
    issued = rest[0] if rest and isinstance(rest[0], (int, float)) else None
    if ttl is not None and issued is not None and (token_clock() if now is None else now) - issued > ttl:
        raise bad_request(PAGE_EXPIRED)
    return offset


def page_window(request: web.Request) -> tuple[int, int]:
    """(offset, size) from `page` and `limit`, with the emulator's server-side cap applied."""
    raw_limit = request.query.get("limit")
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        try:
            limit = int(float(raw_limit))
        except ValueError:
            raise bad_request("limit: must be a number") from None
        if limit < 1 or limit > MAX_LIMIT:
            raise bad_request(f"limit: must be between 1 and {MAX_LIMIT}")
    caps = request.app[CAPS]
    token = request.query.get("page")
    offset = _decode_page(token, request.path, caps.page_token_ttl, _page_clock(request)) if token else 0
    return offset, min(limit, caps.page_cap)


def list_answer(
    request: web.Request,
    records: Sequence[Record] | Iterable[Record],
    render: Callable[[Record], Any],
    extra: dict[str, Any] | None = None,
    label: Callable[[Record], Any] | None = None,
) -> web.Response:
    """The list envelope over `records`: `next.page` only while more items follow.

    `label` marks a list whose order the spec leaves open: the profile may sort it by label."""
    items = records if isinstance(records, Sequence) else list(records)
    if label is not None:
        items = unordered(profile_of(request), items, label)
    offset, size = page_window(request)
    window = items[offset : offset + size]
    data: dict[str, Any] = {"items": [render(r) for r in window], "count": len(items)}
    if offset + size < len(items):
        data["next"] = {"page": _encode_page(offset + size, request.path, _page_clock(request))}
    if extra:
        data.update(extra)
    return json_answer(data)


def strip_none(data: dict[str, Any]) -> dict[str, Any]:
    """Drop absent optional fields: the service omits them rather than sending null."""
    return {k: v for k, v in data.items() if v is not None}
