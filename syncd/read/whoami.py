"""Whose token is it: each configured tenant's token tried against its server.

`syncd config check --online` asks every tenant's server for the user its token belongs to
(`GET /v1/user`, the OpenAPI document's `getAuthenticatedUser`), so a wrong token (401), a
token of another person, or a server that cannot be reached shows before a daemon runs with
it. A check is a quick probe, not a crawl: two attempts, a short wait between them, and a
deadline of at most `CHECK_TIMEOUT` seconds per attempt. Error lines are the client's (one
line, no token: the client never puts it in an error) and pass through the log redaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from syncd.api import ApiError, TenantClient, make_global_limiter
from syncd.config import RetryConfig, Settings
from syncd.errors import SyncdError
from syncd.logging import redact_text
from syncd.one_shot import window
from syncd.safe_text import one_line

__all__ = ["CHECK_RETRY", "CHECK_TIMEOUT", "USER_PATH", "TokenCheck", "check_tokens"]

USER_PATH = "/v1/user"
CHECK_RETRY = RetryConfig(max_attempts=2, initial_wait=0.5, max_wait=1.0)
CHECK_TIMEOUT = 10.0


@dataclass
class TokenCheck:
    """One tenant's answer: the user its token belongs to, or the one-line error."""

    tenant: str
    base_url: str
    user: dict[str, Any] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def who(self) -> str:
        """`Display Name <email>`, or what of it the server gave."""
        user = self.user or {}
        name, email = user.get("displayName"), user.get("email")
        text = str(name) if name else f"user {user.get('id', '?')}"
        return f"{text} <{email}>" if email else text

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "base_url": self.base_url, "user": self.user, "error": self.error}


def _user(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
        raise ValueError("the answer to GET /v1/user is not a user")
    return {key: answer[key] for key in ("id", "displayName", "email") if isinstance(answer.get(key), str)}


async def _check(settings: Settings, name: str, limiter: anyio.CapacityLimiter) -> TokenCheck:
    tenant = settings.tenant(name)
    found = TokenCheck(name, tenant.base_url)
    try:
        with window(None):  # its own two quick attempts: no one-shot window to announce (`syncd.one_shot`)
            client = TenantClient.from_settings(settings, name, limiter)
        async with client:
            found.user = _user(await client.get_json(USER_PATH))
    except (ApiError, SyncdError, ValueError) as exc:
        found.error = redact_text(one_line(str(exc)))
    return found


async def check_tokens(settings: Settings) -> list[TokenCheck]:
    """Every tenant's token tried, side by side, by tenant name."""
    quick = settings.model_copy(update={"retry": CHECK_RETRY, "request_timeout": min(settings.request_timeout, CHECK_TIMEOUT)})
    limiter = make_global_limiter(quick)
    names = sorted(settings.tenants)
    results: list[TokenCheck] = [TokenCheck(name, settings.tenant(name).base_url) for name in names]

    async def one(index: int) -> None:
        results[index] = await _check(quick, names[index], limiter)

    async with anyio.create_task_group() as tg:
        for index in range(len(names)):
            tg.start_soon(one, index)
    return results
