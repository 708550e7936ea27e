"""The daemon's control API (aiohttp.web): health, readiness, metrics, jobs and runs, and an
operator's pause, resume and cancel of a job.

Every answer is JSON except `/metrics` (Prometheus text). Every request passes three checks,
in this order, so that neither the network nor a web page in the operator's browser can use it:

1. `Host` names this daemon (localhost, 127.0.0.1, [::1], the address it listens on, or a
   name of `daemon.allowed_hosts`; any port), and `Origin`, when sent, is such a host: else
   403. A page that DNS rebinding points at the loopback address sends its own name.
2. Every route but `/healthz` needs `Authorization: Bearer <token>`: `daemon.token`, or the
   token the daemon made at start when none is configured (in `state/daemon.json`, mode
   0600): else 401. Off loopback the configuration refuses to load without `daemon.token`.
   Wrong bearers are slowed per client address (`syncd.daemon.login_limit`): else 429.
3. A request that changes something (any method but GET and HEAD) must say
   `Content-Type: application/json`: else 415. A form or a `text/plain` fetch of a web page
   cannot say it without a CORS preflight, which this API never grants.

The web page under `/ui/` (`syncd.daemon.ui`, unless `daemon.ui = false`) passes the first
check only: it has its own login (a cookie made from the same token) and its forms carry CSRF
tokens instead (`syncd.daemon.ui.guard`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from syncd.config import host_key
from syncd.config.daemon import public_address
from syncd.daemon.login_limit import LOGIN_LIMIT, LoginLimit, refused_while_waiting
from syncd.daemon.metrics import CONTENT_TYPE
from syncd.daemon.pauses import JobPaused, NothingToCancel, who
from syncd.daemon.ui.address import address_of
from syncd.daemon.ui.pages import create_ui_app

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import SecretStr

    from syncd.config import Settings
    from syncd.daemon.metrics import DaemonMetrics
    from syncd.daemon.run_history import Pause, RunHistory, RunRecord
    from syncd.daemon.views import JobState, TriggerResult

__all__ = ["DAEMON", "OPEN_PATHS", "ControlledDaemon", "create_control_app"]


class ControlledDaemon(Protocol):
    """What the control API reads and asks of the daemon it serves (`syncd.daemon.service.Daemon`,
    a fleet replica alike): named here, so that this module needs nothing of the service."""

    @property
    def settings(self) -> Settings: ...

    @property
    def control_token(self) -> SecretStr: ...

    @property
    def metrics(self) -> DaemonMetrics: ...

    @property
    def jobs(self) -> Mapping[str, JobState]: ...

    @property
    def runs(self) -> RunHistory | None: ...

    @property
    def stopping(self) -> bool: ...

    def ready(self) -> tuple[bool, list[str]]: ...

    def job_view(self, state: JobState) -> dict[str, Any]: ...

    def jobs_view(self) -> list[dict[str, Any]]: ...

    def trigger(self, name: str) -> TriggerResult: ...

    def pause(self, name: str, by: str) -> tuple[Pause, bool]: ...

    def resume(self, name: str, by: str) -> bool: ...

    def cancel(self, name: str, by: str) -> RunRecord: ...

    @property
    def plans_dir(self) -> Path: ...

    async def plan_job(self, name: str) -> Path: ...


DAEMON: web.AppKey[Any] = web.AppKey("daemon", object)
OPEN_PATHS = frozenset({"/healthz"})
"""The routes that need no token."""
_RUN_ID = re.compile(r"[0-9]{1,18}")
"""A run id as the URL gives it: ASCII digits only (`str.isdigit` also accepts '²', which
`int()` refuses) and short enough for an SQLite INTEGER; anything else is a 404, not a 500."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_PORT = re.compile(r":[0-9]{1,5}")


