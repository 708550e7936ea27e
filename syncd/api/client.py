"""One tenant's HTTP client: a pooled aiohttp session, Bearer auth, timeouts, retries,
pacing, concurrency limits and typed errors.

Why one place: every call syncd makes goes through `TenantClient.request`, so the rules of
"the network is hostile" are applied once. Per attempt the order is: the tenant's capacity
limiter, the tenant's pacer (rate limit), the global capacity limiter, then the HTTP call;
retries sleep outside all three, so a task that backs off holds no slot. The tenant's limiter
is sized from the link (`syncd.api.inflight`: rate x round trip, shrinking on 429s, 5xx and
timeouts), up to `concurrency`, its ceiling; the time to each answer's first byte feeds it.

Retries (tenacity): 429 always (the server did not process the call); 5xx, dropped
connections, timeouts and unparsable bodies only for idempotent calls (GET, PUT, PATCH,
DELETE by default) or when the request certainly never left (connection refused). A
non-idempotent POST that may have taken effect is raised at once with
`may_have_applied=True`, for the write side to reconcile. The wait is the larger of the
jittered exponential backoff and the server's hint (`Retry-After`, `X-RateLimit-Reset`),
clamped to `retry.max_wait`. A server that cannot be connected to is tried, in a one-shot
command, only until its window ends (`syncd.one_shot`): said once, at the first failed connect.

Redirects are followed (at most 5); aiohttp drops the Authorization header when a redirect
leaves the base URL's origin (scheme, host, port), and the tests check it.

Limits, because the server may be hostile or broken (issue 11):
- Deadline: each attempt (connect, redirects, headers and the whole body) must be done within
  `timeout` (`request_timeout`). A read timeout alone is not enough: a body trickled one byte
  at a time resets it forever. A missed deadline is a TransportError, retried as usual, so a
  whole call lasts at most `max_attempts` deadlines plus the waits between them.
- Size: a 2xx body longer than `max_answer_bytes` is refused while it is read (a
  Content-Length over the cap before reading), as `AnswerTooLarge`, not retried. Error answers
  keep their status (and retry policy); only their first `_ERROR_BODY_BYTES` are read.
- Memory: every byte of an answer's body is reserved, before it is kept, from the process's
  answer budget (`answer_budget`, `syncd.api.answers.AnswerBudget`) and given back once the
  body is decoded, so the answers of all requests in flight hold at most the budget; a body
  that would need more waits (within the attempt's deadline). The JSON is decoded with the
  bytes given up as soon as they are text.
- Depth: JSON nested deeper than the parser can go is a MalformedResponse, not a RecursionError.
- Paths: sent exactly as written (`encoded=True`), never normalized: an id `.` or `..`
  (`%2E`, `%2E%2E` once quoted) must not turn a call into one on another resource, so dot
  segments are encoded even in paths built without quoting (`syncd.api.urls`).
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import aiohttp
import anyio
from pydantic import SecretStr
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)
from yarl import URL

from syncd import __version__ as _version
from syncd.api.errors import (
    AnswerTooLarge,
    ApiError,
    MalformedResponse,
    RateLimited,
    TransportError,
    format_bytes,
)
from syncd.api.failures import MAX_REDIRECTS, READ_METHODS, status_error, transport_error
from syncd.api.inflight_gate import InFlightGate
from syncd.api.pacing import Pacer
from syncd.api.paging import DEFAULT_MAX_PAGES, PAGE_LIMIT, OnRestart, paginate
from syncd.api.answers import (
    DEFAULT_ANSWER_BUDGET,
    AnswerBudget,
    AnswerHolding,
    allocation_bound,
    budget_limit,
    shared_answer_budget,
)
from syncd.api.answers import is_blank as _blank
from syncd.api.answers import loads_consuming as _loads_consuming
from syncd.api.answers import read_capped as _read_capped
from syncd.api.retry_notice import retry_notice
from syncd.api.stats import ClientStats
from syncd.api.telemetry import current_observer
from syncd.api.unreachable import Unreachable, cannot_connect, notice
from syncd.api.urls import QUERY_SAFE, query_string, query_values, quoted, safe_path
from syncd.config import RetryConfig
from syncd.logging import get_logger, redact_text, register_secret
from syncd.one_shot import current_window
from syncd.pg.fencing import require_lease

if TYPE_CHECKING:
    from syncd.config import Settings
    from syncd.pg.budget import SharedBudget

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "IDEMPOTENT_METHODS",
    "ApiResponse",
    "TenantClient",
    "make_global_limiter",
    "retry_notice",
]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
"""Methods retried after a possible effect; PUT/PATCH/DELETE of this API are idempotent."""
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""The largest answer taken (`max_answer_bytes`): a page of 1000 big objects is a few MB."""
_ERROR_BODY_BYTES = 1024 * 1024
"""What is read of an error answer: its message is cut to a few KB anyway."""

