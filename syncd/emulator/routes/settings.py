"""Organization settings: SAML providers, OpenAPI specs, translation settings, custom fields.

All four are flat, per-organization kinds listed in creation order. Reads need membership,
writes need the admin role (they change how the whole organization signs in or publishes).
Custom field values of a space live here too, one record per (space, field), with the id
`<space id>:<field id>` so a space's values are found without scanning every record.

This module holds their routes, generator and dump kinds; the records and their rendering are
in `settings_model`.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, conflict, not_found
from syncd.emulator.profile import profile_of, unordered
from syncd.emulator.routes.members import TEAM
from syncd.emulator.routes.settings_model import (
    CUSTOM_FIELD,
    FIELD_VALUE,
    OPENAPI,
    SAML,
    TRANSLATION,
    advance_processing,
    check_value,
    field_by_name,
    finish_processing,
    new_custom_field,
    new_openapi_spec,
    new_saml_provider,
    new_translation,
    org_custom_fields,
    org_openapi_specs,
    org_saml_providers,
    org_translations,
    render_custom_field,
    render_openapi_spec,
    render_saml_provider,
    render_translation,
    saml_service,
    set_field_value,
    set_spec_source,
    space_field_values,
    spec_by_slug,
)
from syncd.emulator.routes.space_model import SPACE, live_space, org_spaces
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
FIELD_NAME_PATTERN = r"^[a-z0-9_-]+$"
# The language codes of the public OpenAPI document's `TranslationLanguage`.
LANGUAGES = (
    "en fr de es it pt pt-br ru ja zh zh-tw yue ko ar hi nl pl tr sv no da fi el cs hu ro th vi id ms he uk sk "
    "bg hr lt lv et sl"
).split()
# Custom field types: "not shown" in the spec; these cover the value variants the service
# accepts (string, number, boolean, string[]).
FIELD_TYPES = ("text", "number", "boolean", "single-select", "multi-select")
SELECT_TYPES = ("single-select", "multi-select")


# ----- shared helpers ---------------------------------------------------------------------


def _org(request: web.Request) -> tuple[Store, Record]:
    """(store, organization) for a read: the caller must be a member."""
    store = h.store_of(request)
    return store, store.org_for(h.user_of(request), request.match_info["organizationId"])


def _admin_org(request: web.Request) -> tuple[Store, Record]:
    """(store, organization) for a write: the caller must be an admin of it."""
    store, org = _org(request)
    store.require_admin(h.user_of(request), org["id"])
    return store, org


def _in_org(store: Store, kind: str, record_id: str, org_id: str, label: str) -> Record:
    record = store.get(kind, record_id)
    if record is None or record.get("org") != org_id:
        raise not_found(f"{label} {record_id!r} not found")
    return record


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ----- SAML providers ---------------------------------------------------------------------


def _saml_fields(store: Store, org_id: str, body: dict[str, Any], creating: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if creating or "label" in body:
        fields["label"] = h.text(body, "label", required=True, min_len=1, max_len=30)
    if "entityID" in body:
        fields["entityID"] = h.text(body, "entityID", max_len=1024)
    if "certificate" in body:
        fields["certificate"] = h.text(body, "certificate", max_len=10000)
    if "ssoURL" in body:
        fields["ssoURL"] = h.url_field(body, "ssoURL", allow_empty=True)
    if "defaultTeam" in body:
        team_id = h.text(body, "defaultTeam", nullable=True)
        if team_id:
            team = store.get(TEAM, team_id)
            if team is None or team.get("org") != org_id:
                raise bad_request(f"defaultTeam: team {team_id!r} not found in this organization")
        fields["defaultTeam"] = team_id or None
    if "defaultRole" in body:
        fields["defaultRole"] = h.role(body, "defaultRole", nullable=True)
    return fields


@routes.get("/v1/orgs/{organizationId}/saml")
async def list_saml(request: web.Request) -> web.Response:
    store, org = _org(request)
    base = h.base_url(request)
    return h.list_answer(
        request, org_saml_providers(store, org["id"]), lambda r: render_saml_provider(store, r, base), label=lambda r: r["label"]
    )


@routes.post("/v1/orgs/{organizationId}/saml")
async def create_saml(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    fields = _saml_fields(store, org["id"], await h.json_body(request), creating=True)
    record = new_saml_provider(store, org["id"], fields.pop("label"), **fields)
    data = render_saml_provider(store, record, h.base_url(request))
    response = h.json_answer(data, status=201)
    response.headers["Location"] = data["urls"]["location"]
    return response


def _saml(store: Store, org: Record, request: web.Request) -> Record:
    return _in_org(store, SAML, request.match_info["samlProviderId"], org["id"], "SAML provider")


@routes.get("/v1/orgs/{organizationId}/saml/{samlProviderId}")
async def get_saml(request: web.Request) -> web.Response:
    store, org = _org(request)
    return h.json_answer(render_saml_provider(store, _saml(store, org, request), h.base_url(request)))


@routes.patch("/v1/orgs/{organizationId}/saml/{samlProviderId}")
async def patch_saml(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    record = _saml(store, org, request)
    record.update(_saml_fields(store, org["id"], await h.json_body(request), creating=False))
    return h.json_answer(render_saml_provider(store, record, h.base_url(request)))


@routes.delete("/v1/orgs/{organizationId}/saml/{samlProviderId}")
async def delete_saml(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    store.remove(SAML, _saml(store, org, request)["id"])
    return h.no_content()


@routes.get("/v1/orgs/{organizationId}/sso")
async def list_sso_logins(request: web.Request) -> web.Response:
    """The sign-in choices of the organization: not a paged list (`items` only), in the
    profile's order for unordered lists."""
    store, org = _org(request)
    base = h.base_url(request)
    providers = unordered(profile_of(request), org_saml_providers(store, org["id"]), lambda r: r["label"])
    items = [{"id": r["id"], "label": r["label"], "startURL": saml_service(r, base)["startURL"]} for r in providers]
    return h.json_answer({"items": items})


