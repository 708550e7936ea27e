"""The line said on stderr before a retry: `retry 3/7 in 4.0 s: GET /v1/orgs: 503 ...`.

Why a module of its own: the line is made of the server's text, so it is where that text is
made safe to print (one line, cut, no control characters, no token); the client only decides
when to say it (`TenantClient._before_sleep`).
"""

from __future__ import annotations

from syncd.api.errors import ApiError
from syncd.logging import redact_text
from syncd.safe_text import one_line

__all__ = ["retry_notice"]


def _seconds(wait: float) -> str:
    return f"{wait:.1f} s" if wait < 10 else f"{wait:.0f} s"


def retry_notice(retry: int, retries: int, wait: float, error: BaseException | None) -> str:
    """`retry 3/7 in 4.0 s: GET /v1/orgs: connection refused by 127.0.0.1:8790`: one line, the
    server's text through `safe_text.one_line` (cut, no control characters), no token."""
    if isinstance(error, ApiError):
        where = " ".join(part for part in (error.method, error.path) if part)
        what = f"{error.status} {error.message}" if error.status is not None else error.message
        reason = f"{where}: {what}" if where else what
    else:
        reason = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
    return f"retry {retry}/{retries} in {_seconds(wait)}: {redact_text(one_line(reason))[:300]}"
