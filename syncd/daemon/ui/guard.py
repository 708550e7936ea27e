"""What every request of the page passes, beyond the control API's Host and Origin check.

1. Every answer carries a strict Content-Security-Policy (scripts and styles only from the
   daemon's own files: nothing inline), `X-Frame-Options: DENY`, `nosniff`, no referrer to other sites and
   no caching: a page of the daemon is never framed, never caches a run's error in a proxy.
2. Every page but the login form and the static files needs the session cookie
   (`syncd.daemon.ui.session`): a browser is sent to the login form, a live refresh gets 401.
3. Every POST comes from the page itself: `Sec-Fetch-Site`, when the browser sends it, says
   `same-origin`; `Origin`, when sent, is this very origin (`daemon.public_url`'s behind a
   proxy: `syncd.daemon.ui.address`); and the form carries the CSRF token
   of the session (the login form: the nonce of its cookie). Else 403, nothing done.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from aiohttp import web

from syncd.daemon.ui.address import address_of
from syncd.daemon.ui.render import page
from syncd.daemon.ui.session import csrf_token, same_secret, session_valid

__all__ = ["COOKIE", "CSP", "DAEMON", "LOGIN_COOKIE", "Session", "guard", "needs_session", "session_of"]

COOKIE = "syncd_ui"
LOGIN_COOKIE = "syncd_ui_login"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes the browser send `Origin: null` with the page's own forms
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
SESSION: web.RequestKey[Session] = web.RequestKey("ui_session", object)  # type: ignore[arg-type]
DAEMON: web.AppKey[Any] = web.AppKey("ui_daemon", object)
"""The daemon the page shows (`syncd.daemon.control.ControlledDaemon`)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Session:
    """The logged-in browser: its cookie and the CSRF token its forms carry."""

    def __init__(self, cookie: str, csrf: str) -> None:
        self.cookie = cookie
        self.csrf = csrf


def session_of(request: web.Request) -> Session:
    return request[SESSION]


def _token(request: web.Request) -> str:
    return str(request.config_dict[DAEMON].control_token.get_secret_value())


def _cross_site(request: web.Request) -> str | None:
    """Why a POST does not come from this page, or None."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return f"a {fetch_site} request may not change anything here"
    origin = request.headers.get("Origin")  # "null" (a sandboxed or privacy-stripped page) too
    expected = address_of(request.config_dict[DAEMON]).expected_origin(request)
    if origin is not None and origin.rstrip("/").lower() != expected.lower():
        return "the form was not sent by this page"
    return None


def _root(request: web.Request) -> str:
    return address_of(request.config_dict[DAEMON]).root


def _refused(request: web.Request, status: int, message: str) -> web.Response:
    return page("error.html", status=status, title="Refused", message=message, session=None, ui=_root(request))


def needs_session(path: str) -> bool:
    """Whether a page at `path` needs the session cookie: all but the login form and the static files."""
    return not (path == "/ui/login" or path.startswith("/ui/static/"))


async def _checked(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not needs_session(request.path):
        if request.method == "POST":
            reason = _cross_site(request)
            form = await request.post()
            nonce = request.cookies.get(LOGIN_COOKIE)
            if reason is None and (nonce is None or not same_secret(_text(form.get("csrf")), nonce)):
                reason = "the login form expired: load it again"
            if reason is not None:
                return _refused(request, 403, reason)
        return await handler(request)
    token = _token(request)
    cookie = request.cookies.get(COOKIE)
    if cookie is None or not session_valid(cookie, token, time.time()):
        if request.method == "GET" and "part" not in request.query:
            raise web.HTTPSeeOther(f"{_root(request)}login?next={_next(request)}")
        return _refused(request, 401, "log in first (the session expired or was never opened)")
    request[SESSION] = Session(cookie, csrf_token(cookie, token))
    if request.method not in ("GET", "HEAD"):
        reason = _cross_site(request)
        if reason is None:
            form = await request.post()
            if not same_secret(_text(form.get("csrf")), request[SESSION].csrf):
                reason = "the form carries no valid CSRF token: reload the page and try again"
        if reason is not None:
            return _refused(request, 403, reason)
    return await handler(request)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _next(request: web.Request) -> str:
    return quote(request.path_qs, safe="")


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await _checked(request, handler)
    except web.HTTPException as exc:
        if exc.status >= 400:
            response = page(
                "error.html", status=exc.status, title=exc.reason, message=exc.text or exc.reason, session=request.get(SESSION), ui=_root(request)
            )  # fmt: skip
        else:  # a redirect
            response = web.Response(status=exc.status, headers={"Location": exc.headers.get("Location", "/ui/")})
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response
