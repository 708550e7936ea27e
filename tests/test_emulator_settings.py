"""Contract tests of organization settings: SAML, OpenAPI specs, translations, custom fields."""

from __future__ import annotations

from typing import Any

from syncd.emulator.canonical import dump_org
from tests.conftest import Api


def _assert_400(status: int, data: Any, field: str) -> None:
    assert status == 400, data
    assert data["error"]["code"] == 400 and field in data["error"]["message"], data


async def _paged_ids(api: Api, path: str) -> list[str]:
    """Ids through pages of one item each: every page but the last has `next`."""
    ids, page = [], None
    while True:
        status, data = await api.get(path, limit=1, page=page)
        assert status == 200 and len(data["items"]) <= 1
        ids.extend(item["id"] for item in data["items"])
        page = (data.get("next") or {}).get("page")
        if not page:
            assert len(ids) == data["count"]
            return ids


# ----- SAML -------------------------------------------------------------------------------


async def test_saml_crud_paging_and_sso_logins(api: Api, org_id: str) -> None:
    base = f"/v1/orgs/{org_id}/saml"
    teams = await api.all_items(f"/v1/orgs/{org_id}/teams")
    status, created = await api.post(base, {"label": "Corp IdP", "defaultRole": "edit", "defaultTeam": teams[0]["id"]})
    assert status == 201 and created["object"] == "saml-provider" and created["status"] == "pending"
    assert api.last_headers["Location"] == created["urls"]["location"]
    assert created["defaultTeam"]["object"] == "team" and created["defaultTeam"]["id"] == teams[0]["id"]
    assert created["defaultRole"] == "edit" and set(created["service"]) == {"acsURL", "startURL", "entityID"}

    patch = {"ssoURL": "https://idp.example.com/sso", "entityID": "urn:idp", "certificate": "MIIC", "defaultRole": None}
    status, patched = await api.patch(f"{base}/{created['id']}", patch)
    assert status == 200 and patched["status"] == "active" and patched["defaultRole"] is None
    assert patched["label"] == "Corp IdP" and patched["ssoURL"] == patch["ssoURL"]
    status, got = await api.get(f"{base}/{created['id']}")
    assert got == patched

    ids = await _paged_ids(api, base)
    assert len(ids) >= 2 and ids[-1] == created["id"]  # creation order
    status, sso = await api.get(f"/v1/orgs/{org_id}/sso")
    assert status == 200 and set(sso) == {"items"}
    assert {"id": created["id"], "label": "Corp IdP", "startURL": created["service"]["startURL"]} in sso["items"]

    status, body = await api.delete(f"{base}/{created['id']}")
    assert status == 204 and body is None
    assert (await api.get(f"{base}/{created['id']}"))[0] == 404


async def test_saml_validation(api: Api, org_id: str, generated) -> None:
    base = f"/v1/orgs/{org_id}/saml"
    _assert_400(*await api.post(base, {"label": "x" * 31}), "label")
    _assert_400(*await api.post(base, {}), "label")
    _assert_400(*await api.post(base, {"label": "ok", "entityID": "e" * 1025}), "entityID")
    _assert_400(*await api.post(base, {"label": "ok", "certificate": "c" * 10001}), "certificate")
    _assert_400(*await api.post(base, {"label": "ok", "ssoURL": "not a url"}), "ssoURL")
    _assert_400(*await api.post(base, {"label": "ok", "defaultRole": "owner"}), "defaultRole")
    other_team = (await api.all_items(f"/v1/orgs/{generated.org_ids[1]}/teams"))[0]["id"]
    _assert_400(*await api.post(base, {"label": "ok", "defaultTeam": other_team}), "defaultTeam")
    existing = (await api.all_items(base))[0]
    _assert_400(*await api.patch(f"{base}/{existing['id']}", {"label": ""}), "label")


