"""What a failed attempt becomes: the typed error (`syncd.api.errors`) of a transport failure
or of a non-2xx answer, its message scrubbed of the token and cut, its retry hint read.

Kept apart from the client's request path: these run only when something went wrong, and
say in one place which failures may have taken effect (`may_have_applied`) and which were
certainly never sent (a refused connection: retried even for a POST).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import aiohttp

from syncd.api.answers import error_body, is_blank
from syncd.api.errors import (
    _REDACT_WINDOW,
    ApiError,
    AuthError,
    Conflict,
    NotFound,
    RateLimited,
    ServerError,
    TransportError,
    excerpt,
    format_bytes,
)
from syncd.api.pacing import parse_rate_headers

MAX_REDIRECTS = 5
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_STATUS_ERRORS: dict[int, type[ApiError]] = {401: AuthError, 403: AuthError, 404: NotFound, 409: Conflict, 429: RateLimited}

Scrub = Callable[[str], str]


def transport_error(
    exc: BaseException, *, method: str, path: str, tenant: str, timeout: float, scrub: Scrub, base_url: str | None = None
) -> ApiError:
    """The error of an aiohttp or timeout exception; the original is dropped (it may hold
    headers). A TransportError unless the redirects were wrong (an ApiError, not retried);
    `base_url`, the server's, is what to check when it could not be connected to."""
    detail = scrub(str(exc).strip())
    if isinstance(exc, aiohttp.TooManyRedirects):
        return ApiError(f"more than {MAX_REDIRECTS} redirects", method=method, path=path, tenant=tenant)
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.RedirectClientError):
        return ApiError(f"invalid redirect: {detail}", method=method, path=path, tenant=tenant)
    sent = not isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)
    if isinstance(exc, TimeoutError):
        what = f"timed out: no complete answer within {timeout:g}s (request_timeout)" + (f" ({detail})" if detail else "")
    elif isinstance(exc, aiohttp.ClientPayloadError):
        what = f"answer cut short ({detail or type(exc).__name__})"
    elif isinstance(exc, aiohttp.ServerDisconnectedError):
        what = "connection dropped before the answer"
    elif isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, ConnectionRefusedError):
        what = f"connection refused by {exc.host}:{exc.port}"
    else:
        what = f"connection failed: {type(exc).__name__}" + (f": {detail}" if detail else "")
    return TransportError(
        what, sent=sent, base_url=base_url, method=method, path=path, tenant=tenant, may_have_applied=sent and method not in READ_METHODS
    )


def status_error(
    status: int,
    raw: bytes | bytearray,
    headers: Mapping[str, str],
    *,
    method: str,
    path: str,
    tenant: str,
    scrub: Scrub,
    cut_at: int | None = None,
) -> ApiError:
    """The error of a non-2xx answer. Of a body longer than `cut_at` (not read past it)
    the start of its message is kept (cut with a marker by ApiError), or of its text."""
    code, message = error_body(raw, complete=cut_at is None)
    if message is not None and cut_at is not None:
        message += f" [error body over {format_bytes(cut_at)}: cut]"
    elif message is None:
        message = excerpt(raw) if not is_blank(raw) else f"HTTP {status} with an empty body"
        if cut_at is not None:
            message += f" [error body over {format_bytes(cut_at)}: cut]"
    # Only the start can be kept (ApiError cuts the message): scrub no more than that.
    message = scrub(message[:_REDACT_WINDOW]) + message[_REDACT_WINDOW:]
    info = parse_rate_headers(headers)
    retry_after = info.retry_after
    if status == 429 and retry_after is None and info.reset is not None:
        retry_after = max(0.0, info.reset - time.time())
    cls = _STATUS_ERRORS.get(status) or (ServerError if status >= 500 else ApiError)
    return cls(
        message,
        status=status,
        code=code,
        method=method,
        path=path,
        tenant=tenant,
        may_have_applied=status >= 500 and method not in READ_METHODS,
        retry_after=retry_after,
    )
