"""How each kind is compared and copied: identity for adoption, compared fields, references,
and what cannot be copied (with the reason a plan reports).

The API's side of it (paths, which body fields a create or a patch takes) is the catalog's
(`syncd.catalog.Writes`): a rule only says which of those fields a copy compares, under which
canonical name, and which fields name other objects. Everything here is a pure reader of a
`Snapshot`: plan, the settle steps, the after-write checks and verify all compare objects in
the same canonical form, so a plan made right after a copy finds nothing to do.

Canonical form. `canonical(kind, node, view)` gives {field: value} for the kind's compared
fields, read from the API object; fields naming another object (`Rule.refs`) hold that
object's id in the view's tenant. `comparable` rewrites those ids to SOURCE ids through a
function (identity for the source side, the reverse id map for the target side), so the two
sides compare with `==`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from syncd.catalog import BY_NAME, dotted
from syncd.copy.meaning import form, meaning
from syncd.copy.model import Node, Snapshot

COPIED_KINDS: tuple[str, ...] = (
    "organization",
    "team",
    "custom-field",
    "translation",
    "openapi-spec",
    "saml-provider",
    "collection",
    "space",
    "site",
    "site-section-group",
    "site-section",
    "site-space",
    "site-adaptive-schema",
)
"""Kinds a copy makes equal on the target, in copy order (verify compares these)."""

NOT_COPIED: dict[str, str] = {
    "member": "members cannot be created through the API: invite them to the target organization",
    "comment": "comments are discussion history: not copied",
    "change-request": "change requests are editing history: not copied (the space's current content is)",
    "integration": "integrations are published by their owner organization: not copied",
    "integration-installation": "installations are made on the target by the integration's owner: not copied",
}
"""Kinds a plan reports as skipped (one skip per kind, with the count)."""

COVERED: frozenset[str] = frozenset(
    {
        "page",  # space content
        "file",  # space content
        "openapi-spec-source",  # the `source` of its spec
        "space-custom-field-value",  # `customFields` of its space
        "comment-reply",
        "change-request-page",
        "change-request-file",
        "change-request-comment",
        "change-request-comment-reply",
    }
)
"""Kinds copied as part of another object, or skipped with their parent: never reported."""

TEAM_MEMBERS_REASON = "team membership is not copied: member ids differ across tenants (add members on the target)"
SHAREABLE = frozenset({"public", "unlisted", "share-link"})
"""Space visibilities whose content any token can import from the space's URL."""

DEFAULT_ADAPTIVE_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "unsigned": {
            "type": "object",
            "description": "Unsigned claims of the site visitor.",
            "properties": {},
            "additionalProperties": False,
        }
    },
    "additionalProperties": False,
}
"""The adaptive schema a site has before one is set (what a new site answers)."""

SECTION_CREATE_TITLE_MAX = 64
PAGE_FIELDS: tuple[str, ...] = ("title", "emoji", "description", "markdown", "hidden", "type")
FILE_FIELDS: tuple[str, ...] = ("name", "contentType", "size")

Scope = Literal["org", "tree", "site"]


@dataclass(frozen=True)
class Rule:
    """How one kind is compared and copied.

    `key` is the canonical field that identifies an equivalent object within its scope (for
    adoption): org-wide, under the same parent collection (`tree`), or within the same site.
    `fields` are compared (by plan and verify). Which of them a create or a patch can send is
    the catalog's (`create_fields`, `patch_fields`, by API body name: `body_names` maps a
    canonical name to its body name). `structural` fields are compared but written by the
    settle steps or dedicated calls (parent, position, path, defaults, group membership,
    custom field values). `skip_fields` are not writable: a difference is reported as a skip,
    never compared by verify. `nullable` patch fields accept null to remove a value.
    """

    kind: str
    key: str | tuple[str, ...]
    scope: Scope
    fields: tuple[str, ...]
    structural: tuple[str, ...] = ()
    refs: Mapping[str, str] = field(default_factory=dict)
    nullable: frozenset[str] = frozenset()
    skip_fields: Mapping[str, str] = field(default_factory=dict)
    body_names: Mapping[str, str] = field(default_factory=dict)
    title_field: str = "title"

    def body_name(self, name: str) -> str:
        return self.body_names.get(name, name)

    @cached_property
    def create(self) -> tuple[str, ...]:
        """Compared fields a create call carries (the catalog's `create_fields`)."""
        writes = BY_NAME[self.kind].writes
        allowed = writes.create_fields if writes is not None else frozenset()
        return tuple(name for name in self.fields if self.body_name(name) in allowed)

    @cached_property
    def patch(self) -> tuple[str, ...]:
        """Compared fields the kind's patch call writes (the catalog's `patch_fields`),
        structural ones left to the settle steps."""
        writes = BY_NAME[self.kind].writes
        allowed = writes.patch_fields if writes is not None else frozenset()
        return tuple(n for n in self.fields if self.body_name(n) in allowed and n not in self.structural)