async def test_other_orgs_settings_are_404_for_org1_token(api: Api, generated) -> None:
    org1 = api.as_token("org1-token")
    other = generated.org_ids[1]
    saml = (await api.all_items(f"/v1/orgs/{other}/saml"))[0]
    spec = (await api.all_items(f"/v1/orgs/{other}/openapi"))[0]
    translation = (await api.all_items(f"/v1/orgs/{other}/translations"))[0]
    field = (await api.all_items(f"/v1/orgs/{other}/custom-fields"))[0]
    space = (await api.all_items(f"/v1/orgs/{other}/spaces"))[0]
    for path in (
        f"/v1/orgs/{other}/saml/{saml['id']}",
        f"/v1/orgs/{other}/openapi/{spec['slug']}",
        f"/v1/orgs/{other}/translations/{translation['id']}",
        f"/v1/orgs/{other}/custom-fields/{field['name']}",
        f"/v1/orgs/{other}/sso",
        f"/v1/spaces/{space['id']}/custom-fields",
    ):
        status, data = await org1.get(path)
        assert status == 404 and data["error"]["code"] == 404, path
    # An id of another organization under one's own organization is unknown too.
    own = generated.org_ids[0]
    assert (await org1.get(f"/v1/orgs/{own}/saml/{saml['id']}"))[0] == 404
    assert (await org1.delete(f"/v1/orgs/{own}/translations/{translation['id']}"))[0] == 404
    assert (await api.as_token(None).get(f"/v1/orgs/{own}/saml"))[0] == 401


# ----- OpenAPI specs ----------------------------------------------------------------------


async def test_openapi_create_process_and_duplicate(api: Api, org_id: str) -> None:
    base = f"/v1/orgs/{org_id}/openapi"
    status, spec = await api.post(base, {"slug": "orders-api", "source": {"url": "https://example.com/orders.yaml"}})
    assert status == 201 and spec["object"] == "openapi-spec" and spec["processingState"] == "pending"
    assert spec["sourceURL"] == "https://example.com/orders.yaml" and spec["lastVersion"]
    states = [(await api.get(f"{base}/orders-api"))[1]["processingState"] for _ in range(3)]
    assert states == ["progress", "complete", "complete"]
    status, done = await api.get(f"{base}/orders-api")
    assert done["lastProcessedAt"] and "lastProcessErrorCode" not in done and done["lastProcessedErrorCount"] == 0

    status, data = await api.post(base, {"slug": "orders-api", "source": {"text": "openapi: 3.0.0"}})
    assert status == 409 and data["error"]["code"] == 409
    _assert_400(*await api.post(base, {"slug": "Bad_Slug", "source": {"url": "https://e.com/x"}}), "slug")
    _assert_400(*await api.post(base, {"slug": "a" * 101, "source": {"url": "https://e.com/x"}}), "slug")
    _assert_400(*await api.post(base, {"slug": "trailing-", "source": {"url": "https://e.com/x"}}), "slug")
    _assert_400(*await api.post(base, {"slug": "ok"}), "source")
    _assert_400(*await api.post(base, {"slug": "ok", "source": {"url": "https://e.com/x", "text": "y"}}), "source")
    _assert_400(*await api.post(base, {"slug": "ok", "source": {"text": ""}}), "source")
    _assert_400(*await api.post(base, {"slug": "ok", "source": {"url": "https://e.com/" + "x" * 2048}}), "url")


