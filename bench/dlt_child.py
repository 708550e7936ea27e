"""The peer of bench/peer.py: dlt's `rest_api` source over the emulator into DuckDB, as a dlt
user configures it, in a child process of its own (so its peak RSS is its own).

`rest_api_config(url, token)` is the configuration: plain dicts and a few functions, built
without importing dlt (tests/test_bench_peer.py checks it against syncd's catalog without dlt
installed). It follows the spec's paging (`?page=` from the answer's `next.page`, items in
`items`, at most 1,000 a page, like syncd) and reads every list of syncd's catalog
(`syncd/catalog.py`) that dlt's rest_api can express, each a resource resolved from its parent
(`{resources.spaces.id}`); `NOT_EXPRESSED` says what it cannot. Each resource's table is named
after the list; rows of a list under a parent keep the parent's id in a column of their own
(`space_id`, `page_id`, ...: `include_from_parent`, renamed), as syncd's rows keep their parent.
The write disposition is `replace`: a full snapshot a run, as syncd's `sync --full`.

Child: `python bench/dlt_child.py FIGURES.json --url URL --token TOKEN --folder DIR`. It runs
the pipeline into DIR/peer.duckdb (dlt's working files under DIR/dlt, telemetry off) and
writes FIGURES.json: the wall of `pipeline.run`, its peak RSS (its own and its children's) and
dlt's version. The parent counts the rows (`count_rows`) once the child has exited.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PAGE_LIMIT = 1000
"""Items a page, as syncd asks (`syncd.api.paging.PAGE_LIMIT`; the spec's maximum)."""

CR_STATUSES = ("draft", "open", "archived", "merged")
"""The change-request list's status filter has no 'all' (as syncd's catalog says): one
resource a status, all four into one table."""

NOT_EXPRESSED: dict[str, str] = {
    "comment-reply": "syncd reads a comment's replies only when its `replies` count is not 0; "
                     "rest_api resolves a child for every parent row, so dlt asks every comment",
    "change-request-comment-reply": "likewise, for every change-request comment",
    "page-link": "syncd reads a page's links only for pages that the space's link listing names as a "
                 "location; dlt asks every page",
    "change-request-page-link": "syncd reads a change request's page links only where the page's body has "
                                "links and differs from the space's page (the same `documentId` has the same "
                                "links, stored once); dlt asks every change-request page and stores those again",
    "openapi-spec-source": "syncd reads the raw text only of specs created from text (no `sourceURL`); "
                           "dlt asks every spec and ignores the 404 of a spec from a URL",
}
"""What dlt's rest_api config cannot say as syncd's catalog does, by catalog kind: each is
read anyway, only with more requests (a `when` of the catalog; a child resource cannot be
limited to some of its parent's rows without filtering the parent's own table)."""


def flatten_tree(page: dict[str, Any], parent: str | None = None) -> Iterator[dict[str, Any]]:
    """A page of a `{pages: [...]}` tree and every page under it, each a row of its own with
    its parent page's id, in tree order (a dlt `yield_map`). The columns a parent resource
    put on the top page (`_spaces_id`) go on each."""
    carried = {key: value for key, value in page.items() if key.startswith("_")}
    stack: list[tuple[dict[str, Any], str | None]] = [(page, parent)]
    while stack:
        node, above = stack.pop()
        children = node.get("pages") or []
        row = {key: value for key, value in node.items() if key != "pages"}
        row.update(carried)
        row["parent_page_id"] = above
        yield row
        stack.extend((child, node.get("id")) for child in reversed(children))


def flattened(page: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """`flatten_tree` as one list (the `yield_map` step): a rest_api child resource iterates
    what its parent yields as a list of rows, and a lone row would be iterated by its keys."""
    yield list(flatten_tree(page))


def _renamer(renames: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `map` step: the columns `include_from_parent` adds (`_spaces_id`) get plain names (`space_id`)."""

    def rename(item: dict[str, Any]) -> dict[str, Any]:
        for old, new in renames.items():
            if old in item:
                item[new] = item.pop(old)
        return item

    return rename


def _without(*fields: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `map` step dropping fields that are rows of their own (a revision's pages and files)."""

    def drop(item: dict[str, Any]) -> dict[str, Any]:
        for name in fields:
            item.pop(name, None)
        return item

    return drop


def _resource(
    name: str,
    path: str,
    kind: str,
    *,
    parent: str | None = None,
    keep: dict[str, str] | None = None,
    selector: str = "items",
    single: bool = False,
    tree: bool = False,
    table: str | None = None,
    params: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    ignore_404: bool = False,
) -> dict[str, Any]:
    """One rest_api resource. `keep` names the parent's fields to copy into each row
    ({column: parent field}); `single`: one object or an unpaged list; `tree`: a page tree."""
    endpoint: dict[str, Any] = {"path": path, "data_selector": selector}
    if single or tree:
        endpoint["paginator"] = "single_page"
    else:
        endpoint["params"] = {"limit": PAGE_LIMIT, **(params or {})}
    if ignore_404:
        endpoint["response_actions"] = [{"status_code": 404, "action": "ignore"}]
    config: dict[str, Any] = {"name": name, "endpoint": endpoint, "table_name": table or name}
    steps: list[dict[str, Any]] = []
    if tree:
        steps.append({"yield_map": flattened})
    if drop:
        steps.append({"map": _without(*drop)})
    if keep:
        assert parent is not None
        config["include_from_parent"] = list(keep.values())
        steps.append({"map": _renamer({f"_{parent}_{field}": column for column, field in keep.items()})})
    if steps:
        config["processing_steps"] = steps
    # Taken out before dlt sees the config: the catalog kind it reads, the parent's ids it keeps.
    config["_kind"], config["_kept"] = kind, tuple(keep or ())
    return config


def _ref(resource: str, field: str) -> str:
    return "{resources.%s.%s}" % (resource, field)


def resources() -> list[dict[str, Any]]:
    """Every resource, parents before children (a catalog kind each, change requests four)."""
    org = "organizations"
    o = _ref(org, "id")
    out = [
        _resource(org, "orgs", "organization"),
        _resource("members", f"orgs/{o}/members", "member", parent=org, keep={"organization_id": "id"}),
        _resource("teams", f"orgs/{o}/teams", "team"),
        _resource("saml_providers", f"orgs/{o}/saml", "saml-provider"),
        _resource("sso_providers", f"orgs/{o}/sso", "sso-provider", single=True),
        _resource("openapi_specs", f"orgs/{o}/openapi", "openapi-spec", parent=org, keep={"organization_id": "id"}),
        _resource("translations", f"orgs/{o}/translations", "translation"),
        _resource("custom_fields", f"orgs/{o}/custom-fields", "custom-field"),
        _resource("integrations", "integrations", "integration",
                  params={"owner": o}),
        _resource("collections", f"orgs/{o}/collections", "collection"),
        _resource("spaces", f"orgs/{o}/spaces", "space"),
        _resource("sites", f"orgs/{o}/sites", "site", parent=org, keep={"organization_id": "id"}),
    ]
    m, spec, site = "members", "openapi_specs", "sites"
    out += [
        _resource("member_spaces", f"orgs/{_ref(m, 'organization_id')}/members/{_ref(m, 'id')}/spaces", "member-space",
                  parent=m, keep={"member_id": "id"}),
        _resource("member_teams", f"orgs/{_ref(m, 'organization_id')}/members/{_ref(m, 'id')}/teams", "member-team",
                  parent=m, keep={"member_id": "id"}),
        _resource("openapi_spec_sources",
                  f"orgs/{_ref(spec, 'organization_id')}/openapi/{_ref(spec, 'slug')}/versions/latest/content/raw",
                  "openapi-spec-source", parent=spec, keep={"spec_slug": "slug"}, selector="$", single=True, ignore_404=True),
        _resource("integration_installations", f"integrations/{_ref('integrations', 'name')}/installations",
                  "integration-installation", parent="integrations", keep={"integration": "name"}),
        _resource("collection_spaces", f"collections/{_ref('collections', 'id')}/spaces", "collection-space",
                  parent="collections", keep={"collection_id": "id"}),
    ]
    for name, leaf, kind, how in (
        ("site_section_groups", "section-groups", "site-section-group", {}),
        ("site_sections", "sections", "site-section", {}),
        ("site_spaces", "site-spaces", "site-space", {}),
        ("site_adaptive_schemas", "adaptive-schema", "site-adaptive-schema", {"selector": "$", "single": True}),
        ("site_published", "published", "site-published", {"selector": "$", "single": True}),
    ):
        out.append(_resource(name, f"orgs/{_ref(site, 'organization_id')}/sites/{_ref(site, 'id')}/{leaf}", kind,
                             parent=site, keep={"site_id": "id"}, **how))
    out += _space_content("spaces", "spaces/{space}", "", "", keep={"space_id": "id"}, space_field="id")
    return out


def _space_content(parent: str, base: str, prefix: str, suffix: str, *, keep: dict[str, str], space_field: str) -> list[dict[str, Any]]:
    """The lists of a space (parent `spaces`) or of a change request (parent one of the four
    change-request resources): `base` is their path with `{space}` (and `{change_request}`)."""
    kinds = "change-request-" if prefix else ""
    path = base.replace("{space}", _ref(parent, space_field)).replace("{change_request}", _ref(parent, "id"))
    k = {"keep": keep, "parent": parent}
    pages, files, comments = f"{prefix}pages{suffix}", f"{prefix}files{suffix}", f"{prefix}comments{suffix}"
    kept = {column: column for column in keep}  # a grandchild keeps the ids its parent kept
    out = [
        _resource(f"{prefix}revisions{suffix}", f"{path}/content", f"{kinds}revision", selector="$", single=True,
                  drop=("pages", "files"), table=f"{prefix}revisions", **k),
        _resource(pages, f"{path}/content/pages", f"{kinds}page", selector="pages", tree=True, table=f"{prefix}pages", **k),
        _resource(f"{prefix}page_links{suffix}", _child_path(pages, kept, "content/page/{id}/links"), f"{kinds}page-link",
                  parent=pages, keep={**kept, "page_id": "id"}, table=f"{prefix}page_links"),
        _resource(files, f"{path}/content/files", f"{kinds}file", table=f"{prefix}files", **k),
        _resource(f"{prefix}file_backlinks{suffix}", _child_path(files, kept, "content/files/{id}/backlinks"),
                  f"{kinds}file-backlink", parent=files, keep={**kept, "file_id": "id"}, table=f"{prefix}file_backlinks"),
        _resource(comments, f"{path}/comments", f"{kinds}comment", table=f"{prefix}comments", **k),
        _resource(f"{prefix}comment_replies{suffix}", _child_path(comments, kept, "comments/{id}/replies"),
                  f"{kinds}comment-reply", parent=comments, keep={**kept, "comment_id": "id"}, table=f"{prefix}comment_replies"),
    ]
    if prefix:
        return out
    out.insert(0, _resource("space_custom_field_values", f"{path}/custom-fields", "space-custom-field-value",
                            selector="$", single=True, **k))
    out.append(_resource("space_links", f"{path}/links", "space-link", **k))
    for status in CR_STATUSES:
        crs = f"change_requests_{status}"
        out.append(_resource(crs, f"{path}/change-requests", "change-request", params={"status": status},
                             table="change_requests", **k))
        out += _space_content(crs, "spaces/{space}/change-requests/{change_request}", "change_request_", f"_{status}",
                              keep={"space_id": "space_id", "change_request_id": "id"}, space_field="space_id")
    return out


def _child_path(parent: str, kept: dict[str, str], leaf: str) -> str:
    """The path of a list under a page, file or comment: the space (and change request) from the
    columns the parent kept, the row's own id for `{id}`."""
    path = "spaces/" + _ref(parent, "space_id")
    if "change_request_id" in kept:
        path += "/change-requests/" + _ref(parent, "change_request_id")
    return f"{path}/{leaf.replace('{id}', _ref(parent, 'id'))}"


def rest_api_config(url: str, token: str) -> dict[str, Any]:
    """The `RESTAPIConfig` for the emulator at `url`: bearer token, the `next.page` cursor."""
    return {
        "client": {
            "base_url": url.rstrip("/") + "/v1/",
            "auth": {"type": "bearer", "token": token},
            "paginator": {"type": "cursor", "cursor_path": "next.page", "cursor_param": "page"},
        },
        "resource_defaults": {"write_disposition": "replace"},
        "resources": [{k: v for k, v in r.items() if not k.startswith("_")} for r in resources()],
    }


def kind_of_table() -> dict[str, str]:
    """The catalog kind each table holds (the four change-request resources share one table)."""
    return {r["table_name"]: r["_kind"] for r in resources()}


DATASET = "docs"
DATABASE = "peer.duckdb"


def count_rows(database: Path) -> dict[str, int]:
    """Rows of each resource's table (its nested tables, `pages__tags` and the like, are parts
    of those rows, not objects); a table dlt did not create (no rows came) counts 0."""
    import duckdb

    with duckdb.connect(str(database), read_only=True) as conn:
        present = {name for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [DATASET]).fetchall()}
        return {
            table: (int(conn.execute(f'SELECT count(*) FROM {DATASET}."{table}"').fetchone()[0]) if table in present else 0)
            for table in kind_of_table()
        }


def database_bytes(database: Path) -> int:
    """The DuckDB file and its write-ahead log, if one is left."""
    return sum(path.stat().st_size for path in database.parent.glob(database.name + "*") if path.is_file())


def _child(figures: Path, url: str, token: str, folder: Path) -> int:
    """Run the pipeline once, then write the figures."""
    import dlt
    from dlt.sources.rest_api import rest_api_source

    pipeline = dlt.pipeline(
        pipeline_name="syncd_peer", destination=dlt.destinations.duckdb(str(folder / DATABASE)),
        dataset_name=DATASET, pipelines_dir=str(folder / "dlt"),
    )
    started = time.perf_counter()
    code = 1
    try:
        pipeline.run(rest_api_source(rest_api_config(url, token), name="docs_api"))
        code = 0
    finally:
        wall = time.perf_counter() - started
        peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        figures.write_text(json.dumps({"wall": wall, "code": code, "maxrss_kb": peak, "dlt": dlt.__version__}))
    return code


def child_environment() -> dict[str, str]:
    """dlt's settings for the child: no telemetry (nothing leaves the machine), warnings only."""
    return {**os.environ, "RUNTIME__DLTHUB_TELEMETRY": "false", "RUNTIME__LOG_LEVEL": "WARNING"}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="dlt's rest_api over the emulator into DuckDB (bench/peer.py's child)")
    parser.add_argument("figures", type=Path)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--folder", type=Path, required=True)
    args = parser.parse_args()
    sys.exit(_child(args.figures, args.url, args.token, args.folder))
