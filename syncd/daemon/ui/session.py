"""The page's login cookie and CSRF tokens: derived from the control token, kept by nobody.

Why derived, not stored: replicas of a fleet share the control token and nothing in memory,
so any replica must accept a cookie another one made; and the cookie is not the token itself,
so a cookie that leaks (a browser profile, a proxy's log) expires and cannot call the JSON API.
A session is `ISSUED.SIGNATURE`, an HMAC of its time under the token; its CSRF token is an HMAC
of the session. Changing `daemon.token` ends every session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

__all__ = ["SESSION_SECONDS", "csrf_token", "login_nonce", "make_session", "session_valid", "same_secret"]

SESSION_SECONDS = 12 * 3600
"""How long a login lasts: a working day, then the token is asked for again."""
_SESSION = re.compile(r"([0-9]{1,12})\.([A-Za-z0-9_-]{43})")


def _mac(token: str, purpose: str, value: str) -> str:
    digest = hmac.new(token.encode(), f"syncd-ui:{purpose}:{value}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_session(token: str, now: float) -> str:
    """A session cookie's value, made at `now` (seconds since the epoch)."""
    issued = str(int(now))
    return f"{issued}.{_mac(token, 'session', issued)}"


def session_valid(cookie: str | None, token: str, now: float) -> bool:
    """Whether `cookie` was made under `token` and has not expired (nor comes from the future)."""
    match = _SESSION.fullmatch(cookie or "")
    if match is None:
        return False
    issued = int(match.group(1))
    if not issued - 60 <= now <= issued + SESSION_SECONDS:
        return False
    return hmac.compare_digest(match.group(2), _mac(token, "session", match.group(1)))


def csrf_token(session: str, token: str) -> str:
    """The token every form of this session carries; a page of another site cannot know it."""
    return _mac(token, "csrf", session)


def login_nonce() -> str:
    """The login form's CSRF value (also set as a cookie: the POST must bring both, equal)."""
    return secrets.token_urlsafe(32)


def same_secret(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())
