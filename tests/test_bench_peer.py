"""The peer benchmark's dlt configuration (bench/dlt_child.py) against syncd's catalog, and
its report's medians (bench/peer.py). Neither imports dlt: the configuration is plain dicts
and functions, so the suite checks it without the `bench` extra; the runs are the benchmark's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import dlt_child  # noqa: E402
import peer  # noqa: E402

from syncd.catalog import BY_NAME, KINDS, route_shape  # noqa: E402

REFERENCE = re.compile(r"\{resources\.([a-z_]+)\.([a-z_]+)\}")


def test_every_list_of_the_catalog_is_a_dlt_resource_on_the_same_path() -> None:
    resources = dlt_child.resources()
    read = {r["_kind"] for r in resources}
    assert read == {kind.name for kind in KINDS}
    for r in resources:
        path = "/v1/" + r["endpoint"]["path"]
        # syncd too reads the organizations from GET /v1/orgs, its entry point
        expected = "/v1/orgs" if r["_kind"] == "organization" else BY_NAME[r["_kind"]].path
        assert route_shape(path) == route_shape(expected), r["name"]
    assert set(dlt_child.NOT_EXPRESSED) <= set(BY_NAME)
    # the four change-request lists (one a status) load into one table, as do their children
    crs = [r for r in resources if r["_kind"] == "change-request"]
    assert sorted(r["endpoint"]["params"]["status"] for r in crs) == sorted(dlt_child.CR_STATUSES)
    assert {r["table_name"] for r in crs} == {"change_requests"}
    assert dlt_child.kind_of_table()["change_request_pages"] == "change-request-page"


def test_a_child_resolves_only_what_an_earlier_parent_gives() -> None:
    seen: dict[str, dict[str, object]] = {}
    for r in dlt_child.resources():
        refs = set(REFERENCE.findall(str(r["endpoint"])))
        parents = {parent for parent, _ in refs}
        assert len(parents) <= 1, r["name"]  # rest_api resolves from one parent
        for parent, name in refs:
            assert parent in seen, f"{r['name']} before its parent {parent}"
            assert name in {"id", "slug", "name"} | set(seen[parent]["_kept"]), f"{r['name']}: {parent}.{name}"
        if r["_kept"]:
            assert parents, r["name"]  # include_from_parent needs a parent
        seen[r["name"]] = r


def test_the_config_pages_by_the_next_page_token_and_hides_nothing_of_ours_from_dlt() -> None:
    config = dlt_child.rest_api_config("http://127.0.0.1:9/", "secret")
    client = config["client"]
    assert client["base_url"] == "http://127.0.0.1:9/v1/"
    assert client["auth"] == {"type": "bearer", "token": "secret"}
    assert client["paginator"] == {"type": "cursor", "cursor_path": "next.page", "cursor_param": "page"}
    assert all(not key.startswith("_") for r in config["resources"] for key in r)
    paged = [r for r in config["resources"] if "paginator" not in r["endpoint"]]
    assert paged and all(r["endpoint"]["params"]["limit"] == 1000 for r in paged)


def test_a_page_tree_becomes_a_row_a_page_with_its_parent() -> None:
    tree = {"id": "a", "_spaces_id": "s", "pages": [
        {"id": "b", "pages": [{"id": "c", "pages": []}]},
        {"id": "d"},
    ]}
    rows = list(dlt_child.flatten_tree(tree))
    assert [(r["id"], r["parent_page_id"]) for r in rows] == [("a", None), ("b", "a"), ("c", "b"), ("d", "a")]
    assert all("pages" not in r and r["_spaces_id"] == "s" for r in rows)
    assert list(dlt_child.flattened(tree)) == [rows]  # one list: a child resource iterates rows, not keys
    assert tree["pages"][0]["pages"][0] == {"id": "c", "pages": []}  # the answer is left as it came


def test_renamed_parent_columns_and_dropped_fields() -> None:
    r = next(r for r in dlt_child.resources() if r["name"] == "page_links")
    assert r["include_from_parent"] == ["space_id", "id"]
    (rename,) = [step["map"] for step in r["processing_steps"]]
    assert rename({"x": 1, "_pages_space_id": "s", "_pages_id": "p"}) == {"x": 1, "space_id": "s", "page_id": "p"}
    revision = next(r for r in dlt_child.resources() if r["name"] == "revisions")
    drop = revision["processing_steps"][0]["map"]
    assert drop({"id": "r", "pages": [], "files": []}) == {"id": "r"}


def _run(tool: str, wall: float, objects: int, disk: int) -> peer.Run:
    return peer.Run(tool=tool, wall=wall, own_wall=wall, cpu=wall / 2, peak_rss_mb=100.0, objects=objects,
                    disk_bytes=disk, requests=10, server_cpu=None)


def test_the_table_shows_the_medians_of_each_tool() -> None:
    runs = {
        "syncd": [_run("syncd", w, 1000, 1_500_000) for w in (19.0, 30.0, 18.0)],
        "dlt": [_run("dlt", w, 1000, 300_000) for w in (150.0, 160.0, 156.0)],
    }
    table = peer.markdown_table(runs, 1000)
    assert "| wall | 19.0 s | 156.0 s |" in table
    assert "| bytes per object | 1,500 | 300 |" in table
    assert table.splitlines()[0].startswith("| medians of 3 interleaved runs each, ~1,000 objects |")


def test_requests_are_counted_by_catalog_kind() -> None:
    stats = {"routes": [
        {"route": "/v1/orgs", "count": 1},
        {"route": "/v1/spaces/{spaceId}/content/pages", "count": 4},
        {"route": "/v1/spaces/{spaceId}/change-requests", "count": 3},
        {"route": "/v1/spaces/{spaceId}/change-requests", "count": 1},
    ]}
    assert peer.requests_by_kind(stats) == {"organization": 1, "page": 4, "change-request": 4}