RULES: dict[str, Rule] = {
    rule.kind: rule
    for rule in (
        Rule(
            "organization",
            key="id",
            scope="org",
            fields=("emailDomains", "defaultRole", "sso", "ai", "inviteLinks", "defaultContent"),
            refs={"defaultContent.site": "site"},
            nullable=frozenset({"defaultRole", "defaultContent"}),
            skip_fields={"hostname": "an organization hostname is unique across the service: set the target's by hand"},
        ),
        Rule("team", key="title", scope="org", fields=("title",)),
        Rule("custom-field", key="name", scope="org", fields=("name", "type", "title", "description", "placeholder", "options"), title_field="name"),
        Rule("translation", key="title", scope="org", fields=("title", "languages")),
        Rule("openapi-spec", key="slug", scope="org", fields=("slug", "source"), title_field="slug"),
        Rule(
            "saml-provider",
            key="label",
            scope="org",
            fields=("label", "entityID", "certificate", "ssoURL", "defaultTeam", "defaultRole"),
            refs={"defaultTeam": "team"},
            nullable=frozenset({"defaultTeam", "defaultRole"}),
            title_field="label",
        ),
        Rule(
            "collection",
            key="title",
            scope="tree",
            fields=("title", "description", "defaultLevel", "parent"),
            structural=("parent",),
            refs={"parent": "collection"},
            nullable=frozenset({"description"}),
        ),
        Rule(
            "space",
            key="title",
            scope="tree",
            fields=("title", "emoji", "editMode", "defaultLevel", "language", "parent", "customFields"),
            structural=("parent", "customFields"),
            refs={"parent": "collection"},
            skip_fields={"visibility": "space visibility is not writable through the API: set it on the target by hand"},
        ),
        Rule(
            "site",
            key="title",
            scope="org",
            fields=("type", "title", "visibility", "basename", "adaptiveContent", "proxy"),
            nullable=frozenset({"proxy"}),
            skip_fields={
                "hostname": "a site hostname is not writable through the API: set the target's by hand",
                "published": "publishing a site is not available through the API: publish it on the target by hand",
            },
        ),
        Rule("site-section-group", key="title", scope="site", fields=("title", "icon"), nullable=frozenset({"icon"})),
        Rule(
            "site-section",
            key="title",
            scope="site",
            fields=("title", "path", "condition", "icon", "description", "sectionGroup", "default"),
            structural=("path", "sectionGroup", "default"),
            refs={"sectionGroup": "site-section-group"},
            nullable=frozenset({"condition", "icon", "description"}),
        ),
        Rule(
            "site-space",
            key=("space", "section"),
            scope="site",
            fields=("space", "path", "condition", "section", "default"),
            structural=("path", "section", "default"),
            refs={"space": "space", "section": "site-section"},
            nullable=frozenset({"condition"}),
            body_names={"space": "spaceId", "section": "sectionId"},
            title_field="path",
        ),
        Rule("site-adaptive-schema", key="site", scope="site", fields=("jsonSchema",), title_field="object"),
    )
}

ORGANIZATION_IDENTITY: dict[str, str] = {
    "title": "the target organization keeps its own title",
    "urls.logo": "the target organization keeps its own logo",
}
"""What a copy leaves alone on purpose: the target keeps its identity (reported as skips)."""

