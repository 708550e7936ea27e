"""The manifest of an integration, checked from the body of a publish: every field the
public document bounds, each failure a 400 that names where in the body it is."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, TypeVar

from syncd.emulator import http as h
from syncd.emulator.errors import ApiProblem, bad_request

T = TypeVar("T")

SCOPES = (
    "space:content:read space:content:write space:metadata:read space:metadata:write space:git:sync "
    "page:feedback:read site:metadata:read site:views:read site:script:inject site:script:cookies "
    "site:visitor:auth site:visitor:claims site:adaptive:read site:adaptive:write conversations:ingest "
    "openapi:read openapi:write"
).split()
CATEGORIES = ("analytics", "collaboration", "content", "marketing", "visitor-auth", "other")
TARGETS = ("all", "site", "space", "organization")
VISIBILITIES = ("public", "private", "unlisted")
RUNTIMES = ("v1", "v2")
PROPERTY_TYPES = ("string", "number", "boolean", "button")
CONFIGURATION_LEVELS = ("account", "space", "site")
SECRETS_MAX = 20


def _base64(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise bad_request(f"{where}: must be a base64 string")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{where}: must be valid base64") from None
    return value


def _enum_list(body: dict[str, Any], name: str, allowed: tuple[str, ...] | list[str], *, required: bool = False) -> list[str] | None:
    values = h.string_list(body, name, required=required)
    if values is not None:
        bad = [v for v in values if v not in allowed]
        if bad:
            raise bad_request(f"{name}: unknown value(s) {', '.join(bad)} (allowed: {', '.join(allowed)})")
        values = list(dict.fromkeys(values))
    return values


def _objects(body: dict[str, Any], name: str, max_items: int | None = None) -> list[dict[str, Any]] | None:
    if name not in body:
        return None
    value = body[name]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise bad_request(f"{name}: must be an array of objects")
    if max_items is not None and len(value) > max_items:
        raise bad_request(f"{name}: must have at most {max_items} items")
    return value


def _within(where: str, check: Callable[[], T]) -> T:
    """Run a field check on a nested object, naming the nested field in the 400 message."""
    try:
        return check()
    except ApiProblem as problem:
        raise bad_request(f"{where}.{problem.message}") from None


def _component(item: dict[str, Any], where: str) -> dict[str, Any]:
    """Shared bounds of a block and a content source: id, title 2-40, description max 150, icon."""
    out: dict[str, Any] = {
        "id": _within(where, lambda: h.text(item, "id", required=True, min_len=1)),
        "title": _within(where, lambda: h.text(item, "title", required=True, min_len=2, max_len=40)),
    }
    for key, max_len in (("description", 150), ("icon", None)):
        if key in item:
            out[key] = _within(where, lambda key=key, max_len=max_len: h.text(item, key, max_len=max_len))
    return out


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    items = _objects(body, "blocks")
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        block = _component(item, f"blocks[{i}]")
        if "urlUnfurl" in item:
            block["urlUnfurl"] = _within(f"blocks[{i}]", lambda item=item: h.string_list(item, "urlUnfurl"))
        markdown = h.obj(item, "markdown")
        if markdown is not None:
            if not isinstance(markdown.get("codeblock"), str) or not isinstance(markdown.get("body"), str):
                raise bad_request(f"blocks[{i}].markdown: must be {{codeblock, body}} strings")
            block["markdown"] = {"codeblock": markdown["codeblock"], "body": markdown["body"]}
        out.append(block)
    return out


def _content_sources(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    items = _objects(body, "contentSources")
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        source = _component(item, f"contentSources[{i}]")
        configuration = item.get("configuration")
        if not isinstance(configuration, dict) or not isinstance(configuration.get("componentId"), str):
            raise bad_request(f"contentSources[{i}].configuration: must be {{componentId}}")
        source["configuration"] = {"componentId": configuration["componentId"]}
        out.append(source)
    return out


def _external_links(body: dict[str, Any]) -> list[dict[str, str]] | None:
    items = _objects(body, "externalLinks", max_items=5)
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        if not isinstance(item.get("label"), str):
            raise bad_request(f"externalLinks[{i}].label: is required (string)")
        url = _within(f"externalLinks[{i}]", lambda item=item: h.url_field(item, "url", required=True))
        out.append({"url": str(url), "label": item["label"]})
    return out


def _configurations(body: dict[str, Any]) -> dict[str, Any] | None:
    """`{account, space, site}`, each a schema `{properties, required}` or `{componentId}`."""
    value = h.obj(body, "configurations")
    if value is None:
        return None
    for level, config in value.items():
        where = f"configurations.{level}"
        if level not in CONFIGURATION_LEVELS:
            raise bad_request(f"configurations: unknown level {level!r} (allowed: {', '.join(CONFIGURATION_LEVELS)})")
        if not isinstance(config, dict):
            raise bad_request(f"{where}: must be an object")
        if "componentId" in config:
            if not isinstance(config["componentId"], str):
                raise bad_request(f"{where}.componentId: must be a string")
            continue
        properties = config.get("properties")
        if not isinstance(properties, dict):
            raise bad_request(f"{where}.properties: is required (object)")
        for prop, spec in properties.items():
            if not isinstance(spec, dict) or spec.get("type") not in PROPERTY_TYPES:
                raise bad_request(f"{where}.properties.{prop}.type: must be one of {', '.join(PROPERTY_TYPES)}")
        required = config.get("required", [])
        if not isinstance(required, list) or any(r not in properties for r in required):
            raise bad_request(f"{where}.required: must list names of its properties")
    return value


def _secrets(body: dict[str, Any]) -> dict[str, str] | None:
    value = h.obj(body, "secrets")
    if value is None:
        return None
    if len(value) > SECRETS_MAX or not all(isinstance(v, str) for v in value.values()):
        raise bad_request(f"secrets: must map at most {SECRETS_MAX} names to strings")
    return value


def _csp(body: dict[str, Any]) -> str | dict[str, str] | None:
    value = body.get("contentSecurityPolicy")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return value
    raise bad_request("contentSecurityPolicy: must be a string or an object of directive strings")


def manifest_of(body: dict[str, Any]) -> dict[str, Any]:
    """The publishable fields of a publish body, validated; absent optional ones are left out."""
    manifest: dict[str, Any] = {
        "title": h.text(body, "title", required=True, min_len=2, max_len=30),
        "description": h.text(body, "description", required=True, max_len=100),
        "scopes": _enum_list(body, "scopes", SCOPES, required=True),
        "script": h.text(body, "script", required=True),
        "summary": h.text(body, "summary", max_len=2048),
        "visibility": h.choice(body, "visibility", VISIBILITIES, default="private"),
        "target": h.choice(body, "target", TARGETS, default="all"),
        "runtime": h.choice(body, "runtime", RUNTIMES, default="v1"),
        "categories": _enum_list(body, "categories", CATEGORIES),
        "blocks": _blocks(body),
        "contentSources": _content_sources(body),
        "externalLinks": _external_links(body),
        "configurations": _configurations(body),
        "secrets": _secrets(body),
        "contentSecurityPolicy": _csp(body),
    }
    if "icon" in body:
        manifest["icon"] = _base64(body["icon"], "icon")
    if "previewImages" in body:
        images = body["previewImages"]
        if not isinstance(images, list) or len(images) > 3:
            raise bad_request("previewImages: must be an array of at most 3 base64 images")
        manifest["previewImages"] = [_base64(img, f"previewImages[{i}]") for i, img in enumerate(images)]
    return h.strip_none(manifest)
