"""The page's routes: jobs, a job's history, a run, the fleet, saved plans; login and logout.

Each page reads what the JSON API reads (`job_view`, the run history, the fleet's tables), so
the page and `syncd jobs` never disagree. A live part of a page (`?part=...`) answers the same
HTML fragment the page holds, which `static/ui.js` fetches again every second or two: without
JavaScript the page is whole, only not live. Mounted by `syncd.daemon.control` under `/ui/`,
after the control API's Host and Origin check; `syncd.daemon.ui.guard` checks the session and CSRF.
"""

from __future__ import annotations

import shlex
import time
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio
from aiohttp import web

from syncd.copy.planfile import PlanFileError
from syncd.copy.review import ACTIONS
from syncd.daemon.login_limit import LOGIN_LIMIT, refused_while_waiting
from syncd.daemon.progress import estimate, previous_size
from syncd.daemon.pauses import JobPaused, NothingToCancel, who
from syncd.daemon.run_history import RunRecord
from syncd.daemon.ui.address import address_of
from syncd.daemon.ui.chart import history_chart
from syncd.daemon.ui.guard import COOKIE, DAEMON, LOGIN_COOKIE, guard, session_of
from syncd.daemon.ui.plans import PlanQuery, grouped, plan_files, read_plan
from syncd.daemon.ui.render import page
from syncd.daemon.ui.session import (
    SESSION_SECONDS,
    login_nonce,
    make_session,
    same_secret,
)
from syncd.errors import SyncdError

__all__ = ["create_ui_app"]

RUNS_SHOWN = 50
routes = web.RouteTableDef()


def _daemon(request: web.Request) -> Any:
    return request.config_dict[DAEMON]


def _common(request: web.Request, **values: Any) -> dict[str, Any]:
    daemon = _daemon(request)
    return {"session": session_of(request), "fleet": _fleet(daemon) is not None, "now": datetime.now(UTC), "ui": _root(request), **values}


def _root(request: web.Request) -> str:
    """Where the page's URLs start as the browser sees them (`/PREFIX/ui/` behind a proxy)."""
    return address_of(_daemon(request)).root


def _sent(request: web.Request, path: str) -> str:
    """A page of the daemon's (`/ui/...`) as a URL the browser is sent to (`syncd.daemon.ui.address`)."""
    return address_of(_daemon(request)).url(path)


def _fleet(daemon: Any) -> Any:
    """The fleet's run log when this daemon is a replica (PostgreSQL state), else None."""
    runs = daemon.runs
    return runs if runs is not None and hasattr(runs, "leases") else None


def _cookie(response: web.StreamResponse, name: str, value: str, request: web.Request, max_age: int) -> None:
    address = address_of(_daemon(request))
    response.set_cookie(
        name, value, path=address.root, httponly=True, samesite="Strict", secure=address.secure_for(request), max_age=max_age
    )  # fmt: skip


def _safe_next(value: str | None) -> str:
    """Where to go after the login: a page of `/ui/` only (never another site, `//host`),
    printable (a control character, `\r` among them, cannot go into a header)."""
    if value and value.startswith("/ui/") and not value.startswith("/ui//") and "\\" not in value and value.isprintable():
        return value
    return "/ui/"


def _page(request: web.Request, template: str, title: str, part: str, values: dict[str, Any]) -> web.Response:
    """The page `template`, or only its live part (`?part=PART`: `parts/PART.html`) that the
    page's script fetches again."""
    if request.query.get("part") == part:
        return page(f"parts/{part}.html", **values)
    return page(f"{template}.html", title=title, **values)


# ----- login ------------------------------------------------------------------------------------


def _login_form(request: web.Request, *, status: int = 200, error: str | None = None) -> web.Response:
    nonce = login_nonce()
    response = page(
        "login.html", status=status, session=None, fleet=False, error=error, nonce=nonce, next=_safe_next(request.query.get("next")), ui=_root(request)
    )  # fmt: skip
    _cookie(response, LOGIN_COOKIE, nonce, request, 3600)
    return response