# ----- OpenAPI specs ----------------------------------------------------------------------


def _source(body: dict[str, Any]) -> dict[str, str]:
    """`{url}` or `{text}` (the public OpenAPI document's two `OpenAPISpecSource` shapes)."""
    source = h.obj(body, "source", required=True)
    if "url" in source and "text" not in source:
        return {"url": str(h.url_field(source, "url", 2048, required=True))}
    if "text" in source and "url" not in source:
        text = source["text"]
        if not isinstance(text, str) or not text:
            raise bad_request("source.text: must be a non-empty string")
        return {"text": text}
    raise bad_request("source: must be {url: <URL>} or {text: <specification text>}")


def _dump_openapi_spec(store: Store, record: Record, base: str) -> dict[str, Any]:
    """The API shape plus a digest of a text source, so a copy must carry the same text."""
    data = render_openapi_spec(store, record, base)
    if "text" in record["source"]:
        data["sourceTextSHA256"] = _sha256(record["source"]["text"])
    return data


def _slug_in_path(request: web.Request) -> str:
    return request.match_info["specSlug"]


def _spec(store: Store, org: Record, request: web.Request) -> Record:
    record = spec_by_slug(store, org["id"], _slug_in_path(request))
    if record is None:
        raise not_found(f"OpenAPI spec {_slug_in_path(request)!r} not found")
    return record


@routes.get("/v1/orgs/{organizationId}/openapi")
async def list_openapi(request: web.Request) -> web.Response:
    store, org = _org(request)
    base = h.base_url(request)
    return h.list_answer(
        request,
        org_openapi_specs(store, org["id"]),
        lambda r: render_openapi_spec(store, advance_processing(store, r), base),
        label=lambda r: r["slug"],
    )