ACCESS_FIELDS: tuple[str, ...] = ("emailDomains", "inviteLinks", "defaultRole", "sso")
"""Organization fields that decide who may join or sign in: the target's own, like its
identity, unless a copy is asked `with_access` (the other organization fields are copied)."""
ACCESS_KINDS: dict[str, str] = {"saml-provider": "SAML providers"}
"""Kinds that decide who may sign in (SSO), with their name in a plan's skip: copied, updated
and deleted only `with_access`."""
ACCESS_KEY = "patch:organization:access"
"""The key of the op that writes ACCESS_FIELDS (its own op, listed under its own heading)."""


# ----- reading objects ----------------------------------------------------------------------


def ref_id(value: Any) -> str | None:
    """An id from a reference field: a string, or an embedded object with an `id`."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, Mapping) and isinstance(value.get("id"), str) and value["id"]:
        return str(value["id"])
    return None


def text(value: Any) -> str | None:
    """A non-empty string, or None (titles and names of malformed objects)."""
    return value if isinstance(value, str) and value else None


def title_of(kind: str, node: Node | None) -> str:
    if node is None:
        return ""
    rule = RULES.get(kind)
    name = rule.title_field if rule else (BY_NAME[kind].title_field if kind in BY_NAME else "title")
    value = dotted(node.data, name) if name else None
    if value is None:
        value = node.data.get("title") or node.data.get("name")
    return str(value)[:80] if value is not None else node.id


def tree_parent(node: Node) -> str | None:
    """The parent collection id of a collection or space (None at the root)."""
    parent = ref_id(node.data.get("parent"))
    if parent is None and node.parent and node.parent[0] == "collection":
        parent = node.parent[1]
    return parent


def site_of(node: Node) -> str | None:
    """The site of a site child (section, group, site-space, adaptive schema)."""
    if node.parent and node.parent[0] == "site":
        return node.parent[1]
    return None


def spec_source(node: Node, view: Snapshot) -> dict[str, str] | None:
    """`{url}` or `{text}`: what a PUT of the spec sends (None when the text was not read)."""
    url = node.data.get("sourceURL")
    if isinstance(url, str) and url:
        return {"url": url}
    raw = view.get("openapi-spec-source", f"{node.id}/openapi-spec-source")
    content = raw.data.get("text") if raw is not None else None
    return {"text": content} if isinstance(content, str) and content else None


def custom_field_values(node: Node, view: Snapshot) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for value in view.children("space-custom-field-value", ("space", node.id)):
        name = dotted(value.data, "customField.name") or value.api_id
        if value.data.get("value") is not None:
            out[str(name)] = value.data.get("value")
    return dict(sorted(out.items()))


def canonical(kind: str, node: Node, view: Snapshot) -> dict[str, Any]:
    """The compared fields of an object; references as ids of the view's tenant."""
    rule = RULES[kind]
    data = node.data
    out: dict[str, Any] = {}
    for name in rule.fields:
        value: Any = data.get(name)
        if kind in ("collection", "space") and name == "parent":
            value = tree_parent(node)
        elif name == "customFields":
            value = custom_field_values(node, view)
        elif name in rule.refs and "." not in name:
            value = ref_id(value)  # an id, or an embedded object (a site-space's space)
        elif name == "default":
            value = bool(value)
        elif kind == "site" and name == "proxy":
            value = value.get("origin") if isinstance(value, Mapping) else value
        elif kind == "site" and name == "adaptiveContent":
            value = {"enabled": bool(value.get("enabled"))} if isinstance(value, Mapping) else {"enabled": False}
        elif kind == "openapi-spec" and name == "source":
            value = spec_source(node, view)
        elif kind == "organization" and name == "defaultContent":
            value = dict(value) if isinstance(value, Mapping) and value else None
        elif kind == "site-adaptive-schema" and name == "jsonSchema":
            value = value if isinstance(value, Mapping) else DEFAULT_ADAPTIVE_SCHEMA
        out[name] = plain(value)
    return out


