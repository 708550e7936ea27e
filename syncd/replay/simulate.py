"""An in-memory target organization that executes ops with the API's semantics.

`TargetModel` holds one organization (built from a Snapshot) and runs write calls on it the
way the service does (syncd/emulator/routes: spaces.py, sites.py, settings.py): a create
appends the new object last among its siblings; a site's first section takes over the root
site-spaces and a section is created with its first site-space; owners whose default goes
away fall back to their first child; paths are unique among siblings; a move names siblings
that must be there; a delete takes the object's descendants with it. Calls the service would
refuse raise `ModelError`.

Two users: `plan` runs each op it emits on a model of the target to know the state the next
op will meet (the order after creates, new paths and defaults), and the property tests run
`apply_to_model` to check that a plan, applied, makes the target equal to the source.
"""

from __future__ import annotations

import copy
import random
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from syncd.catalog import BY_NAME
from syncd.ordering import PositionError, parse_position, place
from syncd.replay.ops import PATH_REF, Op, Plan, Ref, Target, path_refs, refs_in
from syncd.replay.rules import (
    DEFAULT_ADAPTIVE_SCHEMA,
    SnapshotView,
    View,
    container_site_spaces,
    group_sections,
    ref_id,
    site_top_order,
    slugify,
    tree_parent,
    unique_path,
)
from syncd.replay.snapshot import IdMap, Node, Snapshot

Lookup = Callable[[str, str], str | None]
"""(kind, source id) -> target id, or None when not mapped."""

TreeItem = tuple[str, str]


class ModelError(Exception):
    """A call the service would refuse (a 400 or 404 in the emulator)."""


class _N:
    """One mutable object of the model."""

    __slots__ = ("data", "id", "kind", "parent")

    def __init__(self, kind: str, node_id: str, parent: tuple[str, str] | None, data: dict[str, Any]) -> None:
        self.kind, self.id, self.parent, self.data = kind, node_id, parent, data


def _routes() -> list[tuple[str, re.Pattern[str], str]]:
    """(method, path pattern, handler name) of every write call in the catalog."""
    out: list[tuple[str, re.Pattern[str], str]] = []
    for kind in BY_NAME.values():
        if kind.writes is None:
            continue
        names = ["create", "patch", "move", "delete", *(name for name, _ in kind.writes.calls)]
        for name in names:
            call = kind.writes.call(name)
            if call is None:
                continue
            pattern = re.sub(r"\\\{([a-z_]+)\\\}", r"(?P<\1>[^/]+)", re.escape(call.path))
            out.append((call.method.upper(), re.compile(f"^{pattern}$"), f"{kind.name}.{name}"))
    return out


ROUTES = _routes()


