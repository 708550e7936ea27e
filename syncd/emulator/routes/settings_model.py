"""Organization settings as records, and how each renders: SAML providers, OpenAPI specs and
their processing, translation settings, custom fields and their values on spaces.

Custom field values of a space are one record per (space, field), with the id
`<space id>:<field id>` so a space's values are found without scanning every record.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from syncd.emulator import http as h
from syncd.emulator.errors import bad_request
from syncd.emulator.routes.members import TEAM, render_team
from syncd.emulator.store import Record, Store

SAML, OPENAPI, TRANSLATION = "saml-provider", "openapi-spec", "translation-settings"
CUSTOM_FIELD, FIELD_VALUE = "custom-field", "space-custom-field-value"
TEXT_VALUE_MAX = 256


# ----- SAML providers ---------------------------------------------------------------------


def saml_status(record: Record) -> str:
    """`active` once the identity provider is fully described, `pending` until then."""
    return "active" if all(record.get(k) for k in ("ssoURL", "entityID", "certificate")) else "pending"


def saml_service(record: Record, base: str) -> dict[str, str]:
    root = f"{base}/sso/saml/{record['id']}"
    return {"acsURL": f"{root}/acs", "startURL": f"{root}/start", "entityID": f"{root}/metadata"}


def render_saml_provider(store: Store, record: Record, base: str) -> dict[str, Any]:
    """`ssoURL`, `entityID` and `certificate` are required in the answer: "" until set."""
    data: dict[str, Any] = {
        "object": SAML,
        "id": record["id"],
        "label": record["label"],
        "ssoURL": record.get("ssoURL", ""),
        "entityID": record.get("entityID", ""),
        "certificate": record.get("certificate", ""),
        "defaultRole": record.get("defaultRole"),
        "createdAt": record["createdAt"],
        "status": saml_status(record),
        "service": saml_service(record, base),
        "urls": {"location": f"{base}/v1/orgs/{record['org']}/saml/{record['id']}"},
    }
    team = store.get(TEAM, record["defaultTeam"]) if record.get("defaultTeam") else None
    if team is not None and team.get("org") == record["org"]:
        data["defaultTeam"] = render_team(store, team, base)
    return data


def new_saml_provider(store: Store, org_id: str, label: str, **fields: Any) -> Record:
    record: Record = {"org": org_id, "label": label, "defaultRole": None, "defaultTeam": None, "createdAt": store.now_iso()}
    record.update(fields)
    return store.add(SAML, record)


def org_saml_providers(store: Store, org_id: str) -> list[Record]:
    return store.where(SAML, org=org_id)


# ----- OpenAPI specs ----------------------------------------------------------------------


def _outcome(source: dict[str, str]) -> str | None:
    """The processing error a source ends with: hosts under .invalid cannot be fetched, and
    a text that names neither OpenAPI nor Swagger cannot be parsed (deterministic failures)."""
    if "url" in source:
        host = urlsplit(source["url"]).hostname or ""
        return "FETCH_ERROR" if host.endswith(".invalid") else None
    lowered = source["text"][:4096].lower()
    return None if ("openapi" in lowered or "swagger" in lowered) else "PARSE_ERROR"


def set_spec_source(store: Store, record: Record, source: dict[str, str]) -> bool:
    """Point a spec at a source; a different source is a new version, processed again."""
    if record.get("source") == source:
        return False
    record["source"] = source
    record["lastVersion"] = store.new_id()
    record["processingState"] = "pending"
    record["updatedAt"] = store.now_iso()
    return True


def advance_processing(store: Store, record: Record) -> Record:
    """One processing step per read (pending -> progress -> complete): a client that polls
    sees every state, deterministically."""
    state = record.get("processingState")
    if state == "pending":
        record["processingState"] = "progress"
    elif state == "progress":
        finish_processing(store, record)
    return record


def finish_processing(store: Store, record: Record) -> None:
    record["processingState"] = "complete"
    record["lastProcessedAt"] = store.now_iso()
    error = _outcome(record["source"])
    if error:
        record["lastProcessErrorCode"] = error
    else:
        record.pop("lastProcessErrorCode", None)


def new_openapi_spec(store: Store, org_id: str, slug: str, source: dict[str, str]) -> Record:
    ts = store.now_iso()
    record: Record = {"org": org_id, "slug": slug, "createdAt": ts, "updatedAt": ts}
    set_spec_source(store, record, source)
    return store.add(OPENAPI, record)


def org_openapi_specs(store: Store, org_id: str) -> list[Record]:
    return store.where(OPENAPI, org=org_id)


def spec_by_slug(store: Store, org_id: str, slug: str) -> Record | None:
    return next((r for r in org_openapi_specs(store, org_id) if r["slug"] == slug), None)


def render_openapi_spec(store: Store, record: Record, base: str) -> dict[str, Any]:
    org_id, slug = record["org"], record["slug"]
    error = record.get("lastProcessErrorCode")
    data = {
        "object": OPENAPI,
        "id": record["id"],
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
        "slug": slug,
        "sourceURL": record["source"].get("url"),
        "processingState": record["processingState"],
        "lastVersion": record.get("lastVersion"),
        "lastProcessedAt": record.get("lastProcessedAt"),
        "lastProcessErrorCode": error,
        "lastProcessedErrorCount": 1 if error else 0,
        "permissions": {"view": True, "edit": True},
        "urls": {
            "location": f"{base}/v1/orgs/{org_id}/openapi/{slug}",
            "app": f"{base}/app/o/{org_id}/openapi/{slug}",
        },
    }
    return h.strip_none(data)


# ----- translation settings ---------------------------------------------------------------


def new_translation(store: Store, org_id: str, title: str, languages: list[str] | None = None) -> Record:
    ts = store.now_iso()
    return store.add(TRANSLATION, {"org": org_id, "title": title, "languages": list(languages or []), "createdAt": ts, "updatedAt": ts})


def org_translations(store: Store, org_id: str) -> list[Record]:
    return store.where(TRANSLATION, org=org_id)


def render_translation(store: Store, record: Record, base: str) -> dict[str, Any]:
    return {
        "object": TRANSLATION,
        "id": record["id"],
        "title": record["title"],
        "languages": list(record.get("languages", [])),
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
        "permissions": {"view": True, "edit": True},
        "urls": {"location": f"{base}/v1/orgs/{record['org']}/translations/{record['id']}"},
    }


# ----- custom fields ----------------------------------------------------------------------


def org_custom_fields(store: Store, org_id: str) -> list[Record]:
    return store.where(CUSTOM_FIELD, org=org_id)


def field_by_name(store: Store, org_id: str, name: str) -> Record | None:
    return next((r for r in org_custom_fields(store, org_id) if r["name"] == name), None)


def new_custom_field(store: Store, org_id: str, name: str, field_type: str, **fields: Any) -> Record:
    ts = store.now_iso()
    record: Record = {"org": org_id, "name": name, "type": field_type, "createdAt": ts, "updatedAt": ts}
    record.update({k: v for k, v in fields.items() if v is not None})
    return store.add(CUSTOM_FIELD, record)


def render_custom_field(store: Store, record: Record, base: str) -> dict[str, Any]:
    data = {
        "object": CUSTOM_FIELD,
        "id": record["id"],
        "name": record["name"],
        "title": record.get("title"),
        "description": record.get("description"),
        "type": record["type"],
        "placeholder": record.get("placeholder"),
        "options": list(record["options"]) if "options" in record else None,
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
        "permissions": {"view": True, "edit": True},
        "urls": {"location": f"{base}/v1/orgs/{record['org']}/custom-fields/{record['name']}"},
    }
    return h.strip_none(data)


# ----- custom field values of spaces ------------------------------------------------------


def value_id(space_id: str, field_id: str) -> str:
    return f"{space_id}:{field_id}"


def space_field_values(store: Store, space: Record) -> list[tuple[Record, Record]]:
    """(field, value record) of a space, in the organization's field order.

    Only fields of the space's current organization count (a transferred space keeps no
    values of its old organization's fields)."""
    out = []
    for field in org_custom_fields(store, space["org"]):
        value = store.get(FIELD_VALUE, value_id(space["id"], field["id"]))
        if value is not None:
            out.append((field, value))
    return out


