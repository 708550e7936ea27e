"""Contract tests of docs sites, sections, section groups and site-spaces over loopback HTTP."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api


async def _spaces(api: Api, org_id: str, n: int) -> list[dict[str, Any]]:
    spaces = []
    for i in range(n):
        status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": f"Space {chr(65 + i)}"})
        assert status == 201
        spaces.append(space)
    return spaces


async def _site(api: Api, org_id: str, title: str = "My docs", **body: Any) -> tuple[dict[str, Any], str]:
    status, site = await api.post(f"/v1/orgs/{org_id}/sites", {"title": title, **body})
    assert status == 201, site
    return site, f"/v1/orgs/{org_id}/sites/{site['id']}"


async def _ids(api: Api, path: str, **params: Any) -> list[str]:
    return [item["id"] for item in await api.all_items(path, **params)]


def _before(kind: str, key: str, ref: str) -> dict[str, Any]:
    return {"position": {"before": {"type": kind, key: ref}}}


def _after(kind: str, key: str, ref: str) -> dict[str, Any]:
    return {"position": {"after": {"type": kind, key: ref}}}


async def test_create_site_with_spaces_and_read_it_back(api: Api, org_id: str) -> None:
    a, b = await _spaces(api, org_id, 2)
    site, base = await _site(api, org_id, "Product docs", visibility="unlisted", spaces=[a["id"], b["id"]])
    assert site["object"] == "site" and site["type"] == "basic" and site["visibility"] == "unlisted"
    assert site["siteSpaces"] == 2 and site["features"] == [] and site["published"] is False
    assert set(site["urls"]) >= {"location", "app"} and "published" not in site["urls"]
    assert api.last_headers["Location"].endswith(base)
    status, again = await api.get(base)
    assert status == 200 and again["title"] == "Product docs"
    items = await api.all_items(f"{base}/site-spaces")
    assert [i["space"]["id"] for i in items] == [a["id"], b["id"]]
    assert [i["default"] for i in items] == [True, False]
    assert items[0]["object"] == "site-space" and items[0]["space"]["object"] == "space"
    assert items[0]["title"] == "Space A" and items[0]["path"] == "space-a" and "section" not in items[0]
    listed = await _ids(api, f"/v1/orgs/{org_id}/sites", space=a["id"])
    assert listed == [site["id"]]
    assert site["id"] in await _ids(api, f"/v1/orgs/{org_id}/sites", title="product", published=False, type="basic")
    assert site["id"] not in await _ids(api, f"/v1/orgs/{org_id}/sites", published=True)
    status, new_space_site = await api.post(f"/v1/orgs/{org_id}/sites", {"title": "Fresh", "spaces": {"title": "Brand new"}})
    assert status == 201 and new_space_site["siteSpaces"] == 1
    fresh = await api.all_items(f"/v1/orgs/{org_id}/sites/{new_space_site['id']}/site-spaces")
    assert fresh[0]["space"]["title"] == "Brand new"


async def test_sections_groups_and_site_spaces_order_and_moves(api: Api, org_id: str) -> None:
    a, b, c, d = await _spaces(api, org_id, 4)
    site, base = await _site(api, org_id)
    secs = []
    for space, title in ((a, "Guides"), (b, "API"), (c, "Changelog")):
        status, section = await api.post(f"{base}/sections", {"spaceId": space["id"], "title": title})
        assert status == 201 and section["object"] == "site-section"
        assert [s["space"]["id"] for s in section["siteSpaces"]] == [space["id"]]
        secs.append(section)
    s1, s2, s3 = (s["id"] for s in secs)
    assert secs[0]["default"] is True and secs[1]["default"] is False and secs[0]["path"] == "guides"
    assert await _ids(api, f"{base}/sections") == [s1, s2, s3]

    # sections: before / after / end
    status, moved = await api.post(f"{base}/sections/{s3}/move", _before("site-section", "siteSection", s1))
    assert status == 200 and moved["id"] == s3
    assert await _ids(api, f"{base}/sections") == [s3, s1, s2]
    await api.post(f"{base}/sections/{s3}/move", _after("site-section", "siteSection", s1))
    assert await _ids(api, f"{base}/sections") == [s1, s3, s2]
    await api.post(f"{base}/sections/{s1}/move", {})
    assert await _ids(api, f"{base}/sections") == [s3, s2, s1]

    # a group takes sections; the list follows the group's place
    status, group = await api.post(f"{base}/section-groups", {"title": "Reference", "icon": "book", "sections": [s2, s1]})
    assert status == 201 and group["object"] == "site-section-group"
    assert [s["id"] for s in group["sections"]] == [s2, s1]
    assert await _ids(api, f"{base}/sections") == [s3, s2, s1]
    status, section = await api.patch(f"{base}/sections/{s2}", {"icon": "code"})
    assert section["sectionGroup"] == group["id"]
    status, moved_group = await api.post(f"{base}/section-groups/{group['id']}/move", _before("site-section", "id", s3))
    assert status == 200 and moved_group["id"] == group["id"]
    assert await _ids(api, f"{base}/sections") == [s2, s1, s3]
    await api.post(f"{base}/section-groups/{group['id']}/move", _after("site-section", "id", s3))
    assert await _ids(api, f"{base}/sections") == [s3, s2, s1]
    # inside the group, sections reorder among themselves only
    await api.post(f"{base}/sections/{s1}/move", _before("site-section", "siteSection", s2))
    assert await _ids(api, f"{base}/sections") == [s3, s1, s2]
    status, err = await api.post(f"{base}/sections/{s1}/move", _before("site-section", "siteSection", s3))
    assert status == 400 and err["error"]["code"] == 400

    # taking a section out of its group puts it right after the group
    status, body = await api.delete(f"{base}/section-groups/{group['id']}/sections/{s1}")
    assert status == 204 and body is None
    assert await _ids(api, f"{base}/sections") == [s3, s2, s1]
    status, _ = await api.delete(f"{base}/section-groups/{group['id']}/sections/{s1}")
    assert status == 404
    status, regrouped = await api.post(f"{base}/section-groups/{group['id']}/sections", {"sectionId": s1})
    assert status == 200 and [s["id"] for s in regrouped["sections"]] == [s2, s1]

    # site-spaces reorder within their section
    ss_path = f"{base}/site-spaces"
    for space in (b, d):
        status, ss = await api.post(ss_path, {"spaceId": space["id"], "sectionId": s3})
        assert status == 201 and ss["section"] == s3 and ss["default"] is False
    in_s3 = [i for i in await api.all_items(ss_path) if i.get("section") == s3]
    x, y, z = (i["id"] for i in in_s3)
    await api.post(f"{ss_path}/{z}/move", _before("site-space", "siteSpace", x))
    await api.post(f"{ss_path}/{x}/move", _after("site-space", "siteSpace", y))
    assert [i["id"] for i in await api.all_items(ss_path) if i.get("section") == s3] == [z, y, x]
    other = next(i["id"] for i in await api.all_items(ss_path) if i.get("section") == s2)
    status, err = await api.post(f"{ss_path}/{x}/move", _before("site-space", "siteSpace", other))
    assert status == 400

    # the published structure reflects the order
    status, published = await api.get(f"{base}/published")
    assert status == 200 and published["object"] == "published-content-site"
    structure = published["structure"]
    assert structure["type"] == "sections"
    assert [i["id"] for i in structure["structure"]] == [s3, group["id"]]
    assert [s["id"] for s in structure["structure"][1]["sections"]] == [s2, s1]
    assert [s["id"] for s in structure["structure"][0]["siteSpaces"]] == [z, y, x]
    assert published["customizations"]["site"]["title"] == site["title"]
    assert "primaryColor" in published["customizations"]["site"]["styling"]

    # deleting the group keeps its sections, in its place
    status, _ = await api.delete(f"{base}/section-groups/{group['id']}")
    assert status == 204
    assert await _ids(api, f"{base}/section-groups") == []
    assert await _ids(api, f"{base}/sections") == [s3, s2, s1]
    status, section = await api.patch(f"{base}/sections/{s2}", {"title": "API v2"})
    assert "sectionGroup" not in section


async def test_first_section_takes_root_site_spaces(api: Api, org_id: str) -> None:
    a, b, c = await _spaces(api, org_id, 3)
    site, base = await _site(api, org_id, spaces=[a["id"], b["id"]])
    status, published = await api.get(f"{base}/published")
    assert published["structure"]["type"] == "siteSpaces"
    assert [i["space"]["id"] for i in published["structure"]["structure"]] == [a["id"], b["id"]]
    status, section = await api.post(f"{base}/sections", {"spaceId": c["id"]})
    assert status == 201 and section["title"] == "Space C" and section["path"] == "space-c"
    assert [i["space"]["id"] for i in section["siteSpaces"]] == [a["id"], b["id"], c["id"]]
    status, ss = await api.post(f"{base}/site-spaces", {"spaceId": a["id"]})
    assert status == 201 and ss["section"] == section["id"] and ss["path"] == "space-a-2"
    status, created = await api.post(f"{base}/site-spaces", {"spaceId": None, "title": "Made for the site"})
    assert status == 201 and created["space"]["title"] == "Made for the site" and created["section"] == section["id"]


async def test_defaults_and_conditions(api: Api, org_id: str) -> None:
    a, b, c = await _spaces(api, org_id, 3)
    site, base = await _site(api, org_id)
    status, first = await api.post(f"{base}/sections", {"spaceId": a["id"], "title": "One"})
    status, second = await api.post(f"{base}/sections", {"spaceId": b["id"], "title": "Two"})
    status, extra = await api.post(f"{base}/site-spaces", {"spaceId": c["id"], "sectionId": second["id"]})
    status, patched = await api.patch(base, {"defaultSiteSection": second["id"], "defaultSiteSpace": extra["id"]})
    assert status == 200
    sections = await api.all_items(f"{base}/sections")
    assert [s["default"] for s in sections] == [False, True]
    assert [ss["default"] for ss in sections[1]["siteSpaces"]] == [False, True]
    assert [ss["id"] for ss in await api.all_items(f"{base}/site-spaces", default=True)] == [
        sections[0]["siteSpaces"][0]["id"],
        extra["id"],
    ]
    assert len(await api.all_items(f"{base}/site-spaces", default=False)) == 1
    # a site-space of another section cannot be the site's default
    status, err = await api.patch(base, {"defaultSiteSpace": sections[0]["siteSpaces"][0]["id"]})
    assert status == 400 and "defaultSiteSpace" in err["error"]["message"]
    # the section's own default through its PATCH
    first_ss = sections[1]["siteSpaces"][0]["id"]
    status, section = await api.patch(f"{base}/sections/{second['id']}", {"defaultSiteSpace": first_ss})
    assert [ss["default"] for ss in section["siteSpaces"]] == [True, False]
    # condition: set, omitted keeps it, null removes it
    status, section = await api.patch(f"{base}/sections/{second['id']}", {"condition": "visitor.claims.beta", "description": "Beta"})
    assert section["condition"] == "visitor.claims.beta"
    status, section = await api.patch(f"{base}/sections/{second['id']}", {"title": "Two and a half"})
    assert section["condition"] == "visitor.claims.beta" and section["title"] == "Two and a half"
    status, section = await api.patch(f"{base}/sections/{second['id']}", {"condition": None})
    assert status == 200 and "condition" not in section and section["description"] == "Beta"
    status, ss = await api.patch(f"{base}/site-spaces/{extra['id']}", {"condition": "visitor.claims.eu", "path": "europe"})
    assert ss["condition"] == "visitor.claims.eu" and ss["path"] == "europe"
    status, ss = await api.patch(f"{base}/site-spaces/{extra['id']}", {"condition": None})
    assert "condition" not in ss and ss["path"] == "europe"
    # deleting the default section hands the default to the first remaining one
    status, _ = await api.delete(f"{base}/sections/{second['id']}")
    assert status == 204
    sections = await api.all_items(f"{base}/sections")
    assert [s["id"] for s in sections] == [first["id"]] and sections[0]["default"] is True
    status, site = await api.get(base)
    assert site["siteSpaces"] == 1


async def test_site_patch_and_adaptive_schema(api: Api, org_id: str) -> None:
    site, base = await _site(api, org_id)
    status, patched = await api.patch(
        base,
        {"title": "Renamed", "visibility": "share-link", "basename": "docs", "adaptiveContent": {"enabled": True}, "proxy": "example.com/docs"},
    )
    assert status == 200 and patched["title"] == "Renamed" and patched["basename"] == "docs"
    assert patched["adaptiveContent"] == {"enabled": True} and patched["proxy"]["origin"] == "example.com/docs"
    status, patched = await api.patch(base, {"proxy": None})
    assert "proxy" not in patched
    status, schema = await api.get(f"{base}/adaptive-schema")
    assert status == 200 and schema["object"] == "site-adaptive-schema"
    assert schema["jsonSchema"]["type"] == "object" and "unsigned" in schema["jsonSchema"]["properties"]
    new = {
        "type": "object",
        "properties": {"beta": {"type": "boolean", "description": "In the beta"}},
        "additionalProperties": False,
    }
    status, schema = await api.put(f"{base}/adaptive-schema", {"jsonSchema": new})
    assert status == 200 and schema["jsonSchema"] == new and schema["updatedAt"]
    status, again = await api.get(f"{base}/adaptive-schema")
    assert again["jsonSchema"] == new
    status, err = await api.put(f"{base}/adaptive-schema", {"jsonSchema": "nope"})
    assert status == 400 and "jsonSchema" in err["error"]["message"]
    status, err = await api.put(f"{base}/adaptive-schema", {})
    assert status == 400


async def test_validation_errors(api: Api, org_id: str) -> None:
    (a,) = await _spaces(api, org_id, 1)
    site, base = await _site(api, org_id, spaces=[a["id"]])
    status, section = await api.post(f"{base}/sections", {"spaceId": a["id"], "title": "Main"})
    status, group = await api.post(f"{base}/section-groups", {"title": "G"})
    ss_id = section["siteSpaces"][0]["id"]
    cases = [
        ("POST", f"/v1/orgs/{org_id}/sites", {"title": "x"}, "title"),
        ("POST", f"/v1/orgs/{org_id}/sites", {"title": "x" * 129}, "title"),
        ("POST", f"/v1/orgs/{org_id}/sites", {"visibility": "private"}, "visibility"),
        ("POST", f"/v1/orgs/{org_id}/sites", {"type": "gold"}, "type"),
        ("POST", f"/v1/orgs/{org_id}/sites", {"spaces": ["unknown"]}, "spaces"),
        ("PATCH", base, {"title": "x"}, "title"),
        ("PATCH", base, {"basename": ""}, "basename"),
        ("PATCH", base, {"basename": "b" * 101}, "basename"),
        ("PATCH", base, {"adaptiveContent": {}}, "adaptiveContent"),
        ("PATCH", base, {"proxy": "not a url"}, "proxy"),
        ("PATCH", base, {"defaultSiteSection": "nope"}, "defaultSiteSection"),
        ("PATCH", base, {"hostname": "docs.example.com", "defaultSiteSpace": "nope"}, "defaultSiteSpace"),
        ("POST", f"{base}/sections", {"title": "Sec"}, "spaceId"),
        ("POST", f"{base}/sections", {"spaceId": "unknown"}, "spaceId"),
        ("POST", f"{base}/sections", {"spaceId": a["id"], "title": "t" * 65}, "title"),
        ("PATCH", f"{base}/sections/{section['id']}", {"title": "t" * 129}, "title"),
        ("PATCH", f"{base}/sections/{section['id']}", {"path": ""}, "path"),
        ("PATCH", f"{base}/sections/{section['id']}", {"condition": ""}, "condition"),
        ("PATCH", f"{base}/sections/{section['id']}", {"icon": "i" * 51}, "icon"),
        ("PATCH", f"{base}/sections/{section['id']}", {"description": "d" * 257}, "description"),
        ("POST", f"{base}/sections/{section['id']}/move", _before("site-space", "siteSpace", ss_id), "position"),
        ("POST", f"{base}/sections/{section['id']}/move", _before("site-section", "siteSection", "nope"), "position"),
        ("POST", f"{base}/section-groups", {"title": ""}, "title"),
        ("POST", f"{base}/section-groups", {"title": "g" * 101}, "title"),
        ("POST", f"{base}/section-groups", {"title": "G2", "sections": ["nope"]}, "sections"),
        ("POST", f"{base}/section-groups/{group['id']}/sections", {}, "sectionId"),
        ("POST", f"{base}/section-groups/{group['id']}/move", _before("site-section", "siteSection", section["id"]), "position"),
        ("POST", f"{base}/section-groups/{group['id']}/move", _before("site-section", "id", "nope"), "position"),
        ("POST", f"{base}/site-spaces", {"spaceId": "unknown"}, "spaceId"),
        ("POST", f"{base}/site-spaces", {"spaceId": a["id"], "sectionId": "nope"}, "sectionId"),
        ("PATCH", f"{base}/site-spaces/{ss_id}", {"path": "p" * 101}, "path"),
        ("PATCH", f"{base}/site-spaces/{ss_id}", {"condition": "c" * 1025}, "condition"),
        ("POST", f"{base}/site-spaces/{ss_id}/move", {"position": {"before": {"type": "site-space", "siteSpace": ss_id}, "after": {"type": "site-space", "siteSpace": ss_id}}}, "position"),
    ]
    for method, path, body, field in cases:
        status, data = await api.call(method, path, json=body)
        assert status == 400, (method, path, body, status, data)
        assert data["error"]["code"] == 400 and field in data["error"]["message"], (body, data)
    status, _ = await api.patch(base, {"hostname": "docs.example.com"})
    status, unchanged = await api.get(base)
    assert "hostname" not in unchanged and unchanged["title"] == "My docs"


async def test_other_org_site_is_404_and_delete_is_204(api: Api, generated) -> None:
    org1, org2 = generated.org_ids
    theirs = (await api.all_items(f"/v1/orgs/{org2}/sites"))[0]
    mine = api.as_token("org1-token")
    for path in (
        f"/v1/orgs/{org2}/sites/{theirs['id']}",
        f"/v1/orgs/{org1}/sites/{theirs['id']}",
        f"/v1/orgs/{org1}/sites/{theirs['id']}/sections",
        f"/v1/orgs/{org1}/sites/{theirs['id']}/published",
    ):
        status, data = await mine.get(path)
        assert status == 404 and data["error"]["code"] == 404, path
    status, _ = await api.as_token(None).get(f"/v1/orgs/{org1}/sites")
    assert status == 401
    (space,) = await _spaces(api, org1, 1)
    site, base = await _site(api, org1, spaces=[space["id"]])
    status, section = await api.post(f"{base}/sections", {"spaceId": space["id"]})
    status, _ = await api.delete(f"{base}/site-spaces/nope")
    assert status == 404
    ss_id = section["siteSpaces"][0]["id"]
    status, body = await api.delete(f"{base}/site-spaces/{ss_id}")
    assert status == 204 and body is None
    status, _ = await api.patch(f"{base}/site-spaces/{ss_id}", {"path": "x"})
    assert status == 404
    status, body = await mine.delete(base)
    assert status == 204 and body is None
    status, _ = await mine.get(base)
    assert status == 404
    status, _ = await mine.get(f"{base}/sections")
    assert status == 404


async def test_paging_with_limit_1(api: Api, org_id: str) -> None:
    spaces = await _spaces(api, org_id, 3)
    site, base = await _site(api, org_id, spaces=[s["id"] for s in spaces])
    for s in spaces:
        await api.post(f"{base}/section-groups", {"title": f"Group {s['title']}"})
    for path in (f"{base}/site-spaces", f"{base}/section-groups", f"/v1/orgs/{org_id}/sites"):
        status, first = await api.get(path, limit=1)
        assert status == 200 and len(first["items"]) == 1 and first["next"]["page"]
        paged = await api.all_items(path, limit=1)
        whole = await api.all_items(path)
        assert [i["id"] for i in paged] == [i["id"] for i in whole] and len(whole) == first["count"] >= 3


async def test_generated_sites_are_varied(api: Api, org_id: str) -> None:
    sites = await api.all_items(f"/v1/orgs/{org_id}/sites")
    assert len(sites) == 2
    shapes = set()
    for site in sites:
        base = f"/v1/orgs/{org_id}/sites/{site['id']}"
        status, published = await api.get(f"{base}/published")
        shapes.add(published["structure"]["type"])
        site_spaces = await api.all_items(f"{base}/site-spaces")
        assert site["siteSpaces"] == len(site_spaces) > 0
        assert len({(s.get("section"), s["path"]) for s in site_spaces}) == len(site_spaces)
        if published["structure"]["type"] == "sections":
            sections = await api.all_items(f"{base}/sections")
            assert sum(s["default"] for s in sections) == 1
            assert any("sectionGroup" in s for s in sections)
            status, schema = await api.get(f"{base}/adaptive-schema")
            assert len(schema["jsonSchema"]["properties"]) > 1
    assert shapes == {"sections", "siteSpaces"}
