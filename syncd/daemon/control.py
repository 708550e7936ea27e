"""The daemon's control API (aiohttp.web): health, readiness, metrics, jobs and runs.

Every answer is JSON except `/metrics` (Prometheus text). When `daemon.token` is set, every
route but `/healthz` needs `Authorization: Bearer <token>`; off loopback the configuration
refuses to load without one, so the API is never open to a network unguarded.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from syncd.daemon.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from syncd.daemon.service import Daemon

__all__ = ["DAEMON", "create_control_app"]

DAEMON: web.AppKey[Any] = web.AppKey("daemon", object)
_OPEN_PATHS = frozenset({"/healthz"})
_RUN_ID = re.compile(r"[0-9]{1,18}")
"""A run id as the URL gives it: ASCII digits only (`str.isdigit` also accepts '²', which
`int()` refuses) and short enough for an SQLite INTEGER; anything else is a 404, not a 500."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    daemon: Daemon = request.app[DAEMON]
    token = daemon.settings.daemon.token
    if token is None or request.path in _OPEN_PATHS:
        return await handler(request)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        response = _error(401, "missing or wrong bearer token (daemon.token)")
        response.headers["WWW-Authenticate"] = 'Bearer realm="syncd"'
        return response
    return await handler(request)


routes = web.RouteTableDef()


def _daemon(request: web.Request) -> Daemon:
    return request.app[DAEMON]  # type: ignore[no-any-return]


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    ready, problems = _daemon(request).ready()
    return web.json_response({"ready": ready, "problems": problems}, status=200 if ready else 503)


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    body = _daemon(request).metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


@routes.get("/jobs")
async def list_jobs(request: web.Request) -> web.Response:
    daemon = _daemon(request)
    jobs = [daemon.job_view(state) for name, state in sorted(daemon.jobs.items()) if not state.removed]
    return web.json_response({"jobs": jobs})


def _job_state(request: web.Request) -> Any:
    daemon = _daemon(request)
    name = request.match_info["name"]
    state = daemon.jobs.get(name)
    if state is None or state.removed:
        known = ", ".join(sorted(n for n, s in daemon.jobs.items() if not s.removed)) or "none"
        # json.dumps, not an f-string: a name with a quote in it must still give valid JSON.
        raise web.HTTPNotFound(
            text=json.dumps({"error": {"code": 404, "message": f"unknown job {name!r} (configured: {known})"}}),
            content_type="application/json",
        )
    return state


@routes.get("/jobs/{name}")
async def get_job(request: web.Request) -> web.Response:
    daemon = _daemon(request)
    state = _job_state(request)
    assert daemon.runs is not None
    view = daemon.job_view(state)
    view["runs"] = [run.as_dict() for run in daemon.runs.of_job(state.config.name, 20)]
    return web.json_response(view)


@routes.post("/jobs/{name}/run")
async def run_job(request: web.Request) -> web.Response:
    daemon = _daemon(request)
    state = _job_state(request)
    if daemon.stopping:
        return _error(503, "the daemon is stopping: no new runs")
    result = daemon.trigger(state.config.name)
    return web.json_response({"status": result.status, "run": result.run.as_dict()}, status=202)


@routes.get("/runs")
async def list_runs(request: web.Request) -> web.Response:
    daemon = _daemon(request)
    assert daemon.runs is not None
    return web.json_response({"runs": [run.as_dict() for run in daemon.runs.latest(50)]})


@routes.get("/runs/{id}")
async def get_run(request: web.Request) -> web.Response:
    daemon = _daemon(request)
    assert daemon.runs is not None
    text = request.match_info["id"]
    record = daemon.runs.get(int(text)) if _RUN_ID.fullmatch(text) else None
    if record is None:
        return _error(404, f"no run {text!r}")
    return web.json_response(record.as_dict())


def create_control_app(daemon: Daemon) -> web.Application:
    app = web.Application(middlewares=[_auth])
    app[DAEMON] = daemon
    app.add_routes(routes)
    return app