class TargetModel:
    """One organization in memory; `execute` runs an op on it (see the module docstring)."""

    def __init__(self, tenant: str, org: str, *, source: View | None = None, id_prefix: str = "sim") -> None:
        self.tenant, self.org = tenant, org
        self.source = source
        self.id_prefix = id_prefix
        self._counter = 0
        self._used: set[str] = set()
        self.nodes: dict[tuple[str, str], _N] = {}
        self.kids: dict[tuple[str, tuple[str, str] | None], list[str]] = defaultdict(list)
        self.tree: dict[str, list[TreeItem]] = defaultdict(list)
        self.top: dict[str, list[TreeItem]] = defaultdict(list)
        self.groups: dict[str, list[str]] = defaultdict(list)
        self.containers: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.pages: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.default_section: dict[str, str | None] = {}
        self.default_site_space: dict[tuple[str, str], str | None] = {}
        """(site, section or "") -> default site-space of that container."""
        self.duplicates: dict[str, str] = {}
        """Pending duplicates in the source organization: duplicate id -> source space id."""
        self._handlers: dict[str, Callable[[dict[str, str], dict[str, Any]], dict[str, Any] | None]] = {
            "organization.patch": self._org_patch,
            "team.create": self._team_create,
            "team.patch": self._team_patch,
            "team.delete": self._team_delete,
            "saml-provider.create": self._saml_create,
            "saml-provider.patch": self._saml_patch,
            "saml-provider.delete": self._saml_delete,
            "openapi-spec.create": self._spec_put,
            "openapi-spec.patch": self._spec_put,
            "openapi-spec.delete": self._spec_delete,
            "translation.create": self._translation_create,
            "translation.patch": self._translation_patch,
            "translation.delete": self._translation_delete,
            "custom-field.create": self._field_create,
            "custom-field.patch": self._field_patch,
            "custom-field.delete": self._field_delete,
            "collection.create": self._collection_create,
            "collection.patch": self._collection_patch,
            "collection.move": lambda p, b: self._tree_move("collection", p["id"], b),
            "collection.delete": self._collection_delete,
            "space.create": self._space_create,
            "space.patch": self._space_patch,
            "space.move": lambda p, b: self._tree_move("space", p["id"], b),
            "space.delete": self._space_delete,
            "space.transfer": self._space_transfer,
            "space.import": self._space_import,
            "space-custom-field-value.patch": self._values_patch,
            "site.create": self._site_create,
            "site.patch": self._site_patch,
            "site.delete": self._site_delete,
            "site-section-group.create": self._group_create,
            "site-section-group.patch": self._group_patch,
            "site-section-group.move": self._group_move,
            "site-section-group.delete": self._group_delete,
            "site-section-group.add-section": self._group_add,
            "site-section-group.remove-section": self._group_remove,
            "site-section.create": self._section_create,
            "site-section.patch": self._section_patch,
            "site-section.move": self._section_move,
            "site-section.delete": self._section_delete,
            "site-space.create": self._ss_create,
            "site-space.patch": self._ss_patch,
            "site-space.move": self._ss_move,
            "site-space.delete": self._ss_delete,
            "site-adaptive-schema.patch": self._schema_put,
        }

    # ----- building and exporting ---------------------------------------------------------

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, *, source: Snapshot | View | None = None, id_prefix: str = "sim") -> TargetModel:
        source_view = SnapshotView(source) if isinstance(source, Snapshot) else source
        model = cls(snapshot.tenant, snapshot.org, source=source_view, id_prefix=id_prefix)
        view = SnapshotView(snapshot)
        for node in snapshot.nodes.values():
            model._add(node.kind, node.id, node.parent, copy.deepcopy(dict(node.data)))
        if ("organization", snapshot.org) not in model.nodes:
            model._add("organization", snapshot.org, None, {"object": "organization", "id": snapshot.org})
        for kind in ("collection", "space"):
            for node in view.of_kind(kind):
                model.tree[tree_parent(node) or ""].append((kind, node.id))
        for site in view.of_kind("site"):
            model._load_site(view, site.id)
        for page in view.of_kind("page"):
            if page.parent is not None:
                model.pages[page.parent].append(page.id)
        return model

    def _load_site(self, view: View, site_id: str) -> None:
        self.top[site_id] = site_top_order(view, site_id)
        for kind, item in self.top[site_id]:
            if kind == "site-section-group":
                self.groups[item] = group_sections(view, site_id, item)
        sections = view.children("site-section", ("site", site_id))
        self.default_section[site_id] = next((s.id for s in sections if s.data.get("default")), None)
        for section_id in [None, *(s.id for s in sections)]:
            nodes = container_site_spaces(view, site_id, section_id)
            key = (site_id, section_id or "")
            self.containers[key] = [n.id for n in nodes]
            self.default_site_space[key] = next((n.id for n in nodes if n.data.get("default")), None)
        if ("site-adaptive-schema", f"{site_id}/site-adaptive-schema") not in self.nodes:
            self._add_schema(site_id)

    def to_snapshot(self) -> Snapshot:
        """The organization as a crawl would record it (positions as the listings give)."""
        positions: dict[tuple[str, str], int] = {}
        for items in self.tree.values():
            for kind in ("collection", "space"):
                for index, item in enumerate(i for i in items if i[0] == kind):
                    positions[item] = index
        for site_id in list(self.top):
            if ("site", site_id) not in self.nodes:
                continue
            for index, section in enumerate(self._site_sections(site_id)):
                positions[("site-section", section)] = index
            for index, group in enumerate(g for k, g in self.top[site_id] if k == "site-section-group"):
                positions[("site-section-group", group)] = index
            for index, site_space in enumerate(self._site_site_spaces(site_id)):
                positions[("site-space", site_space)] = index
        for items in self.pages.values():
            for index, page in enumerate(items):
                positions[("page", page)] = index
        rows = []
        for (kind, node_id), node in self.nodes.items():
            rows.append(
                {
                    "kind": kind,
                    "id": node_id,
                    "parent_kind": node.parent[0] if node.parent else None,
                    "parent_id": node.parent[1] if node.parent else None,
                    "position": positions.get((kind, node_id)),
                    "data": copy.deepcopy(node.data),
                }
            )
        return Snapshot.from_rows(self.tenant, self.org, rows)

    # ----- View ---------------------------------------------------------------------------

    def get(self, kind: str, node_id: str | None) -> Node | None:
        node = self.nodes.get((kind, node_id)) if node_id is not None else None
        return Node(node.kind, node.id, node.parent, None, node.data) if node is not None else None

    def children(self, kind: str, parent: tuple[str, str] | None) -> list[Node]:
        ids: list[str]
        if kind in ("collection", "space") and parent is not None:
            key = parent[1] if parent[0] == "collection" else ""
            ids = [i for k, i in self.tree.get(key, ()) if k == kind]
        elif kind == "site-section" and parent and parent[0] == "site":
            ids = self._site_sections(parent[1])
        elif kind == "site-section-group" and parent and parent[0] == "site":
            ids = [i for k, i in self.top.get(parent[1], ()) if k == kind]
        elif kind == "site-space" and parent and parent[0] == "site":
            ids = self._site_site_spaces(parent[1])
        elif kind == "page" and parent is not None:
            ids = list(self.pages.get(parent, ()))
        else:
            ids = list(self.kids.get((kind, parent), ()))
        return [n for i in ids if (n := self.get(kind, i)) is not None]

    def of_kind(self, kind: str) -> list[Node]:
        return [Node(n.kind, n.id, n.parent, None, n.data) for n in self.nodes.values() if n.kind == kind]

    def tree_order(self, parent: str | None) -> list[TreeItem]:
        return list(self.tree.get(parent or "", ()))

    def top_order(self, site_id: str) -> list[TreeItem]:
        return list(self.top.get(site_id, ()))

    def group_order(self, group_id: str) -> list[str]:
        return list(self.groups.get(group_id, ()))

    def container_order(self, site_id: str, section_id: str | None) -> list[str]:
        return list(self.containers.get((site_id, section_id or ""), ()))

    def section_group(self, section_id: str) -> str | None:
        node = self.nodes.get(("site-section", section_id))
        return ref_id(node.data.get("sectionGroup")) if node else None

    # ----- building by hand (tests) --------------------------------------------------------

    def call(self, name: str, params: Mapping[str, str] | None = None, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run one write call by name ("space.create", "site-section.move", ...) with path
        parameters and a body of target ids: how tests build an organization."""
        handler = self._handlers.get(name)
        if handler is None:
            raise ModelError(f"{name} is not modelled")
        return handler({"org": self.org, **(params or {})}, copy.deepcopy(dict(body or {}))) or {}

    def add_page(self, space_id: str, title: str, markdown: str = "", parent: str | None = None, **fields: Any) -> str:
        """A page at the end of a space (or under a page): content has no write call here."""
        self._node("space", space_id)
        qid = f"{space_id}/{self._new_id()}"
        owner = ("page", parent) if parent else ("space", space_id)
        data = {"object": "page", "id": qid.rsplit("/", 1)[1], "title": title, "markdown": markdown, "type": "document", **fields}
        self._add("page", qid, owner, data)
        self.pages[owner].append(qid)
        return qid

    def add_file(self, space_id: str, name: str, content_type: str = "image/png", size: int = 10) -> str:
        self._node("space", space_id)
        qid = f"{space_id}/{self._new_id()}"
        self._add("file", qid, ("space", space_id), {"object": "file", "id": qid.rsplit("/", 1)[1], "name": name, "contentType": content_type, "size": size})
        return qid

    def set_data(self, kind: str, node_id: str, **fields: Any) -> None:
        """Set fields no call writes (a space's visibility, a site's hostname)."""
        self._node(kind, node_id).data.update(fields)

    # ----- executing ----------------------------------------------------------------------

    def execute(self, op: Op, lookup: Lookup) -> dict[str, Any]:
        """Run one op; returns the answer (the new object for creates)."""
        if op.action == "adopt":
            if op.target_id is None or not any(k == op.kind and i == op.target_id for k, i in self.nodes):
                raise ModelError(f"adopt: {op.kind} {op.target_id!r} not found")
            return {"id": op.target_id}
        path = PATH_REF.sub(lambda m: self._resolve_ref(Ref(m.group(1), m.group(2)), lookup), op.path)
        body = self._resolve(op.body, lookup) or {}
        if not isinstance(body, dict):
            raise ModelError(f"{op.key}: the body must be an object")
        if op.client == "source":
            return self._source_call(op.method.upper(), path)
        for method, pattern, name in ROUTES:
            if method == op.method.upper() and (match := pattern.match(path)):
                params = dict(match.groupdict())
                if "org" in params and params["org"] != self.org:
                    raise ModelError(f"{op.key}: organization {params['org']!r} is not this one")
                handler = self._handlers.get(name)
                if handler is None:
                    raise ModelError(f"{op.key}: {name} is not modelled")
                return handler(params, body) or {}
        raise ModelError(f"{op.key}: no write call {op.method} {path}")

    def _resolve_ref(self, ref: Ref, lookup: Lookup) -> str:
        found = lookup(ref.kind, ref.source_id)
        if found is None:
            raise ModelError(f"{ref.kind} {ref.source_id} is not on the target (unresolved reference)")
        return found

    def _resolve(self, value: Any, lookup: Lookup) -> Any:
        if isinstance(value, Ref):
            return self._resolve_ref(value, lookup)
        if isinstance(value, Target):
            return value.target_id
        if isinstance(value, Mapping):
            return {k: self._resolve(v, lookup) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._resolve(v, lookup) for v in value]
        return value

    def _new_id(self) -> str:
        """A fresh id, never one an object already has (models are rebuilt from snapshots)."""
        while True:
            self._counter += 1
            candidate = f"{self.id_prefix}{self._counter}"
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate

    def _add(self, kind: str, node_id: str, parent: tuple[str, str] | None, data: dict[str, Any]) -> _N:
        if (kind, node_id) in self.nodes:
            self._remove(kind, node_id)
        node = _N(kind, node_id, parent, data)
        self.nodes[(kind, node_id)] = node
        self._used.add(node_id.rsplit("/", 1)[-1])
        self.kids[(kind, parent)].append(node_id)
        return node

    def _remove(self, kind: str, node_id: str) -> None:
        node = self.nodes.pop((kind, node_id), None)
        if node is not None:
            siblings = self.kids.get((kind, node.parent))
            if siblings and node_id in siblings:
                siblings.remove(node_id)

    def _node(self, kind: str, node_id: str, label: str | None = None) -> _N:
        node = self.nodes.get((kind, node_id))
        if node is None:
            raise ModelError(f"{label or kind} {node_id!r} not found")
        return node

    def _org_parent(self) -> tuple[str, str]:
        return ("organization", self.org)

    def _by_field(self, kind: str, name: str, value: Any) -> _N | None:
        """An organization-level object by a field (a spec by slug, a custom field by name)."""
        for node_id in self.kids.get((kind, self._org_parent()), ()):
            node = self.nodes[(kind, node_id)]
            if node.data.get(name) == value:
                return node
        return None

    # ----- organization -------------------------------------------------------------------

    def _org_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._node("organization", self.org)
        for name in ("emailDomains", "hostname", "defaultRole", "defaultContent", "sso", "ai", "inviteLinks", "title", "logo"):
            if name in body:
                if body[name] is None and name in ("defaultContent",):
                    node.data.pop(name, None)
                else:
                    node.data[name] = copy.deepcopy(body[name])
        return dict(node.data)

    # ----- teams, SAML, OpenAPI, translations, custom fields -------------------------------

    def _team_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        title = body.get("title")
        if not isinstance(title, str) or not title:
            raise ModelError("team title: is required")
        if body.get("members"):
            raise ModelError("members: not members of this organization")
        team_id = self._new_id()
        data = {"object": "team", "id": team_id, "title": title, "members": 0, "spaces": 0}
        self._add("team", team_id, self._org_parent(), data)
        return dict(data)

    def _team_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._node("team", params["team"])
        if not isinstance(body.get("title"), str):
            raise ModelError("team title: is required")
        node.data["title"] = body["title"]
        return dict(node.data)

    def _team_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        self._node("team", params["team"])
        self._remove("team", params["team"])
        for node in list(self.nodes.values()):
            if node.kind == "saml-provider" and ref_id(node.data.get("defaultTeam")) == params["team"]:
                node.data.pop("defaultTeam", None)

    def _saml_fields(self, node: _N, body: dict[str, Any]) -> None:
        for name in ("label", "entityID", "certificate", "ssoURL", "defaultRole"):
            if name in body:
                node.data[name] = body[name] if body[name] is not None or name == "defaultRole" else ""
        if "defaultTeam" in body:
            team_id = body["defaultTeam"]
            if team_id:
                team = self._node("team", team_id, "defaultTeam: team")
                node.data["defaultTeam"] = {"object": "team", "id": team.id, "title": team.data.get("title")}
            else:
                node.data.pop("defaultTeam", None)

    def _saml_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body.get("label"), str) or not body["label"]:
            raise ModelError("label: is required")
        saml_id = self._new_id()
        data = {"object": "saml-provider", "id": saml_id, "label": body["label"], "ssoURL": "", "entityID": "", "certificate": "", "defaultRole": None}
        node = self._add("saml-provider", saml_id, self._org_parent(), data)
        self._saml_fields(node, body)
        return dict(node.data)

    def _saml_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._node("saml-provider", params["id"])
        self._saml_fields(node, body)
        return dict(node.data)

    def _saml_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        self._node("saml-provider", params["id"])
        self._remove("saml-provider", params["id"])

    def _spec_put(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        slug, source = params["spec"], body.get("source")
        if not isinstance(source, dict) or (set(source) != {"url"} and set(source) != {"text"}):
            raise ModelError("source: must be {url} or {text}")
        node = self._by_field("openapi-spec", "slug", slug)
        if node is None:
            spec_id = self._new_id()
            node = self._add("openapi-spec", spec_id, self._org_parent(), {"object": "openapi-spec", "id": spec_id, "slug": slug})
        raw_id = f"{node.id}/openapi-spec-source"
        if "url" in source:
            node.data["sourceURL"] = source["url"]
            self._remove("openapi-spec-source", raw_id)
        else:
            node.data.pop("sourceURL", None)
            text = str(source["text"])
            fmt = "json" if text.lstrip().startswith(("{", "[")) else "yaml"
            self._add("openapi-spec-source", raw_id, ("openapi-spec", node.id), {"text": text, "format": fmt})
        return dict(node.data)

    def _spec_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        node = self._by_field("openapi-spec", "slug", params["spec"])
        if node is None:
            raise ModelError(f"OpenAPI spec {params['spec']!r} not found")
        self._remove("openapi-spec-source", f"{node.id}/openapi-spec-source")
        self._remove("openapi-spec", node.id)

    def _translation_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body.get("title"), str) or not body["title"]:
            raise ModelError("title: is required")
        tid = self._new_id()
        data = {"object": "translation-settings", "id": tid, "title": body["title"], "languages": list(dict.fromkeys(body.get("languages") or []))}
        self._add("translation", tid, self._org_parent(), data)
        return dict(data)

    def _translation_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._node("translation", params["id"])
        if not isinstance(body.get("title"), str) or not body["title"]:
            raise ModelError("title: is required")
        node.data["title"] = body["title"]
        if body.get("languages") is not None:
            node.data["languages"] = list(dict.fromkeys(body["languages"]))
        return dict(node.data)

    def _translation_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        self._node("translation", params["id"])
        self._remove("translation", params["id"])

    def _field_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        name, field_type = body.get("name"), body.get("type")
        if not isinstance(name, str) or not name or not isinstance(field_type, str):
            raise ModelError("name and type: are required")
        if self._by_field("custom-field", "name", name) is not None:
            raise ModelError(f"name: a custom field {name!r} already exists")
        fid = self._new_id()
        data = {"object": "custom-field", "id": fid, "name": name, "type": field_type}
        for key in ("title", "description", "placeholder", "options"):
            if body.get(key) is not None:
                data[key] = copy.deepcopy(body[key])
        self._add("custom-field", fid, self._org_parent(), data)
        return dict(data)

    def _field(self, name: str) -> _N:
        node = self._by_field("custom-field", "name", name)
        if node is None:
            raise ModelError(f"custom field {name!r} not found")
        return node

    def _field_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._field(params["name"])
        for key in ("title", "description", "placeholder", "options"):
            if key in body:
                if body[key] is None:
                    raise ModelError(f"{key}: must be a string")
                node.data[key] = copy.deepcopy(body[key])
        return dict(node.data)

    def _field_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        node = self._field(params["name"])
        for value in [n for n in self.nodes.values() if n.kind == "space-custom-field-value" and n.id.endswith("/" + node.data["name"])]:
            self._remove(value.kind, value.id)
        self._remove("custom-field", node.id)

    # ----- collections and spaces ---------------------------------------------------------

    def _tree_parent_of(self, parent: str | None) -> tuple[str, str]:
        return ("collection", parent) if parent else self._org_parent()

    def _check_parent(self, parent: Any) -> str | None:
        if parent is None:
            return None
        if not isinstance(parent, str) or ("collection", parent) not in self.nodes:
            raise ModelError(f"parent: collection {parent!r} not found in this organization")
        return parent

    def _collection_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        parent = self._check_parent(body.get("parent"))
        cid = self._new_id()
        data: dict[str, Any] = {"object": "collection", "id": cid, "title": body.get("title") or "Untitled", "organization": self.org, "defaultLevel": "read"}
        if parent:
            data["parent"] = parent
        self._add("collection", cid, self._tree_parent_of(parent), data)
        self.tree[parent or ""].append(("collection", cid))
        return dict(data)

    def _collection_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._node("collection", params["id"])
        for key in ("title", "defaultLevel"):
            if key in body:
                node.data[key] = body[key]
        if "description" in body:
            if body["description"] is None:
                node.data.pop("description", None)
            else:
                node.data["description"] = body["description"]
        return dict(node.data)

    def _descendants(self, collection_id: str) -> list[TreeItem]:
        out: list[TreeItem] = []
        for item in self.tree.get(collection_id, ()):
            out.append(item)
            if item[0] == "collection":
                out.extend(self._descendants(item[1]))
        return out

    def _place(self, order: list[Any], item: Any, before: Any, after: Any, label: str) -> None:
        try:
            place(order, item, before, after)
        except PositionError as exc:
            raise ModelError(f"{label}: {exc}") from None

    @staticmethod
    def _position(body: dict[str, Any], types: tuple[str, ...], key: str) -> tuple[str | None, str | None]:
        try:
            return parse_position(body.get("position"), types, key)
        except PositionError as exc:
            raise ModelError(str(exc)) from None

    def _tree_move(self, kind: str, item_id: str, body: dict[str, Any]) -> dict[str, Any]:
        node = self._node(kind, item_id)
        old_parent = ref_id(node.data.get("parent"))
        new_parent = old_parent
        if "parent" in body:
            new_parent = self._check_parent(body["parent"])
            if kind == "collection" and new_parent is not None:
                inside = {i for _, i in self._descendants(item_id)} | {item_id}
                if new_parent in inside:
                    raise ModelError("parent: a collection cannot move into itself or its descendants")
        before, after = self._position(body, ("space",), "space")
        siblings = self.tree[new_parent or ""]
        by_id = {i: (k, i) for k, i in siblings}
        for ref in (before, after):
            if ref is not None and ref not in by_id:
                raise ModelError(f"position: {ref!r} is not a sibling under the target parent")
        old = self.tree[old_parent or ""]
        if (kind, item_id) in old:
            old.remove((kind, item_id))
        self._place(siblings, (kind, item_id), by_id.get(before) if before else None, by_id.get(after) if after else None, "item")
        if new_parent:
            node.data["parent"] = new_parent
        else:
            node.data.pop("parent", None)
        self._reparent(node, self._tree_parent_of(new_parent))
        if kind == "space" and new_parent is None and node.data.get("visibility") == "in-collection":
            node.data["visibility"] = "private"
        return dict(node.data)

    def _reparent(self, node: _N, parent: tuple[str, str]) -> None:
        siblings = self.kids.get((node.kind, node.parent))
        if siblings and node.id in siblings:
            siblings.remove(node.id)
        node.parent = parent
        self.kids[(node.kind, parent)].append(node.id)

    def _collection_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        node = self._node("collection", params["id"])
        for kind, item in reversed(self._descendants(node.id)):
            if kind == "space":
                self._drop_space(item)
            else:
                self._remove("collection", item)
                self.tree.pop(item, None)
        parent = ref_id(node.data.get("parent"))
        if ("collection", node.id) in self.tree[parent or ""]:
            self.tree[parent or ""].remove(("collection", node.id))
        self.tree.pop(node.id, None)
        self._remove("collection", node.id)

    def _space_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        parent = self._check_parent(body.get("parent"))
        sid = self._new_id()
        data: dict[str, Any] = {
            "object": "space",
            "id": sid,
            "title": body.get("title") or "Untitled",
            "emoji": body.get("emoji") or "",
            "visibility": "in-collection" if parent else "private",
            "editMode": body.get("editMode") or "live",
            "defaultLevel": "read",
            "organization": self.org,
            "urls": {"app": f"model://{self.org}/s/{sid}/"},
        }
        if parent:
            data["parent"] = parent
        if body.get("language"):
            data["language"] = body["language"]
        self._add("space", sid, self._tree_parent_of(parent), data)
        self.tree[parent or ""].append(("space", sid))
        return dict(data)

    def _space_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._node("space", params["id"])
        for key in ("title", "emoji", "editMode", "defaultLevel"):
            if key in body:
                if body[key] is None:
                    raise ModelError(f"{key}: must be a string")
                node.data[key] = body[key]
        return dict(node.data)

    def _drop_space(self, space_id: str) -> None:
        node = self.nodes.get(("space", space_id))
        if node is None:
            return
        parent = ref_id(node.data.get("parent"))
        if ("space", space_id) in self.tree.get(parent or "", []):
            self.tree[parent or ""].remove(("space", space_id))
        self._clear_content(space_id)
        for value in list(self.kids.get(("space-custom-field-value", ("space", space_id)), [])):
            self._remove("space-custom-field-value", value)
        self._remove("space", space_id)
        for key, items in list(self.containers.items()):
            gone = [i for i in items if ref_id(self.nodes[("site-space", i)].data.get("space")) == space_id]
            for item in gone:
                items.remove(item)
                self._remove("site-space", item)
            if gone:
                self._refresh_defaults(key[0])

    def _space_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        self._node("space", params["id"])
        self._drop_space(params["id"])

    def _clear_content(self, space_id: str) -> None:
        for kind in ("page", "file"):
            for node in [n for n in self.nodes.values() if n.kind == kind and n.id.startswith(space_id + "/")]:
                self._remove(kind, node.id)
        for key in [k for k in self.pages if (k[0] == "space" and k[1] == space_id) or (k[0] == "page" and k[1].startswith(space_id + "/"))]:
            del self.pages[key]

    def _copy_content(self, source_space: str, space_id: str) -> None:
        """The source space's pages and files, with new ids, as the space's content."""
        if self.source is None:
            raise ModelError("no source to copy content from")
        self._clear_content(space_id)

        def copy_pages(parent: tuple[str, str], target_parent: tuple[str, str]) -> None:
            for page in self.source.children("page", parent) if self.source else []:
                qid = f"{space_id}/{self._new_id()}"
                data = copy.deepcopy(dict(page.data))
                data["id"] = qid.rsplit("/", 1)[1]
                self._add("page", qid, target_parent, data)
                self.pages[target_parent].append(qid)
                copy_pages(("page", page.id), ("page", qid))

        copy_pages(("space", source_space), ("space", space_id))
        for file in self.source.children("file", ("space", source_space)):
            qid = f"{space_id}/{self._new_id()}"
            data = copy.deepcopy(dict(file.data))
            data["id"] = qid.rsplit("/", 1)[1]
            self._add("file", qid, ("space", space_id), data)

    def _source_space_of(self, url: str) -> str:
        if self.source is None:
            raise ModelError("no source to import from")
        for node in self.source.of_kind("space"):
            urls = node.data.get("urls") or {}
            if url in {v for v in urls.values() if isinstance(v, str)}:
                return node.id
        match = re.search(r"/(?:s|spaces)/([^/?#]+)", url)
        if match and self.source.get("space", match.group(1)) is not None:
            return match.group(1)
        raise ModelError(f"cannot import from {url}: no space at this address")

    def _space_import(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        self._node("space", params["id"])
        if not isinstance(body.get("url"), str) or not body.get("source"):
            raise ModelError("url and source: are required")
        self._copy_content(self._source_space_of(body["url"]), params["id"])
        return {"revision": self._new_id()}

    def _source_call(self, method: str, path: str) -> dict[str, Any]:
        match = re.fullmatch(r"/v1/spaces/([^/]+)/duplicate", path)
        if method != "POST" or match is None or self.source is None:
            raise ModelError(f"{method} {path}: not a call the source side makes")
        source_id = match.group(1)
        if self.source.get("space", source_id) is None:
            raise ModelError(f"space {source_id!r} not found in the source")
        dup = self._new_id()
        self.duplicates[dup] = source_id
        return {"object": "space", "id": dup}

    def _space_transfer(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        dup = params["id"]
        if dup not in self.duplicates or self.source is None:
            raise ModelError(f"space {dup!r} not found (only duplicates of the source are transferred here)")
        if body.get("organization") != self.org:
            raise ModelError("organization: must be this organization")
        parent = self._check_parent(body.get("collection"))
        original = self.source.get("space", self.duplicates.pop(dup))
        assert original is not None
        data: dict[str, Any] = {"object": "space", "id": dup, "organization": self.org, "urls": {"app": f"model://{self.org}/s/{dup}/"}}
        for key in ("title", "emoji", "visibility", "editMode", "defaultLevel", "language"):
            if original.data.get(key) is not None:
                data[key] = copy.deepcopy(original.data[key])
        data.setdefault("title", "Untitled")
        data.setdefault("emoji", "")
        if parent:
            data["parent"] = parent
        elif data.get("visibility") == "in-collection":
            data["visibility"] = "private"
        self._add("space", dup, self._tree_parent_of(parent), data)
        self.tree[parent or ""].append(("space", dup))
        self._copy_content(original.id, dup)
        return dict(data)

    def _values_patch(self, params: dict[str, str], body: dict[str, Any]) -> None:
        space = self._node("space", params["space"])
        values = body.get("values")
        if not isinstance(values, dict):
            raise ModelError("values: is required")
        changes = []
        for name, entry in values.items():
            field = self._field(name)
            if not isinstance(entry, dict) or "value" not in entry:
                raise ModelError(f"values.{name}: must be an object {{value}}")
            changes.append((field, entry["value"]))
        for field, value in changes:
            value_id = f"{space.id}/{field.data['name']}"
            if value is None:
                self._remove("space-custom-field-value", value_id)
            else:
                data = {"customField": {"object": "custom-field", "id": field.id, "name": field.data["name"]}, "value": copy.deepcopy(value)}
                self._add("space-custom-field-value", value_id, ("space", space.id), data)

    # ----- sites --------------------------------------------------------------------------

    def _site(self, params: dict[str, str]) -> _N:
        return self._node("site", params["site"] if "site" in params else params["id"])

    def _site_sections(self, site_id: str) -> list[str]:
        out: list[str] = []
        for kind, item in self.top.get(site_id, ()):
            if kind == "site-section":
                out.append(item)
            else:
                out.extend(self.groups.get(item, ()))
        return out

    def _site_site_spaces(self, site_id: str) -> list[str]:
        out = list(self.containers.get((site_id, ""), ()))
        for section in self._site_sections(site_id):
            out.extend(self.containers.get((site_id, section), ()))
        return out

    def _refresh_defaults(self, site_id: str) -> None:
        """Owners whose default went away take their first child (as the service does)."""
        sections = self._site_sections(site_id)
        if self.default_section.get(site_id) not in sections:
            self.default_section[site_id] = sections[0] if sections else None
        for section in ["", *sections]:
            ids = self.containers.get((site_id, section), [])
            if self.default_site_space.get((site_id, section)) not in ids:
                self.default_site_space[(site_id, section)] = ids[0] if ids else None
        self._sync_site(site_id)

    def _sync_site(self, site_id: str) -> None:
        """The flags and references the listings show, from the site's structure."""
        for kind, item in self.top.get(site_id, ()):
            if kind == "site-section":
                self.nodes[("site-section", item)].data.pop("sectionGroup", None)
            else:
                for section in self.groups.get(item, ()):
                    self.nodes[("site-section", section)].data["sectionGroup"] = item
        default_section = self.default_section.get(site_id)
        for section in self._site_sections(site_id):
            self.nodes[("site-section", section)].data["default"] = section == default_section
        for section in ["", *self._site_sections(site_id)]:
            default = self.default_site_space.get((site_id, section))
            for item in self.containers.get((site_id, section), ()):
                data = self.nodes[("site-space", item)].data
                data["default"] = item == default
                if section:
                    data["section"] = section
                else:
                    data.pop("section", None)

    def _add_schema(self, site_id: str) -> None:
        data = {"object": "site-adaptive-schema", "jsonSchema": copy.deepcopy(DEFAULT_ADAPTIVE_SCHEMA)}
        self._add("site-adaptive-schema", f"{site_id}/site-adaptive-schema", ("site", site_id), data)

    def _site_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site_id = self._new_id()
        title = body.get("title") or "Untitled site"
        if not isinstance(title, str) or len(title) < 2:
            raise ModelError("title: must be at least 2 characters")
        data = {"object": "site", "id": site_id, "type": body.get("type") or "basic", "title": title, "visibility": body.get("visibility") or "public", "published": False}
        self._add("site", site_id, self._org_parent(), data)
        self.top[site_id] = []
        self.containers[(site_id, "")] = []
        self.default_section[site_id] = None
        self._add_schema(site_id)
        for space in body.get("spaces") or []:
            self._add_site_space(site_id, space, None)
        return dict(data)

    def _site_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        node = self._site(params)
        site_id = node.id
        section = None
        if "defaultSiteSection" in body:
            section = body["defaultSiteSection"]
            if section not in self._site_sections(site_id):
                raise ModelError(f"defaultSiteSection: section {section!r} not found in this site")
        site_space = None
        if "defaultSiteSpace" in body:
            site_space = body["defaultSiteSpace"]
            container = self._container_of(site_id, site_space)
            if container is None:
                raise ModelError(f"defaultSiteSpace: site-space {site_space!r} not found in this site")
            default_section = section if section is not None else self.default_section.get(site_id)
            if (container or None) != default_section:
                raise ModelError("defaultSiteSpace: must be a site-space of the site's default section (or of the root)")
        for key in ("title", "visibility", "basename"):
            if key in body:
                if not isinstance(body[key], str):
                    raise ModelError(f"{key}: must be a string")
                node.data[key] = body[key]
        if "adaptiveContent" in body:
            enabled = (body["adaptiveContent"] or {}).get("enabled")
            if not isinstance(enabled, bool):
                raise ModelError("adaptiveContent.enabled: is required")
            node.data["adaptiveContent"] = {"enabled": enabled}
        if "proxy" in body:
            if body["proxy"] is None:
                node.data.pop("proxy", None)
            else:
                node.data["proxy"] = {"origin": body["proxy"], "target": f"https://proxy.example/{body['proxy']}"}
        if section is not None:
            self.default_section[site_id] = section
        if site_space is not None:
            self.default_site_space[(site_id, self._container_of(site_id, site_space) or "")] = site_space
        self._sync_site(site_id)
        return dict(node.data)

    def _container_of(self, site_id: str, site_space: str) -> str | None:
        for (site, section), items in self.containers.items():
            if site == site_id and site_space in items:
                return section
        return None

    def _site_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        node = self._site(params)
        site_id = node.id
        for child in [n for n in self.nodes.values() if n.parent == ("site", site_id)]:
            self._remove(child.kind, child.id)
        for kind, item in self.top.pop(site_id, []):
            self.groups.pop(item, None)
        for key in [k for k in self.containers if k[0] == site_id]:
            del self.containers[key]
            self.default_site_space.pop(key, None)
        self.default_section.pop(site_id, None)
        self._remove("site", site_id)
        org = self.nodes.get(("organization", self.org))
        if org is not None and isinstance(org.data.get("defaultContent"), dict) and org.data["defaultContent"].get("site") == site_id:
            org.data.pop("defaultContent", None)

    def _child(self, kind: str, site_id: str, child_id: str) -> _N:
        node = self._node(kind, child_id)
        if node.parent != ("site", site_id):
            raise ModelError(f"{kind} {child_id!r} not found in site {site_id!r}")
        return node

    def _section_key(self, site_id: str, section_id: str) -> tuple[list[Any], Any]:
        """The list holding a section and the section's item in it."""
        group = self.section_group(section_id)
        if group is not None:
            return self.groups[group], section_id
        return self.top[site_id], ("site-section", section_id)

    def _group_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        title = body.get("title")
        if not isinstance(title, str) or not title:
            raise ModelError("title: is required")
        gid = self._new_id()
        data: dict[str, Any] = {"object": "site-section-group", "id": gid, "title": title}
        if body.get("icon"):
            data["icon"] = body["icon"]
        sections = [self._child("site-section", site.id, s).id for s in body.get("sections") or []]
        self._add("site-section-group", gid, ("site", site.id), data)
        self.top[site.id].append(("site-section-group", gid))
        self.groups[gid] = []
        for section in sections:
            self._put_in_group(site.id, section, gid)
        self._sync_site(site.id)
        return dict(data)

    def _put_in_group(self, site_id: str, section: str, group: str) -> None:
        if self.section_group(section) == group:
            return
        order, item = self._section_key(site_id, section)
        order.remove(item)
        self.groups[group].append(section)
        self.nodes[("site-section", section)].data["sectionGroup"] = group

    def _group_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        node = self._child("site-section-group", site.id, params["id"])
        if "title" in body:
            node.data["title"] = body["title"]
        if "icon" in body:
            if body["icon"] is None:
                node.data.pop("icon", None)
            else:
                node.data["icon"] = body["icon"]
        return dict(node.data)

    def _group_move(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        node = self._child("site-section-group", site.id, params["id"])
        before, after = self._position(body, ("site-section", "site-section-group"), "id")
        self._place_top(site.id, ("site-section-group", node.id), before, after)
        self._sync_site(site.id)
        return dict(node.data)

    def _place_top(self, site_id: str, item: TreeItem, before: str | None, after: str | None) -> None:
        order = self.top[site_id]
        by_id = {i: (k, i) for k, i in order}
        self._place(order, item, by_id.get(before, ("?", before)) if before else None, by_id.get(after, ("?", after)) if after else None, "item")

    def _group_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        site = self._site(params)
        node = self._child("site-section-group", site.id, params["id"])
        for section in reversed(self.groups.get(node.id, [])):
            self._take_out(site.id, section, node.id)
        self.groups.pop(node.id, None)
        self.top[site.id].remove(("site-section-group", node.id))
        self._remove("site-section-group", node.id)
        self._sync_site(site.id)

    def _take_out(self, site_id: str, section: str, group: str) -> None:
        self.groups[group].remove(section)
        self.nodes[("site-section", section)].data.pop("sectionGroup", None)
        order = self.top[site_id]
        order.insert(order.index(("site-section-group", group)) + 1, ("site-section", section))

    def _group_add(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        group = self._child("site-section-group", site.id, params["id"])
        section = self._child("site-section", site.id, str(body.get("sectionId")))
        self._put_in_group(site.id, section.id, group.id)
        self._sync_site(site.id)
        return dict(group.data)

    def _group_remove(self, params: dict[str, str], body: dict[str, Any]) -> None:
        site = self._site(params)
        group = self._child("site-section-group", site.id, params["id"])
        section = self._child("site-section", site.id, params["section"])
        if self.section_group(section.id) != group.id:
            raise ModelError(f"section {section.id!r} is not in section group {group.id!r}")
        self._take_out(site.id, section.id, group.id)
        self._sync_site(site.id)

    def _space_for_site(self, body: dict[str, Any]) -> str:
        space_id = body.get("spaceId")
        if not isinstance(space_id, str) or ("space", space_id) not in self.nodes:
            raise ModelError(f"spaceId: space {space_id!r} not found in this organization")
        return space_id

    def _add_site_space(self, site_id: str, space_id: str, section: str | None) -> str:
        key = (site_id, section or "")
        taken = {self.nodes[("site-space", i)].data.get("path") for i in self.containers[key]}
        space = self.nodes[("space", space_id)]
        ss_id = self._new_id()
        data: dict[str, Any] = {
            "object": "site-space",
            "id": ss_id,
            "path": unique_path(slugify(str(space.data.get("title") or ""), "space"), taken),
            "space": {"object": "space", "id": space_id, "title": space.data.get("title")},
        }
        self._add("site-space", ss_id, ("site", site_id), data)
        self.containers[key].append(ss_id)
        if self.default_site_space.get(key) is None:
            self.default_site_space[key] = ss_id
        return ss_id

    def _section_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        space_id = self._space_for_site(body)
        title = body.get("title")
        if title is not None and (not isinstance(title, str) or not 2 <= len(title) <= 64):
            raise ModelError("title: must be 2 to 64 characters")
        if title is None:
            space_title = str(self.nodes[("space", space_id)].data.get("title") or "")
            title = space_title if len(space_title) >= 2 else "Untitled section"
        first = not self._site_sections(site.id)
        section_id = self._new_id()
        taken = {self.nodes[("site-section", s)].data.get("path") for s in self._site_sections(site.id)}
        data = {"object": "site-section", "id": section_id, "title": title, "path": unique_path(slugify(title, "section"), taken)}
        self._add("site-section", section_id, ("site", site.id), data)
        self.top[site.id].append(("site-section", section_id))
        key = (site.id, section_id)
        self.containers[key] = []
        self.default_site_space[key] = None
        if first:
            self.default_section[site.id] = section_id
            root = self.containers.pop((site.id, ""), [])
            self.containers[key] = root
            self.containers[(site.id, "")] = []
            self.default_site_space[key] = self.default_site_space.get((site.id, ""))
            self.default_site_space[(site.id, "")] = None
        if not any(ref_id(self.nodes[("site-space", i)].data.get("space")) == space_id for i in self.containers[key]):
            self._add_site_space(site.id, space_id, section_id)
        self._sync_site(site.id)
        answer = dict(self.nodes[("site-section", section_id)].data)
        answer["siteSpaces"] = [dict(self.nodes[("site-space", i)].data) for i in self.containers[key]]
        return answer

    def _section_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        node = self._child("site-section", site.id, params["id"])
        if "path" in body:
            others = {self.nodes[("site-section", s)].data.get("path") for s in self._site_sections(site.id) if s != node.id}
            if body["path"] in others or not isinstance(body["path"], str):
                raise ModelError(f"path: {body['path']!r} is already used by a sibling")
        if "defaultSiteSpace" in body and body["defaultSiteSpace"] not in self.containers.get((site.id, node.id), []):
            raise ModelError(f"defaultSiteSpace: site-space {body['defaultSiteSpace']!r} not found in this section")
        for key in ("title", "path"):
            if key in body:
                node.data[key] = body[key]
        for key in ("condition", "icon", "description"):
            if key in body:
                if body[key] is None:
                    node.data.pop(key, None)
                else:
                    node.data[key] = body[key]
        if "defaultSiteSpace" in body:
            self.default_site_space[(site.id, node.id)] = body["defaultSiteSpace"]
        self._sync_site(site.id)
        return dict(node.data)

    def _section_move(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        node = self._child("site-section", site.id, params["id"])
        before, after = self._position(body, ("site-section",), "siteSection")
        group = self.section_group(node.id)
        if group is not None:
            self._place(self.groups[group], node.id, before, after, "section")
        else:
            self._place_top(site.id, ("site-section", node.id), before, after)
        self._sync_site(site.id)
        return dict(node.data)

    def _section_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        site = self._site(params)
        node = self._child("site-section", site.id, params["id"])
        for item in self.containers.pop((site.id, node.id), []):
            self._remove("site-space", item)
        self.default_site_space.pop((site.id, node.id), None)
        order, item = self._section_key(site.id, node.id)
        order.remove(item)
        self._remove("site-section", node.id)
        self._refresh_defaults(site.id)

    def _ss_create(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        section: str | None
        if "sectionId" in body:
            section = self._child("site-section", site.id, str(body["sectionId"])).id
        else:
            section = self.default_section.get(site.id)
        ss_id = self._add_site_space(site.id, self._space_for_site(body), section)
        self._sync_site(site.id)
        return dict(self.nodes[("site-space", ss_id)].data)

    def _ss_patch(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        node = self._child("site-space", site.id, params["id"])
        container = self._container_of(site.id, node.id) or ""
        if "path" in body:
            others = {self.nodes[("site-space", i)].data.get("path") for i in self.containers[(site.id, container)] if i != node.id}
            if body["path"] in others or not isinstance(body["path"], str):
                raise ModelError(f"path: {body['path']!r} is already used by a sibling")
            node.data["path"] = body["path"]
        if "condition" in body:
            if body["condition"] is None:
                node.data.pop("condition", None)
            else:
                node.data["condition"] = body["condition"]
        return dict(node.data)

    def _ss_move(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        node = self._child("site-space", site.id, params["id"])
        before, after = self._position(body, ("site-space",), "siteSpace")
        container = self._container_of(site.id, node.id) or ""
        self._place(self.containers[(site.id, container)], node.id, before, after, "site-space")
        self._sync_site(site.id)
        return dict(node.data)

    def _ss_delete(self, params: dict[str, str], body: dict[str, Any]) -> None:
        site = self._site(params)
        node = self._child("site-space", site.id, params["id"])
        container = self._container_of(site.id, node.id) or ""
        self.containers[(site.id, container)].remove(node.id)
        self._remove("site-space", node.id)
        self._refresh_defaults(site.id)

    def _schema_put(self, params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        site = self._site(params)
        schema = body.get("jsonSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
            raise ModelError("jsonSchema: must be an object schema")
        data = {"object": "site-adaptive-schema", "jsonSchema": copy.deepcopy(schema)}
        self._add("site-adaptive-schema", f"{site.id}/site-adaptive-schema", ("site", site.id), data)
        return dict(data)


# ----- applying a plan ------------------------------------------------------------------------


def dig(data: Any, dotted_path: str) -> Any:
    """The value at `a.b.0.c` (list indexes allowed), or None."""
    for part in dotted_path.split(".") if dotted_path else []:
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def creates_object(op: Op) -> bool:
    """A call that makes a new object, recorded in the id map as (op.kind, op.source_id)."""
    return op.action == "create" or (op.action == "content" and op.path.rstrip("/").endswith("/duplicate"))


def dependencies(plan: Plan) -> dict[str, list[str]]:
    """op key -> keys it waits for: its `after`, and the ops that make what its Refs name."""
    producers: dict[tuple[str, str], str] = {}
    for op in plan.ops:
        made = [(op.kind, op.source_id)] if op.source_id and (op.action == "adopt" or creates_object(op)) else []
        for item in made + [(k, s) for k, s, _ in op.produces]:
            producers.setdefault(item, op.key)
    keys = {op.key for op in plan.ops}
    deps: dict[str, list[str]] = {}
    for op in plan.ops:
        refs = [*path_refs(op.path), *refs_in(op.body), *refs_in(op.params)]
        wanted = [k for k in op.after if k in keys] + [p for r in refs if (p := producers.get((r.kind, r.source_id)))]
        deps[op.key] = [k for k in dict.fromkeys(wanted) if k != op.key]
    return deps


def execution_order(plan: Plan, rng: random.Random | None = None) -> list[Op]:
    """The ops in an order apply could run them: the plan's own order, or (with `rng`) a
    random order that respects every dependency, as concurrent workers might."""
    if rng is None:
        return list(plan.ops)
    deps = dependencies(plan)
    by_key = {op.key: op for op in plan.ops}
    waiting = {key: set(before) for key, before in deps.items()}
    ready = [op.key for op in plan.ops if not waiting[op.key]]
    order: list[Op] = []
    while ready:
        key = ready.pop(rng.randrange(len(ready)))
        order.append(by_key[key])
        for other, before in waiting.items():
            if key in before:
                before.discard(key)
                if not before:
                    ready.append(other)
    if len(order) != len(plan.ops):
        raise ValueError("the plan's ops wait for each other in a cycle")
    return order


def apply_to_model(
    plan: Plan, target: Snapshot, idmap: IdMap, source: Snapshot, *, rng: random.Random | None = None, stop_after: int | None = None
) -> tuple[Snapshot, IdMap]:
    """The target and id map after applying `plan` as apply does: adopts record their
    mapping; a create whose source object is already mapped to an object that still exists
    is "already done"; ids from answers go to the id map ('created'), deletes drop theirs.

    `rng` runs the ops in a random order that respects their dependencies; `stop_after`
    stops after that many ops (a run killed half way)."""
    if plan.refused:
        raise ValueError(f"refused plan: {plan.refused}")
    model = TargetModel.from_snapshot(target, source=source, id_prefix="sim")
    mapped = idmap.copy()
    for (kind, source_id), entry in idmap.entries.items():
        if kind == "space-duplicate":
            model.duplicates[entry.target_id] = source_id
            model._used.add(entry.target_id)
    for index, op in enumerate(execution_order(plan, rng)):
        if stop_after is not None and index >= stop_after:
            break
        if op.action == "adopt":
            if op.source_id and op.target_id and mapped.target(op.kind, op.source_id) is None:
                mapped.put(op.kind, op.source_id, op.target_id, "adopted")
            continue
        if creates_object(op) and op.source_id:
            current = mapped.target(op.kind, op.source_id)
            if current is not None and current != op.target_id:
                continue  # already done
        try:
            answer = model.execute(op, mapped.target)
        except ModelError:
            if op.action == "delete" and op.target_id and model.get(op.kind, op.target_id) is None:
                answer = {}  # already gone: apply counts a 404 on DELETE as done
            else:
                raise
        if creates_object(op) and op.source_id:
            new_id = dig(answer, op.result_id_field)
            if not isinstance(new_id, str):
                raise ModelError(f"{op.key}: the answer holds no {op.result_id_field!r}")
            mapped.put(op.kind, op.source_id, new_id, "created")
        for kind, source_id, path in op.produces:
            made = dig(answer, path)
            if isinstance(made, str):
                mapped.put(kind, source_id, made, "created")
        if op.action == "delete" and op.source_id:
            mapped.drop(op.kind, op.source_id)
    return model.to_snapshot(), mapped


__all__ = ["ModelError", "TargetModel", "apply_to_model", "creates_object", "dependencies", "dig", "execution_order"]