async def test_openapi_put_creates_then_updates_version(api: Api, org_id: str) -> None:
    base = f"/v1/orgs/{org_id}/openapi"
    text = "openapi: 3.1.0\ninfo: {title: Ledger, version: '1'}\npaths: {}\n"
    status, created = await api.put(f"{base}/ledger", {"source": {"text": text}})
    assert status == 201 and created["slug"] == "ledger" and "sourceURL" not in created
    status, raw = await api.get(f"{base}/ledger/versions/latest/content/raw")
    assert status == 200 and raw == {"text": text, "format": "yaml"}

    status, same = await api.put(f"{base}/ledger", {"source": {"text": text}})
    assert status == 200 and same["lastVersion"] == created["lastVersion"]
    status, updated = await api.put(f"{base}/ledger", {"source": {"url": "https://example.com/ledger.json"}})
    assert status == 200 and updated["id"] == created["id"]
    assert updated["lastVersion"] != created["lastVersion"] and updated["processingState"] == "pending"
    assert updated["sourceURL"] == "https://example.com/ledger.json"
    assert (await api.get(f"{base}/ledger/versions/latest/content/raw"))[0] == 404

    status, bad = await api.put(f"{base}/not-parsable", {"source": {"text": "hello world"}})
    assert status == 201
    for _ in range(2):
        status, bad = await api.get(f"{base}/not-parsable")
    assert bad["processingState"] == "complete" and bad["lastProcessErrorCode"] == "PARSE_ERROR"
    _assert_400(*await api.put(f"{base}/Not-Valid", {"source": {"text": "openapi"}}), "slug")

    slugs = [s["slug"] for s in await api.all_items(base)]
    assert slugs[-2:] == ["ledger", "not-parsable"]
    assert len(await _paged_ids(api, base)) == len(slugs)
    status, body = await api.delete(f"{base}/ledger")
    assert status == 204 and body is None
    assert (await api.get(f"{base}/ledger"))[0] == 404
    assert (await api.delete(f"{base}/ledger"))[0] == 404


# ----- translations -----------------------------------------------------------------------


async def test_translations_crud(api: Api, org_id: str) -> None:
    base = f"/v1/orgs/{org_id}/translations"
    status, created = await api.post(base, {"title": "French site", "languages": ["fr", "de"]})
    assert status == 201 and created["object"] == "translation-settings"
    assert created["languages"] == ["fr", "de"] and created["permissions"] == {"view": True, "edit": True}
    status, updated = await api.put(f"{base}/{created['id']}", {"title": "French and German"})
    assert status == 200 and updated["title"] == "French and German" and updated["languages"] == ["fr", "de"]
    assert (await api.get(f"{base}/{created['id']}"))[1]["title"] == "French and German"
    ids = await _paged_ids(api, base)
    assert ids[-1] == created["id"]

    _assert_400(*await api.post(base, {}), "title")
    _assert_400(*await api.post(base, {"title": "t" * 101}), "title")
    _assert_400(*await api.post(base, {"title": "ok", "languages": ["klingon"]}), "languages")
    _assert_400(*await api.put(f"{base}/{created['id']}", {"languages": ["fr"]}), "title")

    assert (await api.delete(f"{base}/{created['id']}")) == (204, None)
    assert (await api.get(f"{base}/{created['id']}"))[0] == 404


# ----- custom fields ----------------------------------------------------------------------


async def test_custom_fields_crud_and_validation(api: Api, org_id: str) -> None:
    base = f"/v1/orgs/{org_id}/custom-fields"
    body = {"name": "tier", "type": "single-select", "title": "Tier", "options": ["gold", "silver"]}
    status, field = await api.post(base, body)
    assert status == 201 and field["object"] == "custom-field" and field["name"] == "tier"
    assert field["urls"]["location"].endswith(f"{base}/tier")
    status, data = await api.post(base, body)
    assert status == 409 and data["error"]["code"] == 409

    status, patched = await api.patch(f"{base}/tier", {"description": "Support tier", "options": ["gold", "silver", "bronze"]})
    assert status == 200 and patched["options"] == ["gold", "silver", "bronze"] and patched["description"] == "Support tier"
    assert (await api.get(f"{base}/tier"))[1] == patched
    names = [f["name"] for f in await api.all_items(base)]
    assert names[-1] == "tier" and len(await _paged_ids(api, base)) == len(names)

    _assert_400(*await api.post(base, {"name": "Bad Name", "type": "text"}), "name")
    _assert_400(*await api.post(base, {"name": "n" * 51, "type": "text"}), "name")
    _assert_400(*await api.post(base, {"name": "ok"}), "type")
    _assert_400(*await api.post(base, {"name": "ok", "type": "color"}), "type")
    _assert_400(*await api.post(base, {"name": "ok", "type": "text", "title": "t" * 101}), "title")
    _assert_400(*await api.post(base, {"name": "ok", "type": "text", "description": "d" * 201}), "description")
    _assert_400(*await api.post(base, {"name": "ok", "type": "text", "placeholder": "p" * 101}), "placeholder")
    _assert_400(*await api.post(base, {"name": "ok", "type": "multi-select", "options": [f"o{i}" for i in range(51)]}), "options")
    _assert_400(*await api.post(base, {"name": "ok", "type": "multi-select", "options": []}), "options")
    _assert_400(*await api.post(base, {"name": "ok", "type": "single-select"}), "options")
    _assert_400(*await api.patch(f"{base}/tier", {"options": [f"o{i}" for i in range(51)]}), "options")

    assert (await api.delete(f"{base}/tier")) == (204, None)
    assert (await api.get(f"{base}/tier"))[0] == 404


