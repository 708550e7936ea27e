"""The HTTP client of the Documentation Management API (see `syncd.api.client`).

Public names are re-exported here; the modules behind them are private details::

    async with TenantClient.from_settings(settings, "src", make_global_limiter(settings)) as api:
        orgs = [org async for page in api.paginate("/v1/orgs") for org in page]
        sso = await api.get_json(f"/v1/orgs/{org_id}/sso")
"""

from syncd.api.client import (
    DEFAULT_MAX_ANSWER_BYTES,
    IDEMPOTENT_METHODS,
    ApiResponse,
    TenantClient,
    make_global_limiter,
)
from syncd.api.errors import (
    AnswerTooLarge,
    ApiError,
    AuthError,
    Conflict,
    MalformedResponse,
    NotFound,
    PagingError,
    RateLimited,
    ServerError,
    TransportError,
)
from syncd.api.inflight import InFlightLimit, link_text
from syncd.api.pacing import Pacer, RateInfo, parse_rate_headers
from syncd.api.paging import (
    DEFAULT_MAX_PAGES,
    MAX_RESTARTS,
    MAX_TOKEN_CHARS,
    PAGE_LIMIT,
    RESTART_STATUSES,
    OnRestart,
    Paginator,
    check_envelope,
    next_token,
    paginate,
)
from syncd.api.stats import ClientStats

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "DEFAULT_MAX_PAGES",
    "IDEMPOTENT_METHODS",
    "MAX_RESTARTS",
    "MAX_TOKEN_CHARS",
    "PAGE_LIMIT",
    "RESTART_STATUSES",
    "AnswerTooLarge",
    "ApiError",
    "ApiResponse",
    "AuthError",
    "ClientStats",
    "Conflict",
    "InFlightLimit",
    "MalformedResponse",
    "NotFound",
    "OnRestart",
    "Pacer",
    "Paginator",
    "PagingError",
    "RateInfo",
    "RateLimited",
    "ServerError",
    "TenantClient",
    "TransportError",
    "check_envelope",
    "link_text",
    "make_global_limiter",
    "next_token",
    "paginate",
    "parse_rate_headers",
]