@routes.get("/login")
async def login_page(request: web.Request) -> web.Response:
    """The login form: the daemon's token, entered once, opens a session (a cookie)."""
    return _login_form(request)


@routes.post("/login")
async def login(request: web.Request) -> web.Response:
    """Check the token the login form sent: a session cookie and back to the page asked for; 401 and
    the form again for a wrong token, 429 while wrong tokens from the address are slowed."""
    form = await request.post()
    limit = request.config_dict[LOGIN_LIMIT]  # shared with the control API's bearer check
    if (refused := refused_while_waiting(limit, request.remote)) is not None:
        response = _login_form(request, status=429, error=refused[0])
        response.headers["Retry-After"] = refused[1]
        return response
    given = form.get("token")
    expected = _daemon(request).control_token.get_secret_value()
    if not isinstance(given, str) or not same_secret(given.strip(), expected):
        limit.failed(request.remote)
        return _login_form(request, status=401, error="wrong token: give daemon.token, or the token of daemon.json in the daemon's state_dir")
    limit.succeeded(request.remote)
    next_page = form.get("next")
    redirect = web.Response(status=303, headers={"Location": _sent(request, _safe_next(next_page if isinstance(next_page, str) else None))})
    _cookie(redirect, COOKIE, make_session(expected, time.time()), request, SESSION_SECONDS)
    redirect.del_cookie(LOGIN_COOKIE, path=_root(request))
    return redirect


@routes.post("/logout")
async def logout(request: web.Request) -> web.Response:
    """End the session: its cookie removed, back to the login form."""
    response = web.Response(status=303, headers={"Location": f"{_root(request)}login"})
    response.del_cookie(COOKIE, path=_root(request))
    return response


# ----- jobs -------------------------------------------------------------------------------------


def _job_view(daemon: Any, state: Any) -> dict[str, Any]:
    """A job as `/jobs` shows it, with the time zone its times are shown in."""
    return {**daemon.job_view(state), "timezone": state.config.timezone}


@routes.get("/")
async def jobs_page(request: web.Request) -> web.Response:
    """The jobs: state, schedule, last and next run, and the buttons to run, pause, resume or cancel each."""
    daemon = _daemon(request)
    jobs = [{**view, "timezone": daemon.jobs[view["name"]].config.timezone} for view in daemon.jobs_view()]
    values = _common(request, jobs=jobs, page_name="jobs")
    return _page(request, "jobs", "Jobs", "jobs", values)


def _job_state(request: web.Request) -> Any:
    daemon = _daemon(request)
    state = daemon.jobs.get(request.match_info["name"])
    if state is None or state.removed:
        raise web.HTTPNotFound(text=f"no job {request.match_info['name']!r} in this daemon's configuration")
    return state


@routes.get("/jobs/{name}")
async def job_page(request: web.Request) -> web.Response:
    """One job: its settings, a chart of its latest runs' durations and outcomes, and the runs; 404 for
    a job the configuration does not have."""
    daemon, state = _daemon(request), _job_state(request)
    runs = daemon.runs.of_job(state.config.name, RUNS_SHOWN)
    view = _job_view(daemon, state)
    chart = history_chart(runs, zone=state.config.timezone)
    values = _common(request, job=view, runs=[_run_view(r) for r in runs], chart=chart, page_name="jobs")
    return _page(request, "job", f"Job {view['name']}", "runs", values)


@routes.post("/jobs/{name}/run")
async def trigger(request: web.Request) -> web.Response:
    """Run the job now (the page's Run button), then show the run; 409 while the job is paused, 503
    while the daemon stops."""
    daemon, state = _daemon(request), _job_state(request)
    if daemon.stopping:
        raise web.HTTPServiceUnavailable(text="the daemon is stopping: no new runs")
    try:
        result = daemon.trigger(state.config.name)
    except JobPaused as exc:
        raise web.HTTPConflict(text=str(exc)) from None
    return web.Response(status=303, headers={"Location": _sent(request, f"/ui/runs/{result.run.id}")})


