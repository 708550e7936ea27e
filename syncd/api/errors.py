"""Typed errors of the API client: what failed, where, and whether it may have taken effect.

The hierarchy (httpx style, drawn once here)::

    SyncdError
     └── ApiError                 any failed API call; status None when there was no answer
          ├── AuthError           401 / 403: the token is wrong or lacks access
          ├── NotFound            404 (also what a token cannot see)
          ├── Conflict            409
          ├── RateLimited         429 (retried; raised when the budget is spent)
          ├── ServerError         5xx, JSON or HTML body
          ├── TransportError      no (complete) answer: refused, dropped, timed out
          ├── MalformedResponse   a 2xx whose body is not JSON or not of the expected shape
          ├── AnswerTooLarge      a 2xx body over `max_answer_bytes` (refused, not retried)
          └── PagingError         the server's paging loops (repeated token, page guard)

Why `may_have_applied`: the write side must know whether a failed POST can simply be
sent again or must first be reconciled against the target. It is True only for a write
that reached the server and got no clean refusal (dropped after sending, timed out, 5xx,
or a 2xx whose body was unreadable); GETs and 4xx answers are never "applied".

Every text that ends up in an error (server message, body excerpt, transport detail) is
passed through the log redactor first: a token never shows in `str`, `repr` or logs. It is
then cut to `MESSAGE_LIMIT` characters with a marker saying how much was cut: a server's
5 MB error message must not become a 5 MB run-stats entry, log line or terminal line.
"""

from __future__ import annotations

import html
import re

from syncd.errors import SyncdError
from syncd.logging import redact_text

__all__ = [
    "MESSAGE_LIMIT",
    "AnswerTooLarge",
    "ApiError",
    "AuthError",
    "Conflict",
    "MalformedResponse",
    "NotFound",
    "PagingError",
    "RateLimited",
    "ServerError",
    "TransportError",
    "clip",
    "excerpt",
    "format_bytes",
]

_TAG_RE = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.IGNORECASE | re.DOTALL)
_SPACE_RE = re.compile(r"\s+")
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_EXCERPT_CHARS = 160
_EXCERPT_INPUT = 16 * 1024
MESSAGE_LIMIT = 2000
"""Characters of an error's message that are kept (a few KB): enough for any real message."""
_REDACT_WINDOW = 64 * 1024
"""Text redacted before it is cut: far past MESSAGE_LIMIT (a secret across the cut is masked
whole), and bounded, so a huge message costs no more than this to clean."""