@routes.post("/v1/orgs/{organizationId}/openapi")
async def create_openapi(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    body = await h.json_body(request)
    slug = h.text(body, "slug", required=True, min_len=1, max_len=100, pattern=SLUG_PATTERN)
    source = _source(body)
    if spec_by_slug(store, org["id"], slug) is not None:
        raise conflict(f"slug: an OpenAPI spec {slug!r} already exists in this organization")
    record = new_openapi_spec(store, org["id"], slug, source)
    return h.json_answer(render_openapi_spec(store, record, h.base_url(request)), status=201)


@routes.get("/v1/orgs/{organizationId}/openapi/{specSlug}")
async def get_openapi(request: web.Request) -> web.Response:
    store, org = _org(request)
    record = advance_processing(store, _spec(store, org, request))
    return h.json_answer(render_openapi_spec(store, record, h.base_url(request)))


@routes.put("/v1/orgs/{organizationId}/openapi/{specSlug}")
async def put_openapi(request: web.Request) -> web.Response:
    """Create (201) or update (200) the spec named by the slug in the path."""
    store, org = _admin_org(request)
    slug = h.text({"slug": _slug_in_path(request)}, "slug", min_len=1, max_len=100, pattern=SLUG_PATTERN)
    source = _source(await h.json_body(request))
    record = spec_by_slug(store, org["id"], slug)
    if record is None:
        record = new_openapi_spec(store, org["id"], slug, source)
        return h.json_answer(render_openapi_spec(store, record, h.base_url(request)), status=201)
    set_spec_source(store, record, source)
    return h.json_answer(render_openapi_spec(store, record, h.base_url(request)))


@routes.delete("/v1/orgs/{organizationId}/openapi/{specSlug}")
async def delete_openapi(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    store.remove(OPENAPI, _spec(store, org, request)["id"])
    return h.no_content()


@routes.get("/v1/orgs/{organizationId}/openapi/{specSlug}/versions/latest/content/raw")
async def get_openapi_raw(request: web.Request) -> web.Response:
    """The submitted text of a text-sourced spec (public OpenAPI document's
    getLatestOpenAPISpecVersionContentRaw); URL sources have no stored raw text: 404."""
    store, org = _org(request)
    record = _spec(store, org, request)
    text = record["source"].get("text")
    if text is None:
        raise not_found(f"OpenAPI spec {record['slug']!r}: no raw source stored for a URL source")
    fmt = "json" if text.lstrip().startswith(("{", "[")) else "yaml"
    return h.json_answer({"text": text, "format": fmt})


# ----- translation settings ---------------------------------------------------------------


def _languages(body: dict[str, Any]) -> list[str] | None:
    languages = h.string_list(body, "languages")
    if languages is not None:
        unknown = [code for code in languages if code not in LANGUAGES]
        if unknown:
            raise bad_request(f"languages: unknown language code(s) {', '.join(unknown)}")
        languages = list(dict.fromkeys(languages))
    return languages


def _translation(store: Store, org: Record, request: web.Request) -> Record:
    return _in_org(store, TRANSLATION, request.match_info["translationSettingsId"], org["id"], "translation settings")


@routes.get("/v1/orgs/{organizationId}/translations")
async def list_translations(request: web.Request) -> web.Response:
    store, org = _org(request)
    base = h.base_url(request)
    return h.list_answer(
        request, org_translations(store, org["id"]), lambda r: render_translation(store, r, base), label=lambda r: r["title"]
    )


@routes.post("/v1/orgs/{organizationId}/translations")
async def create_translation(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    body = await h.json_body(request)
    title = h.text(body, "title", required=True, min_len=1, max_len=100)
    record = new_translation(store, org["id"], title, _languages(body))
    return h.json_answer(render_translation(store, record, h.base_url(request)), status=201)


@routes.get("/v1/orgs/{organizationId}/translations/{translationSettingsId}")
async def get_translation(request: web.Request) -> web.Response:
    store, org = _org(request)
    return h.json_answer(render_translation(store, _translation(store, org, request), h.base_url(request)))


@routes.put("/v1/orgs/{organizationId}/translations/{translationSettingsId}")
async def put_translation(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    record = _translation(store, org, request)
    body = await h.json_body(request)
    record["title"] = h.text(body, "title", required=True, min_len=1, max_len=100)
    languages = _languages(body)
    if languages is not None:
        record["languages"] = languages
    record["updatedAt"] = store.now_iso()
    return h.json_answer(render_translation(store, record, h.base_url(request)))


@routes.delete("/v1/orgs/{organizationId}/translations/{translationSettingsId}")
async def delete_translation(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    store.remove(TRANSLATION, _translation(store, org, request)["id"])
    return h.no_content()


# ----- custom fields ----------------------------------------------------------------------


def _field_details(body: dict[str, Any]) -> dict[str, Any]:
    """The editable fields of a custom field (create and PATCH share the bounds)."""
    out: dict[str, Any] = {}
    for name, max_len in (("title", 100), ("description", 200), ("placeholder", 100)):
        if name in body:
            out[name] = h.text(body, name, max_len=max_len)
    if "options" in body:
        options = h.string_list(body, "options", min_items=1, max_items=50)
        if options is not None and len(set(options)) != len(options):
            raise bad_request("options: must not repeat an option")
        out["options"] = options
    return out


def _field(store: Store, org: Record, request: web.Request) -> Record:
    name = request.match_info["fieldName"]
    record = field_by_name(store, org["id"], name)
    if record is None:
        raise not_found(f"custom field {name!r} not found")
    return record


@routes.get("/v1/orgs/{organizationId}/custom-fields")
async def list_custom_fields(request: web.Request) -> web.Response:
    store, org = _org(request)
    base = h.base_url(request)
    return h.list_answer(
        request, org_custom_fields(store, org["id"]), lambda r: render_custom_field(store, r, base), label=lambda r: r["name"]
    )


@routes.post("/v1/orgs/{organizationId}/custom-fields")
async def create_custom_field(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    body = await h.json_body(request)
    name = h.text(body, "name", required=True, min_len=1, max_len=50, pattern=FIELD_NAME_PATTERN)
    field_type = h.choice(body, "type", FIELD_TYPES, required=True)
    details = _field_details(body)
    if field_type in SELECT_TYPES and not details.get("options"):
        raise bad_request(f"options: is required for a {field_type} field")
    if field_by_name(store, org["id"], name) is not None:
        raise conflict(f"name: a custom field {name!r} already exists in this organization")
    record = new_custom_field(store, org["id"], name, field_type, **details)
    return h.json_answer(render_custom_field(store, record, h.base_url(request)), status=201)


@routes.get("/v1/orgs/{organizationId}/custom-fields/{fieldName}")
async def get_custom_field(request: web.Request) -> web.Response:
    store, org = _org(request)
    return h.json_answer(render_custom_field(store, _field(store, org, request), h.base_url(request)))


@routes.patch("/v1/orgs/{organizationId}/custom-fields/{fieldName}")
async def patch_custom_field(request: web.Request) -> web.Response:
    store, org = _admin_org(request)
    record = _field(store, org, request)
    details = _field_details(await h.json_body(request))
    if details:
        record.update(details)
        record["updatedAt"] = store.now_iso()
    return h.json_answer(render_custom_field(store, record, h.base_url(request)))


@routes.delete("/v1/orgs/{organizationId}/custom-fields/{fieldName}")
async def delete_custom_field(request: web.Request) -> web.Response:
    """Deleting a field deletes its values on every space."""
    store, org = _admin_org(request)
    record = _field(store, org, request)
    for value in [v for v in store.tables[FIELD_VALUE].values() if v["field"] == record["id"]]:
        store.remove(FIELD_VALUE, value["id"])
    store.remove(CUSTOM_FIELD, record["id"])
    return h.no_content()


# ----- custom field values of spaces ------------------------------------------------------


@routes.get("/v1/spaces/{spaceId}/custom-fields")
async def get_space_custom_fields(request: web.Request) -> web.Response:
    """A bare JSON array (not a list envelope) of the fields that have a value, in the order
    the profile lists custom fields."""
    store = h.store_of(request)
    space = live_space(store, request.match_info["spaceId"], h.user_of(request))
    base = h.base_url(request)
    pairs = space_field_values(store, space)
    if profile_of(request).sort_unordered:
        pairs.sort(key=lambda fv: (fv[0]["name"].casefold(), fv[0]["id"]))
    return h.json_answer([{"customField": render_custom_field(store, f, base), "value": v["value"]} for f, v in pairs])


@routes.patch("/v1/spaces/{spaceId}/custom-fields")
async def patch_space_custom_fields(request: web.Request) -> web.Response:
    """Set several values at once; all are checked before any is written."""
    store = h.store_of(request)
    space = live_space(store, request.match_info["spaceId"], h.user_of(request))
    values = h.obj(await h.json_body(request), "values", required=True)
    changes: list[tuple[Record, Any]] = []
    for name, entry in values.items():
        field = field_by_name(store, space["org"], name)
        if field is None:
            raise bad_request(f"values.{name}: no custom field {name!r} in this organization")
        if not isinstance(entry, dict) or "value" not in entry:
            raise bad_request(f"values.{name}: must be an object {{value}}")
        value = entry["value"]
        changes.append((field, None if value is None else check_value(field, value)))
    for field, value in changes:
        set_field_value(store, space, field, value)
    return h.no_content()


# ----- generator --------------------------------------------------------------------------

API_NAMES = ("payments", "users", "billing", "search", "webhooks", "inventory", "auth", "reports")
FIELD_TEMPLATES: tuple[tuple[str, str, str, list[str] | None], ...] = (
    ("owner_team", "text", "Owning team", None),
    ("status", "single-select", "Status", ["draft", "in-review", "published", "archived"]),
    ("audience", "multi-select", "Audience", ["developers", "partners", "support", "sales"]),
    ("review_interval_days", "number", "Review interval (days)", None),
    ("customer_facing", "boolean", "Customer facing", None),
    ("product_area", "single-select", "Product area", ["core", "platform", "mobile", "web"]),
)
TEAMS = ("Platform", "Payments", "Identity", "Growth", "Docs", "Support")


def _spec_text(slug: str, version: str) -> str:
    return (
        f"openapi: 3.0.3\ninfo:\n  title: {slug.title()} API\n  version: {version}\n"
        f"paths:\n  /{slug}:\n    get:\n      summary: List {slug}\n      responses:\n        '200':\n          description: OK\n"
    )


def _cycled(names: tuple[str, ...], i: int) -> str:
    """Names from a fixed list, numbered once the list is used up (unique per organization)."""
    name = names[i % len(names)]
    return name if i < len(names) else f"{name}-{i // len(names) + 1}"


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """SAML providers, OpenAPI specs (URL and text sources), translations, custom fields and
    their values on spaces (settings come after spaces in FAMILIES for that)."""
    teams = store.where(TEAM, org=org_id)
    for i in range(params.get("saml", 0)):
        host = f"idp{i + 1}.org-{org_id[:6].lower()}.example.com"
        new_saml_provider(
            store,
            org_id,
            _cycled(("Okta", "Azure AD", "Google Workspace", "OneLogin"), i)[:30],
            ssoURL=f"https://{host}/saml/sso",
            entityID=f"https://{host}/metadata",
            certificate=f"MIIC{store.new_id(60)}",
            defaultTeam=rng.choice(teams)["id"] if teams and rng.random() < 0.6 else None,
            defaultRole=rng.choice(("read", "comment", "edit", None)),
        )
    for i in range(params.get("openapi", 0)):
        slug = _cycled(API_NAMES, i)
        if rng.random() < 0.5:
            source = {"url": f"https://api.example.com/{slug}/openapi.yaml"}
        else:
            source = {"text": _spec_text(slug, f"1.{rng.randint(0, 9)}.0")}
        finish_processing(store, new_openapi_spec(store, org_id, slug, source))
    for i in range(params.get("translations", 0)):
        languages = sorted(rng.sample(LANGUAGES[1:12], rng.randint(1, 3)))
        new_translation(store, org_id, f"Translations {i + 1} ({', '.join(languages)})", languages)
    for i in range(params.get("custom_fields", 0)):
        base_name, field_type, title, options = FIELD_TEMPLATES[i % len(FIELD_TEMPLATES)]
        name = base_name if i < len(FIELD_TEMPLATES) else f"{base_name}_{i // len(FIELD_TEMPLATES) + 1}"
        new_custom_field(
            store,
            org_id,
            name,
            field_type,
            title=title,
            description=f"{title} of the space" if rng.random() < 0.7 else None,
            placeholder=f"Enter {title.lower()}" if field_type in ("text", "number") else None,
            options=list(options) if options else None,
        )
    seed_space_values(store, org_id, rng)


def _random_value(field: Record, rng: random.Random) -> Any:
    field_type, options = field["type"], field.get("options") or []
    if field_type == "text":
        return rng.choice(TEAMS)
    if field_type == "number":
        return rng.choice((30, 60, 90, 180))
    if field_type == "boolean":
        return rng.random() < 0.5
    if field_type == "single-select":
        return rng.choice(options)
    return sorted(rng.sample(options, rng.randint(1, min(2, len(options)))), key=options.index)


def seed_space_values(store: Store, org_id: str, rng: random.Random) -> None:
    """Values of the organization's custom fields on about a third of its spaces."""
    fields = org_custom_fields(store, org_id)
    if not fields:
        return
    for space in org_spaces(store, org_id):
        if rng.random() >= 1 / 3:
            continue
        for field in fields:
            if rng.random() < 0.7:
                set_field_value(store, space, field, _random_value(field, rng))


# ----- canonical dump ---------------------------------------------------------------------


def _space_value_records(store: Store, org_id: str) -> list[Record]:
    return [value for space in org_spaces(store, org_id) for _, value in space_field_values(store, space)]


def _render_value(store: Store, record: Record, base: str) -> dict[str, Any]:
    field = store.get(CUSTOM_FIELD, record["field"])
    return {"object": FIELD_VALUE, "field": field["name"] if field else record["field"], "value": record["value"]}


DUMP = [
    DumpKind(
        name=SAML,
        records=org_saml_providers,
        render=render_saml_provider,
        label=lambda data: data["label"],
        refs={"defaultTeam": TEAM},
        volatile=frozenset({"service"}),
    ),
    DumpKind(
        name=OPENAPI,
        records=org_openapi_specs,
        render=_dump_openapi_spec,
        label=lambda data: data["slug"],
        volatile=frozenset({"processingState", "lastVersion", "lastProcessedAt", "lastProcessErrorCode", "lastProcessedErrorCount"}),
    ),
    DumpKind(
        name=TRANSLATION,
        records=org_translations,
        render=render_translation,
        label=lambda data: data["title"],
    ),
    DumpKind(
        name=CUSTOM_FIELD,
        records=org_custom_fields,
        render=render_custom_field,
        label=lambda data: data["name"],
    ),
    DumpKind(
        name=FIELD_VALUE,
        records=_space_value_records,
        render=_render_value,
        label=lambda data: data["field"],
        parent=lambda store, record: (SPACE, record["space"]),
    ),
]