async def _back(request: web.Request) -> web.Response:
    """Back to the page the form was on (its `back` field: a page of `/ui/` only)."""
    back = (await request.post()).get("back")
    return web.Response(status=303, headers={"Location": _sent(request, _safe_next(back if isinstance(back, str) else None))})


def _operator(request: web.Request) -> str:
    return who(f"the web page ({request.remote})" if request.remote else "the web page")


@routes.post("/jobs/{name}/pause")
async def pause(request: web.Request) -> web.Response:
    """Pause the job (the Pause button), then back to the page the button was on."""
    _daemon(request).pause(_job_state(request).config.name, _operator(request))
    return await _back(request)


@routes.post("/jobs/{name}/resume")
async def resume(request: web.Request) -> web.Response:
    """Resume the job (the Resume button), then back to the page the button was on."""
    _daemon(request).resume(_job_state(request).config.name, _operator(request))
    return await _back(request)


@routes.post("/jobs/{name}/cancel")
async def cancel(request: web.Request) -> web.Response:
    """Cancel the job's running run (the Cancel button), then show the run; 409 when none runs."""
    try:
        run = _daemon(request).cancel(_job_state(request).config.name, _operator(request))
    except NothingToCancel as exc:
        raise web.HTTPConflict(text=f"{exc} (it may just have ended)") from None
    return web.Response(status=303, headers={"Location": _sent(request, f"/ui/runs/{run.id}")})


@routes.post("/jobs/{name}/plan")
async def plan_now(request: web.Request) -> web.Response:
    """Make a plan of a mirror job now and save it (the Plan button), then show it: what its next run
    would do, for review; 400 for a job that is not a mirror job, 502 when a side cannot be read."""
    daemon, state = _daemon(request), _job_state(request)
    try:
        path: Path = await daemon.plan_job(state.config.name)
    except ValueError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    except RuntimeError as exc:  # stopping
        raise web.HTTPServiceUnavailable(text=f"{exc}: no new plans") from None
    except SyncdError as exc:
        raise web.HTTPBadGateway(text=f"the plan could not be made: {exc}") from None
    return web.Response(status=303, headers={"Location": _sent(request, f"/ui/plans/{quote(path.name)}")})


# ----- runs -------------------------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    """A summary's list as lines of text (a lone value as one line; nothing as none)."""
    if not value:
        return []
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _changes(summary: dict[str, Any]) -> dict[str, Any] | None:
    """A sync run's changes (created / updated / moved / deleted) and the command that lists them."""
    changed, run = summary.get("changed"), summary.get("mirror_run")
    if not isinstance(changed, dict) or not isinstance(run, int):
        return None
    db = summary.get("db")
    where = f"--db {shlex.quote(db)} " if isinstance(db, str) and db else ""
    counts = {op: n for op, n in changed.items() if isinstance(n, int)}
    return {"counts": counts, "total": sum(counts.values()), "command": f"syncd diff {where}--run {run}"}


def _git(summary: dict[str, Any]) -> dict[str, Any] | None:
    """Where an export run's history went: the repository, the commit (made by this run or
    not), the remote and whether it has the commit."""
    git = summary.get("git")
    if not isinstance(git, dict):
        return None
    return {key: git.get(key) for key in ("repository", "commit", "committed", "subject", "remote", "pushed", "push_error")}


def _left(summary: dict[str, Any]) -> list[dict[str, str]]:
    items = summary.get("left_on_target")
    if not isinstance(items, list):
        return []
    return [{key: str(item.get(key, "")) for key in ("kind", "title", "path")} for item in items if isinstance(item, dict)]