def plain(value: Any) -> Any:
    """JSON-like values with mappings as dicts and sequences as lists (so `==` is exact)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def comparable(kind: str, canon: Mapping[str, Any], to_source: Callable[[str, str], str]) -> dict[str, Any]:
    """`canon` with every reference rewritten by `to_source(kind, id)`."""
    out = dict(canon)
    for path, ref_kind in RULES[kind].refs.items():
        head, _, rest = path.partition(".")
        if head not in out or out[head] is None:
            continue
        if not rest:
            out[head] = to_source(ref_kind, out[head])
        elif isinstance(out[head], dict) and isinstance(out[head].get(rest), str):
            out[head] = {**out[head], rest: to_source(ref_kind, out[head][rest])}
    return out


def unmapped(kind: str, target_id: str) -> str:
    """How a target reference to an object with no source counterpart compares: never equal
    to a source id."""
    return f"<target {kind} {target_id}>"


# ----- identity -----------------------------------------------------------------------------


def identity(kind: str, node: Node, view: Snapshot, to_source: Callable[[str, str], str] = lambda k, i: i) -> tuple[Any, ...]:
    """What makes two objects equivalent for adoption, in source terms: the natural key
    (title, name, slug, label; a site-space's space and section) and the scope it is unique in
    (the parent collection, the site), references rewritten by `to_source`."""
    rule = RULES[kind]
    if kind == "organization":
        return ("organization",)
    canon = comparable(kind, canonical(kind, node, view), to_source)
    keys = rule.key if isinstance(rule.key, tuple) else (rule.key,)
    natural = tuple(canon.get(k) if k in canon else node.data.get(k) for k in keys)
    if rule.scope == "tree":
        parent = tree_parent(node)
        return (to_source("collection", parent) if parent else None, *natural)
    if rule.scope == "site":
        site = site_of(node)
        return (to_source("site", site) if site else None, *natural)
    return natural


# ----- sites --------------------------------------------------------------------------------


def site_top_order(view: Snapshot, site_id: str) -> list[tuple[str, str]]:
    """The site's top-level items (sections and groups, mixed) in navigation order.

    Listings show sections in navigation order (grouped ones where their group stands) and
    groups in their own order: a group stands where its first section does; an empty group
    right after the group before it (or before the first group)."""
    items: list[tuple[str, str]] = []
    groups = [g.id for g in view.children("site-section-group", ("site", site_id))]
    placed: set[str] = set()
    for section in view.children("site-section", ("site", site_id)):
        group = ref_id(section.data.get("sectionGroup"))
        if group is None or group not in groups:
            items.append(("site-section", section.id))
        elif group not in placed:
            placed.add(group)
            items.append(("site-section-group", group))
    for index, group in enumerate(groups):
        if group in placed:
            continue
        before = [g for g in groups[:index] if g in placed]
        if before:
            at = items.index(("site-section-group", before[-1])) + 1
        else:
            after = [i for i, item in enumerate(items) if item[0] == "site-section-group"]
            at = after[0] if after else len(items)
        items.insert(at, ("site-section-group", group))
        placed.add(group)
    return items


def group_sections(view: Snapshot, site_id: str, group_id: str) -> list[str]:
    return [s.id for s in view.children("site-section", ("site", site_id)) if ref_id(s.data.get("sectionGroup")) == group_id]


def container_site_spaces(view: Snapshot, site_id: str, section_id: str | None) -> list[Node]:
    """Site-spaces of one section (or of the site root) in their order."""
    return [n for n in view.children("site-space", ("site", site_id)) if ref_id(n.data.get("section")) == section_id]


# ----- content ------------------------------------------------------------------------------

PageTree = tuple[tuple[Any, ...], ...]


def page_tree(view: Snapshot, space_id: str, *, exact: bool = False, structure: bool = False) -> PageTree:
    """A space's pages as nested tuples (PAGE_FIELDS..., children), in document order; the
    markdown as what it says (`meaning`, the page's title given: a first heading that repeats
    it is no content), with its blocks as written when `structure` (`form`), or byte for byte
    when `exact`."""

    def field(page: Node, name: str) -> Any:
        if name == "hidden":
            return bool(page.data.get(name))
        if name == "markdown" and not exact:
            value, title = page.data.get(name), page.data.get("title")
            if not isinstance(value, str):
                return plain(value)
            return (form if structure else meaning)(value, title if isinstance(title, str) else None)
        return plain(page.data.get(name))

    def below(parent: tuple[str, str]) -> PageTree:
        return tuple((*(field(page, f) for f in PAGE_FIELDS), below(("page", page.id))) for page in view.children("page", parent))

    return below(("space", space_id))


def file_list(view: Snapshot, space_id: str) -> tuple[tuple[Any, ...], ...]:
    """A space's files by name (ids differ between copies)."""
    return tuple(sorted(tuple(str(f.data.get(k)) for k in FILE_FIELDS) for f in view.children("file", ("space", space_id))))


def space_content(view: Snapshot, space_id: str, *, exact: bool = False) -> tuple[PageTree, tuple[tuple[Any, ...], ...]]:
    """A space's pages and files as compared: what the pages say, not how their markdown is
    written (an importer may write it in its own style), unless `exact`."""
    return page_tree(view, space_id, exact=exact), file_list(view, space_id)


def page_paths(tree: PageTree, prefix: str = "") -> dict[str, tuple[Any, ...]]:
    """title path -> page fields, for reporting which page differs."""
    out: dict[str, tuple[Any, ...]] = {}
    for page in tree:
        path = f"{prefix}/{page[0]}" if prefix else str(page[0])
        while path in out:
            path += "'"
        out[path] = page[:-1]
        out.update(page_paths(page[-1], path))
    return out


_EMOJI = PAGE_FIELDS.index("emoji")


def carried(source: PageTree, target: PageTree) -> PageTree:
    """The source's pages as an import can carry them to `target`: a page's emoji where the
    target's page (same place) has none is dropped (an importer that reads only the HTML has
    no emoji to read; docs/concepts/content.md)."""
    out = []
    for index, page in enumerate(source):
        other = target[index] if index < len(target) else None
        fields = list(page)
        if other is not None and other[_EMOJI] is None:
            fields[_EMOJI] = None
        fields[-1] = carried(page[-1], other[-1] if other is not None else ())
        out.append(tuple(fields))
    return tuple(out)


def content_difference(source: tuple[PageTree, Any], target: tuple[PageTree, Any]) -> dict[str, tuple[Any, Any]]:
    """Fields describing how two spaces' content differs (empty when equal; an emoji the
    target's import could not carry is no difference, see `carried`)."""
    out: dict[str, tuple[Any, Any]] = {}
    pages = source[0] if source[0] == target[0] else carried(source[0], target[0])  # equal: nothing to carry
    if pages != target[0]:
        src, tgt = page_paths(pages), page_paths(target[0])
        if list(src) != list(tgt):
            out["pages"] = (f"{len(src)} pages: {', '.join(list(src)[:5])}", f"{len(tgt)} pages: {', '.join(list(tgt)[:5])}")
        else:
            changed = [p for p in src if src[p] != tgt[p]]
            fields = [f for i, f in enumerate(PAGE_FIELDS) if any(src[p][i] != tgt[p][i] for p in changed)]
            out["pages"] = (f"{len(changed)} pages differ ({', '.join(fields)}): {', '.join(changed[:5])}", "")
    if source[1] != target[1]:
        out["files"] = ([f[0] for f in source[1]], [f[0] for f in target[1]])
    return out


__all__ = [
    "ACCESS_FIELDS",
    "ACCESS_KEY",
    "ACCESS_KINDS",
    "COPIED_KINDS",
    "COVERED",
    "DEFAULT_ADAPTIVE_SCHEMA",
    "NOT_COPIED",
    "ORGANIZATION_IDENTITY",
    "RULES",
    "SECTION_CREATE_TITLE_MAX",
    "SHAREABLE",
    "TEAM_MEMBERS_REASON",
    "Rule",
    "canonical",
    "carried",
    "comparable",
    "container_site_spaces",
    "content_difference",
    "custom_field_values",
    "group_sections",
    "identity",
    "plain",
    "ref_id",
    "site_of",
    "site_top_order",
    "space_content",
    "spec_source",
    "text",
    "title_of",
    "tree_parent",
    "unmapped",
]