def _host_of(value: str) -> str | None:
    """The host of a `Host` header or an origin's `host[:port]` (port dropped), normalized
    as `daemon.allowed_hosts` is; None when it is not one."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[: end + 1], value[end + 1 :]
    else:
        host, colon, port = value.partition(":")
        rest = colon + port
    if not host or (rest and not _PORT.fullmatch(rest)):
        return None
    return host_key(host)


def _allowed_hosts(daemon: ControlledDaemon) -> set[str]:
    config = daemon.settings.daemon
    names = set(_LOOPBACK_NAMES) | set(config.allowed_hosts)
    public, _prefix = public_address(config.public_url)
    if public is not None:  # the host users reach the daemon by (a TLS proxy's)
        host = _host_of(public.partition("://")[2])
        if host is not None:
            names.add(host)
    listened = host_key(config.host)
    if listened is not None:
        try:
            wildcard = ipaddress.ip_address(listened.strip("[]")).is_unspecified
        except ValueError:
            wildcard = False
        if not wildcard:
            names.add(listened)
    return names


def _shown(value: str) -> str:
    return value if len(value) <= 80 else value[:77] + "..."


def _refusal(request: web.Request, daemon: ControlledDaemon) -> str | None:
    """Why a request may not reach this API by its Host and Origin, or None if it may."""
    allowed = _allowed_hosts(daemon)
    host = request.headers.get("Host")
    if host is None or _host_of(host) not in allowed:
        return (
            f"Host {_shown(host or '(none)')!r} is not a name of this daemon "
            "(localhost, 127.0.0.1, [::1] or daemon.allowed_hosts)"
        )
    origin = request.headers.get("Origin")
    if origin is not None:
        scheme, _, rest = origin.strip().partition("://")
        if scheme.lower() not in ("http", "https") or "/" in rest or "@" in rest or _host_of(rest) not in allowed:
            return (
                f"Origin {_shown(origin)!r} is not a page of this daemon's hosts "
                "(localhost, 127.0.0.1, [::1] or daemon.allowed_hosts)"
            )
    return None


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    daemon: ControlledDaemon = request.app[DAEMON]
    refusal = _refusal(request, daemon)
    if refusal is not None:
        return _error(403, refusal)
    if request.path == "/ui" or request.path.startswith("/ui/"):
        if not daemon.settings.daemon.ui:
            return _error(404, "the web page is off (daemon.ui = false)")
        if request.path == "/ui":
            return web.Response(status=308, headers={"Location": address_of(daemon).root})
        return await handler(request)  # its session and CSRF checks: syncd.daemon.ui.guard
    if request.path not in OPEN_PATHS:
        limit = request.app[LOGIN_LIMIT]
        if (refused := refused_while_waiting(limit, request.remote)) is not None:
            response = _error(429, refused[0])
            response.headers["Retry-After"] = refused[1]
            return response
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        expected = daemon.control_token.get_secret_value().encode()
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected):
            limit.succeeded(request.remote)
        else:
            if scheme.lower() == "bearer":  # a guess; no header at all is none
                limit.failed(request.remote)
            # No "bearer <word>" in the message: log and error redaction would mask the word.
            where = (
                "daemon.token"
                if daemon.settings.daemon.token is not None
                else "no daemon.token is configured: use the \"token\" of daemon.json in the daemon's state_dir"
            )
            response = _error(401, f"missing or wrong token in the Authorization header ({where})")
            response.headers["WWW-Authenticate"] = 'Bearer realm="syncd"'
            return response
    if request.method not in _SAFE_METHODS and request.content_type != "application/json":
        return _error(415, f"{request.method} needs Content-Type: application/json")
    return await handler(request)


routes = web.RouteTableDef()


def _daemon(request: web.Request) -> ControlledDaemon:
    return request.app[DAEMON]  # type: ignore[no-any-return]


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """Liveness: `{"status": "ok"}` while the process answers. The one route without a token (a container's health check)."""
    return web.json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """Readiness: `{"ready": true, "problems": []}`; 503 and the problems (`stopping`, `not started`, a
    state_dir that is not writable) while the daemon cannot run its jobs."""
    ready, problems = _daemon(request).ready()
    return web.json_response({"ready": ready, "problems": problems}, status=200 if ready else 503)


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """The daemon's Prometheus metrics, in Prometheus' text format (the Metrics reference lists them)."""
    body = _daemon(request).metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


@routes.get("/jobs")
async def list_jobs(request: web.Request) -> web.Response:
    """Every configured job, by name: its kind, source, target, schedule, state, pause, current and
    queued run, next run, failures in a row, last run (`syncd jobs --json` prints this answer)."""
    daemon = _daemon(request)
    return web.json_response({"jobs": daemon.jobs_view()})


def _job_state(request: web.Request) -> JobState:
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
    """One job as `/jobs` shows it, with its latest 20 runs (`runs`, newest first); 404 for a job the
    configuration does not have."""
    daemon = _daemon(request)
    state = _job_state(request)
    assert daemon.runs is not None
    view = daemon.job_view(state)
    view["runs"] = [run.as_dict() for run in daemon.runs.of_job(state.config.name, 20)]
    return web.json_response(view)


@routes.post("/jobs/{name}/run")
async def run_job(request: web.Request) -> web.Response:
    """Run the job now (`syncd trigger`): 202 with `status` `started`, or `coalesced` when a run of it
    is already under way (the run returned follows it), and the run; 409 while the job is paused,
    503 while the daemon stops."""
    daemon = _daemon(request)
    state = _job_state(request)
    if daemon.stopping:
        return _error(503, "the daemon is stopping: no new runs")
    try:
        result = daemon.trigger(state.config.name)
    except JobPaused as exc:
        return _error(409, str(exc))
    return web.json_response({"status": result.status, "run": result.run.as_dict()}, status=202)


async def _asker(request: web.Request) -> str:
    """Who pauses or cancels: the body's `by` (the command line sends user@host), else the API."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    return who(body.get("by") if isinstance(body, dict) else None)


@routes.post("/jobs/{name}/pause")
async def pause_job(request: web.Request) -> web.Response:
    """Pause the job (`syncd pause`): its schedule stops firing and triggers are refused until it is
    resumed; a run under way goes on. `status` `paused` or `already paused`, and the job. The JSON
    body's `by` names who paused it (the command line sends `user@host`)."""
    daemon = _daemon(request)
    name = _job_state(request).config.name
    _pause, new = daemon.pause(name, await _asker(request))
    return web.json_response({"status": "paused" if new else "already paused", "job": daemon.job_view(daemon.jobs[name])})


@routes.post("/jobs/{name}/resume")
async def resume_job(request: web.Request) -> web.Response:
    """Resume a paused job (`syncd resume`): `status` `resumed` or `not paused`, and the job; the JSON
    body's `by` names who resumed it."""
    daemon = _daemon(request)
    name = _job_state(request).config.name
    resumed = daemon.resume(name, await _asker(request))
    return web.json_response({"status": "resumed" if resumed else "not paused", "job": daemon.job_view(daemon.jobs[name])})


@routes.post("/jobs/{name}/cancel")
async def cancel_run(request: web.Request) -> web.Response:
    """Cancel the job's running run (`syncd cancel`): 202 with `status` `cancelling` and the run, which
    ends as `cancelled`; 409 when the job has no run under way. The JSON body's `by` names who cancelled it."""
    daemon = _daemon(request)
    name = _job_state(request).config.name
    try:
        record = daemon.cancel(name, await _asker(request))
    except NothingToCancel as exc:
        return _error(409, str(exc))
    return web.json_response({"status": "cancelling", "run": record.as_dict()}, status=202)


@routes.get("/runs")
async def list_runs(request: web.Request) -> web.Response:
    """The latest 50 runs of every job, newest first (`runs`), each as `/runs/{id}` shows it."""
    daemon = _daemon(request)
    assert daemon.runs is not None
    return web.json_response({"runs": [run.as_dict() for run in daemon.runs.latest(50)]})


@routes.get("/runs/{id}")
async def get_run(request: web.Request) -> web.Response:
    """One run: its job, kind, cause, outcome and reason, times, error, summary, and while it runs
    its `progress` (what `syncd trigger --wait` polls); 404 for a run the history does not hold."""
    daemon = _daemon(request)
    assert daemon.runs is not None
    text = request.match_info["id"]
    record = daemon.runs.get(int(text)) if _RUN_ID.fullmatch(text) else None
    if record is None:
        return _error(404, f"no run {text!r}")
    return web.json_response(record.as_dict())


def create_control_app(daemon: ControlledDaemon) -> web.Application:
    """The control API of `daemon`, the web page mounted under `/ui/`."""
    app = web.Application(middlewares=[_guard])
    app[DAEMON] = daemon
    app[LOGIN_LIMIT] = LoginLimit()  # one for the bearer check and the page's login (config_dict)
    app.add_routes(routes)
    app.add_subapp("/ui/", create_ui_app(daemon))
    return app