def excerpt(raw: bytes | bytearray | str, limit: int = _EXCERPT_CHARS) -> str:
    """A short, one-line, secret-free rendering of an unparsable body.

    An HTML page (a proxy's error page) is reduced to its title, or its text without tags.
    """
    raw = raw[:_EXCERPT_INPUT]  # the start says what it is; the rest would only cost time
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes | bytearray) else raw
    title = _TITLE_RE.search(text)
    if title and title.group(1).strip():
        text = "HTML page: " + title.group(1)
    elif "<" in text and ">" in text:
        text = html.unescape(_TAG_RE.sub(" ", text))
    text = _SPACE_RE.sub(" ", text).strip()
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return redact_text(text) or "(empty body)"


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` cut to about `limit` characters, with a marker saying how many were cut."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[:limit].rstrip()} [{cut} more character{'s' if cut != 1 else ''} cut]"


def format_bytes(count: int) -> str:
    """A byte count as people write it: 64 MiB, 1.5 KiB, 300 bytes."""
    if count < 1024:
        return f"{count} bytes"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f}".rstrip("0").rstrip(".") + f" {unit}"


def _clean(text: str) -> str:
    """One line, secrets masked, at most MESSAGE_LIMIT characters (plus the marker)."""
    total = len(text)
    if total <= _REDACT_WINDOW:
        return clip(redact_text(_SPACE_RE.sub(" ", text).strip()))
    head = redact_text(_SPACE_RE.sub(" ", text[:_REDACT_WINDOW]).strip())[:MESSAGE_LIMIT].rstrip()
    return f"{head} [{total - len(head)} more characters cut]"


class ApiError(SyncdError):
    """A failed API call. `str()` is one line: tenant, method, path, status and message."""

    retryable: bool = False
    """Whether the failure is transient (another attempt may succeed)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: int | str | None = None,
        method: str = "",
        path: str = "",
        tenant: str | None = None,
        may_have_applied: bool = False,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        self.message = _clean(message)
        self.status = status
        self.code = code
        self.method = method.upper()
        self.path = redact_text(path.split("?", 1)[0])
        self.tenant = tenant
        self.may_have_applied = may_have_applied
        self.retry_after = retry_after
        self.attempts = attempts
        super().__init__(self.message)

    def hint(self) -> str:
        """What the user can do about it; empty when there is nothing useful to say."""
        return ""

    def __str__(self) -> str:
        where = " ".join(part for part in (self.method, self.path) if part)
        head = f"{self.tenant}: {where}" if self.tenant else where
        what = f"{self.status} {self.message}" if self.status is not None else self.message
        text = f"{head}: {what}" if head else what
        if self.attempts > 1:
            text += f" (gave up after {self.attempts} attempts)"
        if self.may_have_applied:
            text += " (the call may have taken effect)"
        hint = self.hint()
        return f"{text}; {hint}" if hint else text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"method={self.method!r}, path={self.path!r}, message={self.message!r}, "
            f"may_have_applied={self.may_have_applied!r})"
        )

    def __reduce__(self):  # type: ignore[no-untyped-def]
        """Picklable (process pools, multiprocessing logs) without keeping any request state."""
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: type[ApiError], state: dict[str, object]) -> ApiError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, state.get("message", ""))
    return error


class AuthError(ApiError):
    """401 or 403: the token is invalid, expired, or lacks access to this resource."""

    def hint(self) -> str:
        if self.status == 401:
            return "check the tenant's token (syncd config check shows where it comes from)"
        return "the token lacks access to this resource"


class NotFound(ApiError):
    """404: the resource does not exist, or this token cannot see it."""


class Conflict(ApiError):
    """409: the call conflicts with the resource's current state."""


class RateLimited(ApiError):
    """429: the server refused the call (it did not process it); `retry_after` in seconds."""

    retryable = True

    def hint(self) -> str:
        return "lower the tenant's concurrency or try again later"


class ServerError(ApiError):
    """5xx: the server (or a proxy in front of it) failed."""

    retryable = True

    def __init__(self, message: str, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        # 501 and 505 are answers about the request itself: another attempt changes nothing.
        self.retryable = self.status not in (501, 505)


class TransportError(ApiError):
    """No complete answer: connection refused or dropped, timeout, body cut short."""

    retryable = True

    def __init__(self, message: str, *, sent: bool = True, base_url: str | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.sent = sent
        """False when the request certainly never reached the server (connect failed)."""
        self.base_url = base_url
        """The server's URL, when known: what to check when nothing answers there."""

    def hint(self) -> str:
        if self.sent or not self.base_url:
            return ""
        setting = f" and that tenants.{self.tenant}.base_url is right" if self.tenant else ""
        return f"check that the server at {self.base_url} is running{setting}"


class MalformedResponse(ApiError):
    """A 2xx answer whose body is not JSON, is cut short, or is not of the expected shape."""

    retryable = True


class AnswerTooLarge(ApiError):
    """A 2xx answer longer than the client's `max_answer_bytes`: refused while reading (or
    from its Content-Length, before reading). Not retried: the same call gets the same
    answer, and each attempt would cost the whole cap in traffic again. For a write it may
    have taken effect (the server answered 2xx)."""

    def hint(self) -> str:
        return "raise max_answer_bytes if such an answer is expected"


class PagingError(ApiError):
    """The server's paging would loop forever (a repeated page token, or the page guard)."""

    def hint(self) -> str:
        return "the listing is incomplete and was stopped"
