"""Reading and parsing API answers' bodies: bounded reads, JSON that cannot blow the stack,
and the documented error body `{"error": {"code", "message"}}`, whole or cut short.

Why apart from the client: these are pure functions of bytes (and one bounded read), tested
on their own against hostile input (tests/hostile/), while the client is about attempts.
"""

from __future__ import annotations

import json as jsonlib
import re
from typing import Any

import aiohttp

from syncd.api.errors import _REDACT_WINDOW

__all__ = ["error_body", "is_blank", "loads", "read_capped"]


def is_blank(raw: bytes | bytearray) -> bool:
    """Empty or white space only (without copying a large body, as `strip()` would)."""
    return not raw or raw.isspace()


def loads(raw: bytes | bytearray) -> Any:
    """`json.loads`, with nesting too deep for the parser as a ValueError (not a RecursionError)."""
    try:
        return jsonlib.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


_MESSAGE_START = re.compile(rb'"message"\s*:\s*"')
_STRING_BODY = re.compile(rb'(?:[^"\\]|\\.)*')


def _message_start(raw: bytes | bytearray) -> str | None:
    """The start of the `message` string of an error body cut short (not parsable whole)."""
    found = _MESSAGE_START.search(raw, 0, _REDACT_WINDOW)
    if found is None:
        return None
    window = bytes(raw[found.end() : found.end() + _REDACT_WINDOW])
    body = _STRING_BODY.match(window)
    text = body.group(0) if body else b""
    for trim in range(7):  # an escape cut in the middle (`\u12`) is dropped
        try:
            value = jsonlib.loads(b'"' + text[: len(text) - trim] + b'"')
        except ValueError:
            continue
        return value if isinstance(value, str) and value.strip() else None
    return None


def error_body(raw: bytes | bytearray, complete: bool = True) -> tuple[int | str | None, str | None]:
    """(code, message) of the documented error body `{"error": {"code", "message"}}`; of a
    body cut short (`complete=False`), the start of its message if it has one."""
    if not complete:
        return None, _message_start(raw)
    try:
        data = loads(raw)
    except ValueError:
        return None, None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None, None
    code = error.get("code")
    message = error.get("message")
    return (
        code if isinstance(code, int | str) and not isinstance(code, bool) else None,
        message if isinstance(message, str) and message.strip() else None,
    )


async def read_capped(resp: aiohttp.ClientResponse, cap: int, *, refuse_declared: bool = True) -> tuple[bytearray, bool]:
    """(body, True) when the body is at most `cap` bytes; else (its first bytes, at most
    `cap`, False), and the connection is closed: the rest is never read. A Content-Length over
    the cap is refused before reading (unless `refuse_declared` is False: then the start is
    read); without one, bytes are counted as they come."""
    declared = resp.content_length
    if refuse_declared and declared is not None and declared > cap:
        resp.close()
        return bytearray(), False
    body = bytearray()
    async for chunk in resp.content.iter_any():
        if len(body) + len(chunk) > cap:
            body += chunk[: cap - len(body)]
            resp.close()
            return body, False
        body += chunk
    return body, True