def _stored(stored: Any) -> dict[str, str] | None:
    """Where a backup in object storage went, as the page shows it: its bucket and key, and its
    file binaries sent or already stored (None: the backup is a file)."""
    if not isinstance(stored, dict) or not isinstance(stored.get("bucket"), str) or not isinstance(stored.get("key"), str):
        return None
    sent, present = stored.get("blobs_sent"), stored.get("blobs_present")
    blobs = f"{sent:,} file binaries uploaded, {present:,} already stored" if isinstance(sent, int) and isinstance(present, int) and sent + present else ""
    return {"bucket": stored["bucket"], "key": stored["key"], "blobs": blobs}


def _expected(runs: Any, run: RunRecord) -> int | None:
    """The size of the job's latest finished run before `run` (what its progress compares with)."""
    for earlier in runs.of_job(run.job, 10):
        if earlier.id < run.id and earlier.finished and isinstance(earlier.summary, dict):
            size = previous_size(earlier.summary)
            if size is not None:
                return size
    return None


def _run_view(run: RunRecord, expected: int | None = None) -> dict[str, Any]:
    """A run as the JSON API shows it, with what the page picks out of its summary (and its
    progress with a total and an ETA from `expected`, the size of the job's previous run)."""
    view = run.as_dict()
    summary = run.summary if isinstance(run.summary, dict) else {}
    rounds = summary.get("rounds")
    view["figures"] = {
        name: value for name, value in (
            ("rounds", len(rounds) if isinstance(rounds, list) else None),
            ("writes", summary.get("writes")),
            ("requests", summary.get("requests")),
            ("retries", summary.get("retries")),
            ("429s", summary.get("rate_limited")),
            ("skips", summary.get("skips", summary.get("skipped_scopes"))),
            ("objects", summary.get("objects", summary.get("objects_read"))),
        ) if isinstance(value, int)
    }  # fmt: skip
    view["warnings"] = _texts(summary.get("warnings"))
    view["problems"] = _texts(summary.get("errors") or summary.get("failures"))
    view["pruned"] = _texts(summary.get("pruned"))
    view["file"] = summary.get("file") if isinstance(summary.get("file"), str) else None
    view["git"] = _git(summary)
    view["stored"] = _stored(summary.get("stored"))
    view["changes"] = _changes(summary)
    view["left"] = _left(summary)
    verify = summary.get("verify") if isinstance(summary.get("verify"), dict) else {}
    view["left_count"] = verify.get("left_on_target", len(view["left"]))
    if run.progress and run.started_at is not None and not run.finished:
        view["progress"] = estimate(run.progress, expected, (datetime.now(UTC) - run.started_at).total_seconds())
    view["fleet"] = {"replica": getattr(run, "replica", None), "attempt": getattr(run, "attempt", None), "taken_from": getattr(run, "taken_from", None)}
    return view


@routes.get("/runs")
async def runs_page(request: web.Request) -> web.Response:
    """The latest 50 runs of every job, newest first."""
    runs = _daemon(request).runs.latest(RUNS_SHOWN)
    values = _common(request, runs=[_run_view(r) for r in runs], job=None, page_name="runs")
    return _page(request, "runs", "Runs", "runs", values)


@routes.get(r"/runs/{id:[0-9]{1,18}}")
async def run_page(request: web.Request) -> web.Response:
    """One run: outcome, reason, times, what it read or changed, and while it runs its progress with an
    estimate of the time left; 404 for a run the history does not hold."""
    runs = _daemon(request).runs
    run = runs.get(int(request.match_info["id"]))
    if run is None:
        raise web.HTTPNotFound(text=f"no run {request.match_info['id']} (the history keeps the latest 10,000)")
    expected = _expected(runs, run) if not run.finished else None
    state = _daemon(request).jobs.get(run.job)
    zone = state.config.timezone if state is not None else "UTC"
    values = _common(request, run=_run_view(run, expected), zone=zone, page_name="runs")
    return _page(request, "run", f"Run {run.id} of {run.job}", "run", values)


# ----- fleet ------------------------------------------------------------------------------------


