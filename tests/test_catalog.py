"""The catalog is the single source of truth: it must cover every read the emulator serves."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from syncd import catalog
from syncd.emulator.app import api_routes, create_app
from syncd.emulator.store import Store


def _served_gets() -> set[str]:
    return {f"GET {path}" for method, path in api_routes(create_app(Store())) if method == "GET"}


def test_catalog_is_consistent() -> None:
    assert catalog.validate_catalog() == []
    assert len(catalog.BY_NAME) == len(catalog.KINDS)


def test_every_list_operation_the_emulator_serves_is_crawled() -> None:
    """A GET route added to the emulator without a catalog entry (or a stated reason) fails."""
    crawled = catalog.crawled_routes()
    missing = []
    for route in sorted(_served_gets()):
        shape = "GET " + catalog.route_shape(route.split(" ", 1)[1])
        if shape in crawled or route in catalog.NOT_CRAWLED:
            continue
        if route in catalog.SINGLE_OBJECT_OF:
            assert catalog.SINGLE_OBJECT_OF[route] in catalog.BY_NAME
            continue
        missing.append(route)
    assert missing == [], "GET operations neither crawled nor explained in catalog.NOT_CRAWLED"


def test_catalog_names_only_served_operations() -> None:
    served = _served_gets()
    served_shapes = {"GET " + catalog.route_shape(r.split(" ", 1)[1]) for r in served}
    assert set(catalog.NOT_CRAWLED) <= served
    assert set(catalog.SINGLE_OBJECT_OF) <= served
    stale = sorted(route for route in catalog.crawled_routes() if route not in served_shapes)
    assert stale == []


def test_paths_and_listing_keys() -> None:
    kind = catalog.BY_NAME["change-request"]
    listings = list(kind.list_paths({"org": "o1", "space": "s 1"}))
    assert listings[0] == ("/v1/spaces/s%201/change-requests", {"status": "draft"})
    assert len(listings) == 4
    integration = catalog.BY_NAME["integration"]
    assert list(integration.list_paths({"org": "o1"})) == [("/v1/integrations", {"owner": "o1"})]
    assert catalog.listing_key("/v1/x", {"b": "2", "a": "1"}) == "/v1/x?a=1&b=2"


def test_content_hash_ignores_volatile_fields_and_parent() -> None:
    space = catalog.BY_NAME["space"]
    a = {"id": "s", "title": "T", "revision": "r1", "parent": "c1", "urls": {"app": "x"}}
    b = {"id": "s", "title": "T", "revision": "r2", "parent": "c2", "urls": {"app": "y"}}
    assert catalog.content_hash(space, a) == catalog.content_hash(space, b)
    assert catalog.content_hash(space, a) != catalog.content_hash(space, {**a, "title": "U"})


@pytest.mark.parametrize("value", ["abc", "A-z_0~9", ".", "..", "...", "a.b", "a/b", "a?b#c", "a b", "%2E", "é", "", 123, "x\n"])
def test_a_value_fills_one_path_segment_as_quote_makes_it_never_a_dot_segment(value: object) -> None:
    expected = {".": "%2E", "..": "%2E%2E"}.get(quote(str(value), safe=""), quote(str(value), safe=""))
    assert catalog.segment(value) == expected
    assert catalog.fill("/v1/spaces/{space}/content/page/{page}", {"space": value, "page": "p1"}) == f"/v1/spaces/{expected}/content/page/p1"  # type: ignore[dict-item]


def test_a_template_missing_a_value_says_which() -> None:
    with pytest.raises(KeyError, match=r"needs \{page\}"):
        catalog.fill("/v1/spaces/{space}/content/page/{page}", {"space": "s1"})
    assert catalog.fill("/v1/orgs", {}) == "/v1/orgs"
