"""The control API's reference page, read from the daemon's aiohttp application: every route
of the JSON API and of the web page mounted under `/ui/`, its method, path, what it needs
(the bearer token, the page's session, nothing) and its handler's docstring.

The application is built as `syncd serve` builds it (`create_control_app`), for a daemon that
is never asked anything: building it only records the routes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from aiohttp import web

from syncd.daemon.control import OPEN_PATHS, create_control_app
from syncd.daemon.ui.guard import needs_session
from syncd.reference.markdown import code, paragraphs

__all__ = ["RouteDoc", "routes", "routes_reference"]

UI_PREFIX = "/ui"
STATIC_HELP = "The page's stylesheet, script and icons (the files of `syncd/daemon/ui/static`)."

INTRO = """\
`syncd serve` answers on `daemon.host`:`daemon.port` (default `127.0.0.1:8790`). This page is
generated from the daemon's application when the site is built: every route it has.

Every request passes three checks, in this order, so that neither the network nor a web page in
the operator's browser can use the API:

1. `Host` names this daemon (localhost, 127.0.0.1, [::1], the address it listens on, the host of
   `daemon.public_url`, or a name of `daemon.allowed_hosts`; any port), and `Origin`, when sent,
   is such a host: else 403.
2. Every route of the JSON API but `/healthz` needs `Authorization: Bearer TOKEN`: `daemon.token`,
   or the token the daemon made at start when none is configured (`token` in `daemon.json` in its
   state_dir, mode 0600): else 401. Wrong tokens are slowed per client address: 429 with
   `Retry-After`.
3. A request that changes something (any method but GET and HEAD) says
   `Content-Type: application/json`: else 415.

Every answer of the JSON API is JSON except `/metrics`; an error is
`{"error": {"code": STATUS, "message": "..."}}`. Every GET route also answers HEAD.
"""

UI_INTRO = """\
The web page (`daemon.ui = true`, the default; with `false` these paths answer 404) passes the
first check only. It has its own login: the same token, entered once into its form, opens a
session (a cookie). Every page but the login form and the static files needs the session: a
browser without one is sent to the login form. Every POST comes from the page's own forms,
which carry a CSRF token of the session. `/ui` redirects to `/ui/`; behind a TLS proxy
(`daemon.public_url`) every address of the page is under the proxy's path prefix.
"""


@dataclass(frozen=True)
class RouteDoc:
    """One route: its method, its path as the daemon answers it, what it needs, its description."""

    method: str
    path: str
    needs: str
    description: str

    @property
    def is_page(self) -> bool:
        return self.path == UI_PREFIX or self.path.startswith(UI_PREFIX + "/")


def _needs(path: str) -> str:
    if path == UI_PREFIX or path.startswith(UI_PREFIX + "/"):
        return "the page's session" if needs_session(path) else "nothing (part of the login)"
    return "nothing" if path in OPEN_PATHS else "the bearer token"


def _walk(app: web.Application) -> list[RouteDoc]:
    found: list[RouteDoc] = []
    for resource in app.router.resources():
        info = resource.get_info()
        if isinstance(resource, web.PrefixedSubAppResource):
            found += _walk(info["app"])
            continue
        if isinstance(resource, web.StaticResource):
            path = resource.canonical.rstrip("/") + "/{file}"
            found.append(RouteDoc("GET", path, _needs(path), STATIC_HELP))
            continue
        methods = {route.method for route in resource}
        for route in resource:
            if route.method == "HEAD" and "GET" in methods:
                continue  # aiohttp adds a HEAD beside every GET: said once, in the introduction
            description = inspect.getdoc(route.handler) or ""
            found.append(RouteDoc(route.method, resource.canonical, _needs(resource.canonical), description))
    return found


def routes() -> list[RouteDoc]:
    """Every route of the control application, the JSON API's first, in the order they were added."""
    return _walk(create_control_app(None))  # type: ignore[arg-type]  # only building: no daemon is asked anything


def _route(doc: RouteDoc) -> str:
    return f"### {code(f'{doc.method} {doc.path}')}\n\n{paragraphs(doc.description)}\n\nNeeds: {doc.needs}."


def routes_reference() -> str:
    """The page: the checks, then a heading per route, the JSON API's and the page's."""
    every = routes()
    parts = ["# Control API", INTRO, "## The JSON API"]
    parts += [_route(doc) for doc in every if not doc.is_page]
    parts += ["## The web page", UI_INTRO]
    parts += [_route(doc) for doc in every if doc.is_page]
    return "\n\n".join(parts) + "\n"