async def test_space_custom_field_values_round_trip(api: Api, org_id: str) -> None:
    base = f"/v1/orgs/{org_id}/custom-fields"
    await api.post(base, {"name": "rank", "type": "number"})
    await api.post(base, {"name": "public_api", "type": "boolean"})
    await api.post(base, {"name": "teams", "type": "multi-select", "options": ["a", "b", "c"]})
    await api.post(base, {"name": "level", "type": "single-select", "options": ["low", "high"]})
    await api.post(base, {"name": "note", "type": "text"})
    status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": "Valued"})
    path = f"/v1/spaces/{space['id']}/custom-fields"
    assert await api.get(path) == (200, [])

    values = {"rank": {"value": 3}, "public_api": {"value": True}, "teams": {"value": ["c", "a"]}, "level": {"value": "high"}, "note": {"value": "hi"}}
    assert await api.patch(path, {"values": values}) == (204, None)
    status, got = await api.get(path)
    assert status == 200 and isinstance(got, list)
    assert {v["customField"]["name"]: v["value"] for v in got} == {k: v["value"] for k, v in values.items()}
    assert all(v["customField"]["object"] == "custom-field" for v in got)

    for wrong in ({"rank": {"value": "three"}}, {"rank": {"value": True}}, {"public_api": {"value": "yes"}}, {"teams": {"value": ["z"]}}, {"level": {"value": "mid"}}, {"note": {"value": 5}}, {"note": {"value": "x" * 257}}):
        status, data = await api.patch(path, {"values": {**wrong, "rank": wrong.get("rank", {"value": 9})}})
        _assert_400(status, data, next(iter(wrong)))
    assert {v["customField"]["name"]: v["value"] for v in (await api.get(path))[1]}["rank"] == 3  # nothing written
    _assert_400(*await api.patch(path, {"values": {"nope": {"value": 1}}}), "nope")
    _assert_400(*await api.patch(path, {"values": {"rank": 4}}), "rank")
    _assert_400(*await api.patch(path, {}), "values")

    assert await api.patch(path, {"values": {"rank": {"value": None}, "note": {"value": None}}}) == (204, None)
    assert sorted(v["customField"]["name"] for v in (await api.get(path))[1]) == ["level", "public_api", "teams"]
    assert (await api.delete(f"{base}/teams"))[0] == 204
    assert sorted(v["customField"]["name"] for v in (await api.get(path))[1]) == ["level", "public_api"]
    await api.delete(f"/v1/spaces/{space['id']}")
    assert (await api.get(path))[0] == 404


async def test_seeded_settings_and_dump(api: Api, emulator, org_id: str) -> None:
    specs = await api.all_items(f"/v1/orgs/{org_id}/openapi")
    assert specs and all(s["processingState"] == "complete" for s in specs)
    fields = await api.all_items(f"/v1/orgs/{org_id}/custom-fields")
    assert {f["type"] for f in fields} >= {"text", "single-select"}
    dump = dump_org(emulator.store, org_id)["kinds"]
    for kind in ("saml-provider", "openapi-spec", "translation-settings", "custom-field"):
        assert dump[kind], kind
    for row in dump["openapi-spec"]:
        assert "processingState" not in row["data"] and "lastVersion" not in row["data"]
        assert "sourceURL" in row["data"] or "sourceTextSHA256" in row["data"]
    values = dump["space-custom-field-value"]
    assert values and all(row["path"].rsplit("/", 2)[-2].startswith("space:") for row in values)
    assert {row["data"]["field"] for row in values} <= {f["name"] for f in fields}