Sleep = Callable[[float], Awaitable[Any]]
Validator = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A successful (2xx) answer: status, parsed JSON (None for an empty body), headers."""

    status: int
    data: Any
    headers: Mapping[str, str]


class _Taken:
    """`async with limiter`, without the limiter's two trips through the event loop when a
    token is free (anyio checkpoints even then: a request's own I/O is its scheduling point);
    nothing without a limiter (no global one set)."""

    __slots__ = ("limiter",)

    def __init__(self, limiter: anyio.CapacityLimiter | None) -> None:
        self.limiter = limiter

    async def __aenter__(self) -> None:
        if self.limiter is not None:
            try:
                self.limiter.acquire_nowait()
            except anyio.WouldBlock:
                await self.limiter.acquire()

    async def __aexit__(self, *exc: object) -> None:
        if self.limiter is not None:
            self.limiter.release()


def make_global_limiter(settings: Settings) -> anyio.CapacityLimiter:
    """The limiter shared by every tenant's client of one process (`Settings.concurrency`)."""
    return anyio.CapacityLimiter(settings.concurrency)


class TenantClient:
    """The API as one tenant's token sees it. Use as `async with TenantClient(...) as api:`.

    `request` returns an `ApiResponse` or raises an `ApiError` subclass; `get_json` returns
    the parsed body of a GET; `paginate` yields the items of each page of a list. `stats`
    counts what happened. All tasks of the tenant share the session, limiter and pacer.
    `concurrency` is the most requests in flight; how many are, below it, follows the link
    (`syncd.api.inflight_gate`, shared with every client of the same `pacer`).

    `pace=False` turns proactive pacing off (benchmark baselines); `pacer` shares one pacer
    between clients that spend the same token's rate limit (its pacing counters then go to
    the stats of the client that created it). `budget` (`syncd.pg.budget.SharedBudget`)
    shares the token's rate limit with the other replicas of a fleet. `answer_budget` bounds the
    answer bytes held at once with every other client of the process (by default the process's
    shared budget of `DEFAULT_ANSWER_BUDGET`, raised if one answer of `max_answer_bytes` would
    not fit: `budget_limit`). `sleep` is the retry sleep (tests).
    """

    def __init__(
        self,
        name: str,
        base_url: str,
        token: SecretStr | str,
        *,
        concurrency: int = 64,
        global_limiter: anyio.CapacityLimiter | None = None,
        timeout: float = 30.0,
        retry: RetryConfig | None = None,
        sleep: Sleep = anyio.sleep,
        pace: bool = True,
        pacer: Pacer | None = None,
        budget: SharedBudget | None = None,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        answer_budget: AnswerBudget | None = None,
    ) -> None:
        secret = token if isinstance(token, SecretStr) else SecretStr(token)
        if not secret.get_secret_value().strip():
            raise ValueError(f"tenant {name!r}: the API token is empty")
        register_secret(secret)
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryConfig()
        self.max_pages = max_pages
        self.max_answer_bytes = max_answer_bytes
        if answer_budget is None:
            answer_budget = shared_answer_budget(budget_limit(DEFAULT_ANSWER_BUDGET, max_answer_bytes))
        elif answer_budget.limit < allocation_bound(max_answer_bytes):
            raise ValueError(
                f"tenant {name!r}: an answer budget of {answer_budget.limit} bytes cannot hold "
                f"one answer of max_answer_bytes ({max_answer_bytes} bytes)"
            )
        self.answer_budget = answer_budget
        self.stats = ClientStats()
        self._observer = current_observer()
        self.pacer = pacer if pacer is not None else Pacer(enabled=pace, stats=self.stats, max_block=self.retry.max_wait, shared=budget)
        self._owned_budget: SharedBudget | None = None  # made by from_settings: closed with the client
        self._token = secret
        self._base = URL(self.base_url)
        self._origin = self._base.origin()
        self._base_has_v1 = self._base.path.rstrip("/").endswith("/v1")
        self._prefix = str(self._origin) + self._base.raw_path.rstrip("/")
        """What a relative path is sent under (made once: `str` of a URL costs per call)."""
        if self.pacer.inflight is None:
            self.pacer.inflight = InFlightGate(concurrency)
        self._gate = self.pacer.inflight
        """The token's limit of requests in flight, sized from the link (`syncd.api.inflight`)."""
        self._limiter = self._gate.limiter
        self.stats.record_link(self._gate.limit, self._gate.rtt)
        self._global_limiter = global_limiter
        self._sleep = sleep
        self._random = random.Random()
        self._unreachable = Unreachable(current_window())
        """A one-shot command's window for a server that cannot be connected to (`syncd.one_shot`)."""
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        tenant: str,
        global_limiter: anyio.CapacityLimiter | None = None,
        **options: Any,
    ) -> TenantClient:
        """The client of a configured tenant (its token is read now: a ConfigError if missing)."""
        config = settings.tenant(tenant)
        options.setdefault("max_pages", settings.max_pages_per_listing)
        options.setdefault("max_answer_bytes", int(settings.max_answer_bytes))
        budget = budget_limit(int(settings.answer_budget), int(settings.max_answer_bytes))
        options.setdefault("answer_budget", shared_answer_budget(budget))
        token = config.resolved_token()
        owned = None
        if settings.state_url is not None and "budget" not in options and "pacer" not in options:
            from syncd.pg.budget import SharedBudget  # a fleet: the token's rate limit is shared

            owned = options["budget"] = SharedBudget(settings.state_url.get_secret_value(), config.base_url, token)
        client = cls(
            config.name or tenant.lower(),
            config.base_url,
            token,
            concurrency=config.concurrency,
            global_limiter=global_limiter,
            timeout=settings.request_timeout,
            retry=settings.retry,
            **options,
        )
        client._owned_budget = owned
        return client

    def __repr__(self) -> str:
        return f"TenantClient(name={self.name!r}, base_url={self.base_url!r})"

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the session and its pooled connections; the client cannot be used again."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        budget, self._owned_budget = self._owned_budget, None
        if budget is not None:
            await budget.aclose()

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if self._session is None:
            # The connections follow the in-flight limit, up to its ceiling.
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=self.concurrency)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=self.timeout,
                    sock_connect=self.timeout,
                    sock_read=self.timeout,
                ),
                headers={
                    "Authorization": f"Bearer {self._token.get_secret_value()}",
                    "Accept": "application/json",
                    "User-Agent": f"syncd/{_version}",
                },
                cookie_jar=aiohttp.DummyCookieJar(),
                # No proxies or .netrc from the environment: a .netrc entry would replace
                # (or clash with) the Bearer token.
                trust_env=False,
            )
            # aiohttp silently re-sends a PUT or DELETE (and GETs) once when a reused
            # connection drops. This API has a PUT that creates (teams): a hidden re-send
            # after a lost answer would create it twice. Every retry is decided above
            # (tenacity, `may_have_applied`), so aiohttp must not retry on its own.
            self._session._retry_connection = False
        return self._session

    # ----------------------------------------------------------------- calls

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
        validate: Validator | None = None,
    ) -> ApiResponse:
        """Call `method path` (path relative to base_url, e.g. `/v1/orgs`) with retries.

        `idempotent` (default: every method but POST) allows retries after a possible
        effect. `validate(data)` may raise ValueError/TypeError on a 2xx body of the wrong
        shape: that is a MalformedResponse, retried like an unparsable body.
        """
        method = method.upper()
        if idempotent is None:
            idempotent = method in IDEMPOTENT_METHODS
        url, shown = self._url(method, path, params)
        # Most calls succeed at once: the first attempt goes without tenacity's machinery (a
        # retrying object per call was an eighth of a request's CPU). A failure that may be
        # retried enters tenacity as its attempt 1, so the waits, the notices ("retry 1/7")
        # and the stop are the same as if tenacity had made it.
        try:
            return await self._attempt(method, url, shown, json, validate)
        except ApiError as error:
            if not self._should_retry(error, idempotent):
                error.attempts = 1
                raise
            first: ApiError | None = error
        attempts = 0
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retry.max_attempts) | self._unreachable_too_long,
            wait=self._wait,
            retry=retry_if_exception(lambda exc: self._should_retry(exc, idempotent)),
            sleep=self._sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    if first is not None:
                        failed, first = first, None
                        raise failed
                    return await self._attempt(method, url, shown, json, validate)
        except ApiError as error:
            error.attempts = attempts
            raise
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    async def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """The parsed body of a GET: for answers that are not list envelopes, or one page."""
        return (await self.request("GET", path, params=params)).data

    def paginate(
        self,
        path: str,
        params: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_LIMIT,
        max_pages: int | None = None,
        on_restart: OnRestart | None = None,
    ) -> AsyncIterator[list[Any]]:
        """Yield the items of each page of a list operation (see `syncd.api.paging`);
        `on_restart` runs when a refused page token makes the listing start over."""
        return paginate(self, path, params, limit=limit, max_pages=max_pages, on_restart=on_restart)

    # ----------------------------------------------------------------- one attempt

    def _url(self, method: str, path: str, params: Mapping[str, Any] | None) -> tuple[URL, str]:
        """(full URL, path safe to show in errors: as sent, without query or host).

        The URL is built `encoded=True` from a quoted path without dot segments (`safe_path`):
        yarl would otherwise resolve `..` (and `%2E%2E`) and send a call to another resource."""
        if path.startswith(("http://", "https://")):
            parsed = URL(path)
            if parsed.origin() != self._origin:
                raise ApiError(
                    f"refusing to send the token to another origin ({parsed.origin()})",
                    method=method,
                    path=parsed.path,
                    tenant=self.name,
                )
            after = path.split("://", 1)[1]
            start = min((i for i in (after.find(c) for c in "/?#") if i >= 0), default=len(after))
            tail = after[start:]
            relative = shown = tail if tail.startswith("/") else "/" + tail
            prefix = str(self._origin)
        else:
            relative = shown = path if path.startswith("/") else "/" + path
            if self._base_has_v1 and (relative == "/v1" or relative.startswith(("/v1/", "/v1?"))):
                relative = relative[3:]
            prefix = self._prefix
        raw_path, _, query = relative.split("#", 1)[0].partition("?")
        sent = safe_path(raw_path)
        shown_path = shown.split("#", 1)[0].split("?", 1)[0]
        shown = sent if shown_path == raw_path else safe_path(shown_path)
        if params and not query:  # a listing's page: its query made as yarl would make it
            made = query_string(query_values(params))
            return URL(prefix + sent + ("?" + made if made else ""), encoded=True), shown
        url = URL(prefix + sent + ("?" + quoted(query, QUERY_SAFE) if query else ""), encoded=True)
        if params:
            url = url.update_query(query_values(params))
        return url, shown

    async def _attempt(
        self, method: str, url: URL, path: str, body: Any, validate: Validator | None
    ) -> ApiResponse:
        """One attempt, its answer's bytes held in the process's answer budget until decoded."""
        async with self.answer_budget.answer(allocation_bound(self.max_answer_bytes)) as holding:
            return await self._attempt_holding(method, url, path, body, validate, holding)

    async def _attempt_holding(
        self, method: str, url: URL, path: str, body: Any, validate: Validator | None, holding: AnswerHolding
    ) -> ApiResponse:
        session = self._open()
        async with _Taken(self._limiter), self.pacer.slot() as slot:
            async with _Taken(self._global_limiter):
                if method not in READ_METHODS:
                    require_lease()  # a fleet run's write, its lease still running (syncd.pg.fencing)
                self.stats.record_sent()
                try:
                    # The deadline of the whole attempt: connect, redirects, headers, body.
                    with anyio.fail_after(self.timeout):
                        sent_at = time.monotonic()
                        async with session.request(
                            method, url, json=body, allow_redirects=True, max_redirects=MAX_REDIRECTS
                        ) as resp:
                            ttfb = time.monotonic() - sent_at  # the round trip the in-flight limit is sized by
                            status, headers, declared = resp.status, resp.headers, resp.content_length
                            same_origin = resp.url.origin() == self._origin
                            success = 200 <= status < 300
                            cap = self.max_answer_bytes if success else min(self.max_answer_bytes, _ERROR_BODY_BYTES)
                            # A HEAD answer's Content-Length is that of a body it does not have.
                            raw, complete = await _read_capped(
                                resp, cap, refuse_declared=success and method != "HEAD", holding=holding
                            )
                except (aiohttp.ClientError, TimeoutError) as exc:
                    self._link(None, None)
                    if self._observer is not None:
                        self._observer.on_response(self.name, method, "error", None)
                    raise self._transport_error(exc, method, path) from None
            rate = slot.observe(status, headers if same_origin else {})
            self._link(status, ttfb)
        if self._unreachable.until is not None:
            self._unreachable.answered()  # something listens again
        if self._observer is not None:
            self._observer.on_response(self.name, method, status, rate.remaining)
        self.stats.responses[status] += 1
        self.stats.bytes_received += len(raw)
        try:
            if 200 <= status < 300:
                if not complete:
                    raise self._too_large(status, declared, method, path)
                return ApiResponse(status, self._decode(raw, status, method, path, validate), headers)
            raise self._status_error(status, raw, headers, method, path, cut_at=None if complete else cap)
        finally:
            # The bytes go with the reservation, not when the error raised here is dropped:
            # its traceback holds this frame (and 64 MiB of a refused answer) for as long as
            # the error is kept, retried or reported.
            raw.clear()

    def _link(self, status: int | None, ttfb: float | None) -> None:
        """Resize the token's in-flight limit from this attempt (`syncd.api.inflight`)."""
        pacer = self.pacer
        limit = self._gate.answered(self.name, status, ttfb, pacer.rate, shared=pacer.shared is not None)
        self.stats.record_link(limit, self._gate.rtt)
        if self._observer is not None:
            self._observer.on_link(self.name, limit, self._gate.rtt)

    def _too_large(self, status: int, declared: int | None, method: str, path: str) -> AnswerTooLarge:
        self.stats.too_large += 1
        if declared is not None and declared > self.max_answer_bytes:
            how = f"refused from its Content-Length ({declared} bytes), unread"
        else:
            how = "refused while reading"
        return AnswerTooLarge(
            f"answer larger than the {format_bytes(self.max_answer_bytes)} limit (max_answer_bytes): {how}",
            status=status,
            method=method,
            path=path,
            tenant=self.name,
            may_have_applied=method not in READ_METHODS,
        )

    def _scrub(self, text: str) -> str:
        return redact_text(text.replace(self._token.get_secret_value(), "********"))

    def _transport_error(self, exc: BaseException, method: str, path: str) -> ApiError:
        error = transport_error(
            exc, method=method, path=path, tenant=self.name, timeout=self.timeout, scrub=self._scrub, base_url=self.base_url
        )
        if isinstance(error, TransportError):
            self.stats.transport_errors += 1
        if cannot_connect(error) and self.retry.max_attempts > 1:
            until = self._unreachable.opened()
            if until is not None:  # the first failed connect of a one-shot command: say how long it is tried
                get_logger("syncd.api").warning(notice(error, self.base_url, until), tenant=self.name)
        return error

    def _decode(self, raw: bytes | bytearray, status: int, method: str, path: str, validate: Validator | None) -> Any:
        """The JSON of a 2xx body; a bytearray `raw` is emptied as it is decoded (`loads_consuming`)."""
        writes = method not in READ_METHODS
        data: Any = None
        problem: str | None = None
        if _blank(raw):
            if not writes and status != 204:
                problem = "empty body"
        else:
            size = len(raw)
            try:
                data = _loads_consuming(raw)
            except ValueError as exc:
                problem = f"unparsable JSON body ({size} bytes): {exc}"
        if problem is None and validate is not None:
            try:
                validate(data)
            except (ValueError, TypeError) as exc:
                problem = f"unexpected answer: {exc}"
        if problem is None:
            return data
        self.stats.malformed += 1
        raise MalformedResponse(
            problem, status=status, method=method, path=path, tenant=self.name, may_have_applied=writes
        )

    def _status_error(
        self, status: int, raw: bytes | bytearray, headers: Mapping[str, str], method: str, path: str, *, cut_at: int | None = None
    ) -> ApiError:
        if status == 429:
            self.stats.rate_limited += 1
        return status_error(status, raw, headers, method=method, path=path, tenant=self.name, scrub=self._scrub, cut_at=cut_at)

    # ----------------------------------------------------------------- retry policy

    @staticmethod
    def _should_retry(exc: BaseException, idempotent: bool) -> bool:
        if not isinstance(exc, ApiError) or not exc.retryable:
            return False
        if isinstance(exc, RateLimited):
            return True
        return idempotent or not exc.may_have_applied

    def _unreachable_too_long(self, state: RetryCallState) -> bool:
        """Stop: a connect failed after a one-shot command's window ended (`syncd.one_shot`)."""
        return self._unreachable.over(state.outcome.exception() if state.outcome is not None else None)

    def _wait(self, state: RetryCallState) -> float:
        """max(jittered exponential backoff, jittered server hint), clamped to max_wait; a
        failed connect's retry no later than the end of the window it is tried in."""
        cfg = self.retry
        backoff = min(cfg.max_wait, cfg.initial_wait * 2 ** (state.attempt_number - 1))
        wait = self._random.uniform(backoff / 2, backoff)
        error = state.outcome.exception() if state.outcome is not None else None
        hint = getattr(error, "retry_after", None)
        if hint:
            wait = max(wait, hint * self._random.uniform(1.0, 1.2))
        left = self._unreachable.left() if cannot_connect(error) else None
        return min(cfg.max_wait, wait, *(() if left is None else (left,)))

    async def _before_sleep(self, state: RetryCallState) -> None:
        """Count the retry, and say it on stderr (a warning: seen at the default level), so a
        server that is down is not a silent minute: `retry 3/7 in 4 s: GET /v1/orgs: 503 ...`."""
        self.stats.retries += 1
        if self._observer is not None:
            self._observer.on_retry(self.name)
        error = state.outcome.exception() if state.outcome is not None else None
        # A failed connect in a one-shot command's window: its one line said until when.
        quiet = cannot_connect(error) and self._unreachable.until is not None
        say = get_logger("syncd.api").debug if quiet else get_logger("syncd.api").warning
        say(retry_notice(state.attempt_number, self.retry.max_attempts - 1, state.upcoming_sleep, error), tenant=self.name)