@routes.get("/fleet")
async def fleet_page(request: web.Request) -> web.Response:
    """The fleet (a daemon on a PostgreSQL state): the live replicas, their heartbeats and the runs
    each holds a lease on."""
    daemon = _daemon(request)
    log = _fleet(daemon)
    replicas, leases = [], []
    if log is not None:
        now = datetime.now(UTC)
        leases = log.leases()
        for replica in log.live_replicas():
            held = [lease for lease in leases if lease["replica"] == replica.name]
            replicas.append({
                "name": replica.name, "host": replica.host, "pid": replica.pid, "url": replica.control_url,
                "started_at": replica.started_at, "heartbeat_age": (now - replica.heartbeat_at).total_seconds(),
                "lease_until": replica.lease_until, "held": held, "me": replica.name == getattr(daemon, "replica", None),
            })  # fmt: skip
    values = _common(request, replicas=replicas, leases=leases, me=daemon, page_name="fleet")
    return _page(request, "fleet", "Fleet", "fleet", values)


# ----- plans ------------------------------------------------------------------------------------


PLAN_READERS = anyio.CapacityLimiter(2)
"""Plan files read at once, each in a worker thread: the event loop never reads one, and
however many views are open the daemon holds at most two read buffers (`plans.read_plan`)."""


@routes.get("/plans")
async def plans_page(request: web.Request) -> web.Response:
    """The plan files in the daemon's plans folder (`plans` in its state_dir), and a Plan button per mirror job."""
    daemon = _daemon(request)
    mirror_jobs = [name for name, state in sorted(daemon.jobs.items()) if state.config.kind == "mirror" and not state.removed]
    listed = await anyio.to_thread.run_sync(plan_files, daemon.plans_dir, limiter=PLAN_READERS)
    values = _common(request, plans=listed, folder=str(daemon.plans_dir), mirror_jobs=mirror_jobs, page_name="plans")
    return page("plans.html", title="Plans", **values)


@routes.get("/plans/{name}")
async def plan_page(request: web.Request) -> web.Response:
    """One saved plan, a page of its operations at a time, filtered by kind and action (`?kind=`,
    `?action=`, `?page=`); 404 for a plan that is not there, 422 for a file that is not a plan."""
    daemon = _daemon(request)
    name = request.match_info["name"]
    kind, action = (request.query.get("kind") or "")[:200], (request.query.get("action") or "")[:50]
    number = request.query.get("page", "1")
    query = PlanQuery(kind, action, int(number) if number.isdigit() and 0 < len(number) < 8 else 1)
    try:
        view = await anyio.to_thread.run_sync(read_plan, daemon.plans_dir, name, query, limiter=PLAN_READERS)
    except FileNotFoundError:
        raise web.HTTPNotFound(text=f"no plan {name!r} in {daemon.plans_dir}") from None
    except PlanFileError as exc:
        raise web.HTTPUnprocessableEntity(text=str(exc)) from None
    values = _common(
        request, plan=view, groups=grouped(view.changes), shown=len(view.changes), kind=kind, action=action,
        actions=[a for a in ACTIONS if a in view.counts], page_name="plans", links=_plan_links(request, view, kind, action),
    )  # fmt: skip
    return page("plan.html", title=f"Plan {name}", **values)


def _plan_links(request: web.Request, view: Any, kind: str, action: str) -> dict[str, str]:
    """The previous and next pages' addresses as the browser sees them, keeping the filter."""
    base = _sent(request, f"/ui/plans/{quote(view.name)}")
    links = {}
    for label, number in (("previous", view.page - 1), ("next", view.page + 1)):
        if 1 <= number <= view.pages:
            query = urlencode([(key, value) for key, value in (("kind", kind), ("action", action)) if value] + ([("page", str(number))] if number > 1 else []))
            links[label] = f"{base}?{query}" if query else base
    return links


def create_ui_app(daemon: Any) -> web.Application:
    """The page as an application to mount under `/ui/` of the control API."""
    app = web.Application(middlewares=[guard])
    app[DAEMON] = daemon
    app.add_routes(routes)
    app.router.add_static("/static/", Path(str(files("syncd.daemon.ui") / "static")), show_index=False, follow_symlinks=False)
    return app