def check_value(field: Record, value: Any) -> Any:
    """The value if it fits the field's type (and options); 400 naming the field otherwise."""
    name, field_type, options = field["name"], field["type"], field.get("options") or []
    where = f"values.{name}.value"
    if field_type == "text":
        if not isinstance(value, str) or len(value) > TEXT_VALUE_MAX:
            raise bad_request(f"{where}: must be a string of at most {TEXT_VALUE_MAX} characters")
    elif field_type == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad_request(f"{where}: must be a number")
    elif field_type == "boolean":
        if not isinstance(value, bool):
            raise bad_request(f"{where}: must be a boolean")
    elif field_type == "single-select":
        if value not in options:
            raise bad_request(f"{where}: must be one of the field's options")
    elif field_type == "multi-select":
        if not isinstance(value, list) or any(v not in options for v in value):
            raise bad_request(f"{where}: must be an array of the field's options")
        value = list(dict.fromkeys(value))
    return value


def set_field_value(store: Store, space: Record, field: Record, value: Any) -> None:
    """Set (or, with None, remove) a space's value of a field; the value must be checked."""
    key = value_id(space["id"], field["id"])
    if value is None:
        store.remove(FIELD_VALUE, key)
        return
    store.add(FIELD_VALUE, {"id": key, "org": space["org"], "space": space["id"], "field": field["id"], "value": value})
