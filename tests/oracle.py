"""Independent oracles built on the emulator's canonical dump (`/_emulator/orgs/{id}/dump`).

- `copied_view`: what a copy must reproduce, by path and writable data, so the target's view
  equals the source's after a correct copy (ids differ, paths and content do not); SAML
  providers only for a copy `--with-access` (the target keeps its own otherwise); a page's
  emoji and hidden flag only where the service's importer reads the markdown alternate (an
  importer that reads the HTML alone has no place for them: row
  `import-reads-markdown-alternate`, docs/concepts/content.md);
- `mirror_mismatches`: whether a syncd mirror holds exactly the objects of the dump.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from syncd.copy.meaning import meaning
from syncd.state import StateStore

COPIED = (
    "collection", "space", "page", "team", "custom-field", "space-custom-field-value", "translation-settings",
    "openapi-spec", "site", "site-section-group", "site-section", "site-space", "site-adaptive-schema",
)
ACCESS = ("saml-provider",)
"""Kinds only a copy `--with-access` reproduces."""
ORDERED = ("collection", "space", "page")
NOT_WRITABLE = {
    "team": {"memberEmails", "members"},  # members must be invited on the target: reported as a skip
    "space": {"visibility"},  # not writable through PATCH /v1/spaces/{id} in the spec
}
SAME_NAME = (
    "organization", "member", "team", "collection", "space", "page", "file", "change-request",
    "saml-provider", "openapi-spec", "custom-field", "site", "site-section-group", "site-section",
    "site-space", "integration", "integration-installation",
)
"""Kinds whose mirror rows and dump rows share a name and an id."""


HTML_CANNOT_CARRY = {"page": {"emoji", "hidden"}}
"""Fields an import that reads a page's HTML alone cannot write (row `import-reads-markdown-alternate`)."""


def _copyable(kind: str, data: Any, html_only: bool = False) -> Any:
    """The writable fields; a page's markdown as what it says: an importer may write it in its
    own style (docs/concepts/open-points.md, row `import-style`), and a copy promises the words."""
    if not isinstance(data, dict):
        return data
    dropped = NOT_WRITABLE.get(kind, set()) | (HTML_CANNOT_CARRY.get(kind, set()) if html_only else set())
    out = {k: v for k, v in data.items() if k not in dropped}
    if kind == "page" and isinstance(out.get("markdown"), str):
        title = out.get("title")
        out["markdown"] = meaning(out["markdown"], title if isinstance(title, str) else None)  # a first `# Title` is the title
    return out


def copied_view(dump: Mapping[str, Any], *, with_access: bool = False, html_only: bool = False) -> dict[str, list[tuple[str, Any]]]:
    """The copied kinds of a dump as (path, writable data) rows, in a copy-independent order;
    `html_only`: the service's importer reads pages from their HTML alone."""
    kinds = dump["kinds"]
    copied = COPIED + ACCESS if with_access else COPIED
    out = {kind: [(row["path"], _copyable(kind, row["data"], html_only)) for row in kinds.get(kind, [])] for kind in copied}

    # Kinds without positions are listed in creation order, which concurrent creates do not
    # keep; site parts keep their order within their site, sites themselves have none.
    def order(kind: str, rows: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        if kind.startswith("site-"):
            return sorted(rows, key=lambda r: r[0].split("/", 1)[0])
        return rows if kind in ORDERED else sorted(rows, key=lambda r: r[0])

    return {kind: order(kind, rows) for kind, rows in out.items()}


def _ids(mirror: StateStore, tenant: str, org: str | None, kinds: tuple[str, ...]) -> set[str]:
    return {row["id"].rsplit("/", 1)[-1] for kind in kinds for row in mirror.current(tenant, kind=kind, org=org)}


def mirror_mismatches(db: Path | str, tenant: str, dump: Mapping[str, Any], org: str | None = None) -> list[str]:
    """Where the mirror's current rows differ from the dump: ids of every kind, page markdown,
    titles. Empty when they agree. `org` limits the mirror side to one organization."""
    kinds = dump["kinds"]
    problems: list[str] = []

    def check(label: str, found: set[str], expected: set[str]) -> None:
        if found != expected:
            problems.append(f"{label}: missing {sorted(expected - found)[:5]}, extra {sorted(found - expected)[:5]}")

    with StateStore(db) as mirror:
        for kind in SAME_NAME:
            check(kind, _ids(mirror, tenant, org, (kind,)), {row["id"].rsplit(":", 1)[-1] for row in kinds[kind]})
        check("translation", _ids(mirror, tenant, org, ("translation",)), {row["id"] for row in kinds["translation-settings"]})
        check("comment", _ids(mirror, tenant, org, ("comment", "change-request-comment")), {row["id"] for row in kinds["comment"]})
        check(
            "comment-reply",
            _ids(mirror, tenant, org, ("comment-reply", "change-request-comment-reply")),
            {row["id"] for row in kinds["comment-reply"]},
        )
        values = {f"{r['parent_id']}:{r['data']['customField']['id']}" for r in mirror.current(tenant, kind="space-custom-field-value", org=org)}
        check("space-custom-field-value", values, {row["id"] for row in kinds["space-custom-field-value"]})
        schemas = {r["id"].split("/")[0] for r in mirror.current(tenant, kind="site-adaptive-schema", org=org)}
        if not {row["id"] for row in kinds["site-adaptive-schema"]} <= schemas:
            problems.append("site-adaptive-schema: missing schemas")
        pages = {r["id"].rsplit("/", 1)[-1]: r["data"] for r in mirror.current(tenant, kind="page", org=org)}
        for row in kinds["page"]:  # markdown kept whole
            page = pages.get(row["id"].rsplit(":", 1)[-1])
            if page is not None and page.get("markdown") != row["data"].get("markdown"):
                problems.append(f"page {row['id']}: markdown differs")
        for kind in ("collection", "space"):
            titles = {r["id"].rsplit("/", 1)[-1]: r["data"].get("title") for r in mirror.current(tenant, kind=kind, org=org)}
            for row in kinds[kind]:
                key = row["id"].rsplit(":", 1)[-1]
                if key in titles and titles[key] != row["data"].get("title"):
                    problems.append(f"{kind} {key}: title {titles[key]!r} in the mirror, {row['data'].get('title')!r} in the dump")
    return problems
