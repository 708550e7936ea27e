"""Organizations as a token sees them: the list (`syncd orgs`), and an organization's address.

An address names an organization by its id or by its exact title (`src:ORG_ID`,
`"src:Organization 1"`), as `syncd export --org` does. An id always wins: the organization
with that id is asked for first, and only when there is none the token can see are the
titles of the organizations it can see compared. A title that several organizations share
is refused with their ids, so that the user picks one; one that none has is an unknown
organization. Both are one-line errors with exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from syncd import catalog
from syncd.api import ApiError, TenantClient
from syncd.config import TargetRef
from syncd.errors import SyncdError, UsageError

__all__ = [
    "ORGS_LISTING",
    "AmbiguousOrganization",
    "OrgSummary",
    "UnknownOrganization",
    "org_summaries",
    "resolve_org",
    "resolve_ref",
    "visible_orgs",
]

ORGS_LISTING = "/v1/orgs"


class UnknownOrganization(SyncdError):
    """The organization does not exist or the token cannot see it."""

    exit_code = 2


class AmbiguousOrganization(UsageError):
    """A title that several organizations the token sees share."""


@dataclass
class OrgSummary:
    """One organization the token sees: `spaces` is None when its spaces could not be listed
    (`error` says why)."""

    id: str
    title: str
    spaces: int | None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "title": self.title, "spaces": self.spaces}
        if self.error is not None:
            data["error"] = self.error
        return data


async def visible_orgs(client: TenantClient) -> list[dict[str, Any]]:
    """Every organization the token sees (`GET /v1/orgs`, all pages)."""
    found: list[dict[str, Any]] = []
    async for page in client.paginate(ORGS_LISTING, on_restart=found.clear):
        found.extend(item for item in page if isinstance(item, dict) and isinstance(item.get("id"), str))
    return found


async def resolve_org(client: TenantClient, tenant: str, org: str) -> tuple[str, dict[str, Any]]:
    """(id, organization) of the organization addressed as `org`: its id, else its exact
    title (module docstring). UnknownOrganization, AmbiguousOrganization, or the ApiError of
    a call that failed otherwise (a 401, the server down)."""
    path = catalog.fill(catalog.BY_NAME["organization"].path, {"org": org})
    try:
        data = await client.get_json(path)
    except ApiError as exc:
        if exc.status not in (400, 403, 404):  # 400: a server that refuses a title as an id
            raise
    else:
        return org, data
    titled = [item for item in await visible_orgs(client) if item.get("title") == org]
    if not titled:
        raise UnknownOrganization(
            f"organization {org!r} not found on tenant {tenant!r} (no id or title the token can see; `syncd orgs {tenant}` lists them)"
        )
    if len(titled) > 1:
        ids = ", ".join(sorted(item["id"] for item in titled))
        raise AmbiguousOrganization(f"{len(titled)} organizations on tenant {tenant!r} are titled {org!r}: {ids}; address one by its id")
    return titled[0]["id"], titled[0]


async def resolve_ref(client: TenantClient, ref: TargetRef) -> TargetRef:
    """`ref` with its organization addressed by id (a title resolved); a whole tenant as is."""
    if ref.org is None:
        return ref
    org_id, _ = await resolve_org(client, ref.tenant, ref.org)
    return ref if org_id == ref.org else TargetRef(ref.tenant, org_id)


async def _count_spaces(client: TenantClient, org: dict[str, Any]) -> OrgSummary:
    path = catalog.fill(catalog.BY_NAME["space"].path, {"org": org["id"]})
    title = org.get("title") if isinstance(org.get("title"), str) else ""
    try:
        spaces = 0
        async for page in client.paginate(path):
            spaces += len(catalog.present(catalog.BY_NAME["space"], page))
    except ApiError as exc:
        return OrgSummary(org["id"], title, None, str(exc))
    return OrgSummary(org["id"], title, spaces)


async def org_summaries(client: TenantClient) -> list[OrgSummary]:
    """Every organization the token sees with its number of spaces, by title then id; the
    space listings run side by side (the client bounds how many at once)."""
    orgs = await visible_orgs(client)
    summaries: list[OrgSummary | None] = [None] * len(orgs)

    async def count(index: int) -> None:
        summaries[index] = await _count_spaces(client, orgs[index])

    async with anyio.create_task_group() as tg:
        for index in range(len(orgs)):
            tg.start_soon(count, index)
    return sorted((s for s in summaries if s is not None), key=lambda s: (s.title, s.id))
