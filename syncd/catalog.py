"""THE resource graph of the Documentation Management API.

Every resource kind syncd reads or writes is one `Kind` entry below: where it is listed,
what its parent is, how its rows are identified, which of its fields are volatile, and the
calls that create, patch, move and delete it. Crawl, backup, diff, export, plan and apply all
read this table; nothing else hard-codes API paths.

Paths are templates over a *context* that grows while the crawler walks down the graph: the
organization's id is `{org}`; a kind with `binds="space"` puts each row's id (or the field
named by `bind_field`) into the context of its children as `{space}`.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

Shape = Literal["envelope", "items", "array", "object", "tree"]
"""How a read answers: a paged list envelope; `{items}` without paging (SSO); a bare JSON
array (space custom-field values); one object; a `{pages: [...]}` tree of pages."""

TokenScope = Literal["space", "change-request"]
"""The container whose change token governs a kind (see `Kind.scope`); not `syncd.scope.Scope`,
which is the include/exclude patterns of a run."""

ROOT = "organization"


@dataclass(frozen=True)
class Call:
    """One write call: METHOD and a path template over the same context as reads."""

    method: str
    path: str


@dataclass(frozen=True)
class Writes:
    """What the write side may do with a kind, and which fields a client can set."""

    create: Call | None = None
    patch: Call | None = None
    move: Call | None = None
    delete: Call | None = None
    create_fields: frozenset[str] = frozenset()
    patch_fields: frozenset[str] = frozenset()
    move_ref: tuple[str, str] | None = None
    """(type, key) of a `position.before/after` reference to a sibling of this kind."""
    address: str = "id"
    """The field of an object that fills `{id}` in its write paths (a custom field is
    addressed by its name, an OpenAPI spec by its slug)."""
    calls: tuple[tuple[str, Call], ...] = ()
    """Other calls on this kind, by name (a space's duplicate, transfer, content import and
    the single-object read the write side checks it with; a section group's membership)."""

    def call(self, name: str) -> Call | None:
        """The named call: create/patch/move/delete or one of `calls`."""
        if name in ("create", "patch", "move", "delete"):
            found: Call | None = getattr(self, name)
            return found
        return dict(self.calls).get(name)


@dataclass(frozen=True)
class Kind:
    """One resource kind of the graph (see the module docstring for path templates)."""

    name: str
    path: str
    parent: str | None
    shape: Shape = "envelope"
    params: tuple[Mapping[str, str], ...] = ({},)
    """Query variants: each is listed separately (e.g. change requests per status)."""
    id_field: str = "id"
    """Dotted field holding the row's id; rows without one get a content-derived id."""
    id_is_local: bool = False
    """The id is only unique under the parent (rows are stored as `parent/id`)."""
    binds: str | None = None
    bind_field: str | None = None
    parent_field: str | None = None
    """A field naming a parent of the same or another kind (e.g. a space's `parent`
    collection); the row hangs under it instead of under the listing's parent."""
    parent_field_kind: str | None = None
    ordered: bool = False
    """The list order means something (positions): it is recorded and compared."""
    scope: TokenScope | None = None
    """Content governed by the change token of the enclosing space or change request: it is
    skipped, and carried forward, while that token is unchanged."""
    change_token: tuple[str, ...] = ()
    """Fields of this kind's rows whose values, together, change whenever anything in its
    scope changes (a space's revision and counters; a change request's updatedAt)."""
    volatile: frozenset[str] = frozenset()
    """Fields left out of the content hash: derived, server-maintained or per-tenant."""
    title_field: str = "title"
    when: Callable[[Mapping[str, Any]], bool] | None = None
    """Crawl this kind under a parent row only when this predicate of the parent holds."""
    strip: frozenset[str] = frozenset()
    """Fields removed from stored rows because they are stored as rows of their own."""
    derived: bool = False
    """A view of other rows (per-member or per-collection lists, links, the published
    site): kept current in the mirror, but its changes are not reported, since they follow
    from the changes of the rows it derives from."""
    writes: Writes | None = None
    note: str = ""
    deleted_field: str | None = None
    """Dotted field that marks a listed item as deleted (a space in its restore window): such
    an item is not there (`present`)."""
    bulky: bool = False
    """Its items are whole space objects (a few KB each), a large organization's listings of
    them pages of 1,000: the crawler reads few of them at once (`BULKY_LISTINGS`)."""

    def list_paths(self, context: Mapping[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
        """(path, query) of each listing of this kind under `context`."""
        path = fill(self.path, context)
        for variant in self.params:
            yield path, {key: _PLACEHOLDER.sub(lambda m: str(context[m.group(1)]), value) for key, value in variant.items()}


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


_DOT_SEGMENTS = {".": "%2E", "..": "%2E%2E"}


_PLAIN = re.compile(r"[A-Za-z0-9_~-]+")
"""Characters `quote` leaves as they are, the dot aside: a value made only of them is its own segment."""


def segment(value: object) -> str:
    """One path segment naming `value`: percent-encoded (a `/` or `?` in it stays inside
    the segment), and `.` / `..` written `%2E` / `%2E%2E`, which no URL library or server
    resolves as a dot segment: `/openapi/..` would be a call on the organization itself."""
    text = str(value)
    if _PLAIN.fullmatch(text):  # most ids: no need to quote (a crawl fills a path per listing)
        return text
    quoted = quote(text, safe="")
    return _DOT_SEGMENTS.get(quoted, quoted)


def fill(template: str, context: Mapping[str, str]) -> str:
    """A path template with its placeholders replaced from the context, each value one
    path segment (`segment`: quoted, never a dot segment)."""
    parts = _template_parts(template)
    out = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            out.append(part)
        elif part in context:
            out.append(segment(context[part]))
        else:
            raise KeyError(f"path {template!r} needs {{{part}}}")
    return "".join(out)


@functools.cache
def _template_parts(template: str) -> list[str]:
    """A template split once: text, placeholder name, text, ... (a name at every odd index)."""
    return _PLACEHOLDER.split(template)


def placeholders(template: str) -> list[str]:
    return _PLACEHOLDER.findall(template)


def write_call(kind_name: str, call_name: str) -> Call:
    """The named write call of a kind (create, patch, move, delete, or one of `calls`);
    KeyError when the catalog has none: the write side never invents a path."""
    writes = BY_NAME[kind_name].writes
    found = writes.call(call_name) if writes is not None else None
    if found is None:
        raise KeyError(f"the catalog has no {call_name!r} call for {kind_name!r}")
    return found


def write_path(kind_name: str, call_name: str, segments: Mapping[str, str]) -> str:
    """The path of a write call with its placeholders replaced by `segments`: path segments
    that are already safe (quoted ids, or the write side's `{ref:...}` tokens). A bare `.` or
    `..` is still encoded: whatever the caller forgot, it never becomes a dot segment."""
    return _with_segments(write_call(kind_name, call_name).path, segments, f"{kind_name} {call_name}")


def list_path(kind_name: str, segments: Mapping[str, str]) -> str:
    """The path of a kind's listing with its placeholders replaced by `segments`, already safe
    as for `write_path`: the write side lists what it made through the catalog too."""
    return _with_segments(BY_NAME[kind_name].path, segments, f"{kind_name} listing")


def _with_segments(template: str, segments: Mapping[str, str], what: str) -> str:
    missing = [name for name in placeholders(template) if name not in segments]
    if missing:
        raise KeyError(f"{what}: the path {template!r} needs {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: _DOT_SEGMENTS.get(segments[m.group(1)], segments[m.group(1)]), template)


def listing_key(path: str, query: Mapping[str, str]) -> str:
    """The stable name of one listing, as recorded in the mirror."""
    if not query:
        return path
    return path + "?" + "&".join(f"{k}={v}" for k, v in sorted(query.items()))


def dotted(data: Mapping[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


DELETED_FIELD = "deletedAt"


def deleted(item: Any, field: str = DELETED_FIELD) -> bool:
    """Whether a listed item says it is deleted (a value in its `field`)."""
    return isinstance(item, Mapping) and bool(dotted(item, field))


def present(kind: Kind, items: list[Any]) -> list[Any]:
    """The items of one page of a `kind` listing that are there: an item marked deleted is
    dropped (anything that is not an object is kept, for the caller to find malformed).

    Why: the spec leaves open whether a deleted space is still listed (with `deletedAt`)
    during the 7 days it can be restored. syncd takes the listing as the truth either way, so
    a listed deleted space is read as absent, here, once: the crawl does not record it (nor
    a sync, a backup, a copy's plan or `mirror verify`, which all read what it recorded)."""
    if kind.deleted_field is None:
        return items
    return [item for item in items if not deleted(item, kind.deleted_field)]


def content_id(data: Any) -> str:
    """A stable id for rows the API gives none (links, backlinks): a hash of the row."""
    from syncd.json_codec import canonical_bytes

    return "h" + hashlib.sha256(canonical_bytes(data)).hexdigest()[:20]


COMMON_VOLATILE = frozenset({"urls", "permissions"})

# ----- the graph --------------------------------------------------------------------------

_SPACE_REF = ("space", "space")

KINDS: tuple[Kind, ...] = (
    Kind(
        name="organization",
        path="/v1/orgs/{org}",
        parent=None,
        shape="object",
        binds="org",
        volatile=COMMON_VOLATILE | {"billing", "trial", "internal_isOnNewTrial", "internal_billingMigration"},
        writes=Writes(
            patch=Call("PATCH", "/v1/orgs/{org}"),
            patch_fields=frozenset({"emailDomains", "hostname", "defaultRole", "defaultContent", "sso", "ai", "inviteLinks"}),
        ),
        note="Listed through GET /v1/orgs for a whole tenant.",
    ),
    # --- people -------------------------------------------------------------------------
    Kind(
        name="member",
        path="/v1/orgs/{org}/members",
        parent="organization",
        binds="member",
        id_is_local=True,
        volatile=COMMON_VOLATILE | {"lastSeenAt", "spaces", "teams"},
        title_field="user.email",
        writes=Writes(
            patch=Call("PATCH", "/v1/orgs/{org}/members/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/members/{id}"),
            patch_fields=frozenset({"role"}),
        ),
        note="Members cannot be created through the API; they are invited.",
    ),
    Kind(
        name="member-space",
        derived=True,
        path="/v1/orgs/{org}/members/{member}/spaces",
        parent="member",
        id_field="space.id",
        id_is_local=True,
        volatile=frozenset({"space"}),
        deleted_field="space.deletedAt",
        title_field="space.title",
        bulky=True,
    ),
    Kind(
        name="member-team",
        derived=True,
        path="/v1/orgs/{org}/members/{member}/teams",
        parent="member",
        id_field="team.id",
        id_is_local=True,
        volatile=frozenset({"team"}),
        title_field="team.title",
    ),
    Kind(
        name="team",
        path="/v1/orgs/{org}/teams",
        parent="organization",
        binds="team",
        volatile=COMMON_VOLATILE | {"members", "spaces"},
        writes=Writes(
            create=Call("PUT", "/v1/orgs/{org}/teams"),
            patch=Call("PATCH", "/v1/orgs/{org}/teams/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/teams/{id}"),
            create_fields=frozenset({"title", "members"}),
            patch_fields=frozenset({"title"}),
        ),
    ),
    # --- organization settings ----------------------------------------------------------
    Kind(
        name="saml-provider",
        path="/v1/orgs/{org}/saml",
        parent="organization",
        volatile=COMMON_VOLATILE | {"service", "status"},
        title_field="label",
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/saml"),
            patch=Call("PATCH", "/v1/orgs/{org}/saml/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/saml/{id}"),
            create_fields=frozenset({"label", "entityID", "certificate", "ssoURL", "defaultTeam", "defaultRole"}),
            patch_fields=frozenset({"label", "entityID", "certificate", "ssoURL", "defaultTeam", "defaultRole"}),
        ),
    ),
    Kind(
        name="sso-provider",
        derived=True,
        path="/v1/orgs/{org}/sso",
        parent="organization",
        shape="items",
        title_field="label",
        volatile=frozenset({"startURL"}),
        note="A summary of the SAML providers, answered without paging.",
    ),
    Kind(
        name="openapi-spec",
        path="/v1/orgs/{org}/openapi",
        parent="organization",
        binds="spec",
        bind_field="slug",
        volatile=COMMON_VOLATILE | {"processingState", "lastVersion", "lastProcessedAt", "lastProcessErrorCode"},
        title_field="slug",
        writes=Writes(
            create=Call("PUT", "/v1/orgs/{org}/openapi/{id}"),
            patch=Call("PUT", "/v1/orgs/{org}/openapi/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/openapi/{id}"),
            create_fields=frozenset({"source"}),
            patch_fields=frozenset({"source"}),
            address="slug",
        ),
    ),
    Kind(
        name="openapi-spec-source",
        path="/v1/orgs/{org}/openapi/{spec}/versions/latest/content/raw",
        parent="openapi-spec",
        shape="object",
        id_field="",
        id_is_local=True,
        when=lambda spec: not spec.get("sourceURL"),
        title_field="format",
        note="The text of a spec created from text (a spec from a URL is re-fetched by the service).",
    ),
    Kind(
        name="translation",
        path="/v1/orgs/{org}/translations",
        parent="organization",
        volatile=COMMON_VOLATILE,
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/translations"),
            patch=Call("PUT", "/v1/orgs/{org}/translations/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/translations/{id}"),
            create_fields=frozenset({"title", "languages"}),
            patch_fields=frozenset({"title"}),
        ),
    ),
    Kind(
        name="custom-field",
        path="/v1/orgs/{org}/custom-fields",
        parent="organization",
        volatile=COMMON_VOLATILE,
        title_field="name",
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/custom-fields"),
            patch=Call("PATCH", "/v1/orgs/{org}/custom-fields/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/custom-fields/{id}"),
            create_fields=frozenset({"name", "type", "title", "description", "placeholder", "options"}),
            patch_fields=frozenset({"title", "description", "placeholder", "options"}),
            address="name",
        ),
    ),
    Kind(
        name="integration",
        path="/v1/integrations",
        parent="organization",
        params=({"owner": "{org}"},),
        binds="integration",
        bind_field="name",
        id_field="name",
        title_field="name",
        volatile=COMMON_VOLATILE | {"version", "owner", "verified"},
        note="Integrations are global; syncd reads those the organization owns.",
    ),
    Kind(
        name="integration-installation",
        path="/v1/integrations/{integration}/installations",
        parent="integration",
        volatile=COMMON_VOLATILE | {"spaces"},
        title_field="id",
    ),
    # --- content tree -------------------------------------------------------------------
    Kind(
        name="collection",
        path="/v1/orgs/{org}/collections",
        parent="organization",
        binds="collection",
        parent_field="parent",
        parent_field_kind="collection",
        ordered=True,
        volatile=COMMON_VOLATILE,
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/collections"),
            patch=Call("PATCH", "/v1/collections/{id}"),
            move=Call("POST", "/v1/collections/{id}/move"),
            delete=Call("DELETE", "/v1/collections/{id}"),
            create_fields=frozenset({"title", "parent"}),
            patch_fields=frozenset({"title", "description", "defaultLevel"}),
            move_ref=_SPACE_REF,
        ),
    ),
    Kind(
        name="collection-space",
        derived=True,
        path="/v1/collections/{collection}/spaces",
        parent="collection",
        id_is_local=True,
        ordered=True,
        volatile=frozenset({"urls", "permissions", "revision", "updatedAt", "comments", "changeRequests", "changeRequestsOpen", "changeRequestsDraft", "mergeRules"}),
        note="The spaces of one collection in their order; the space itself is the `space` row.",
        deleted_field=DELETED_FIELD,
        bulky=True,
    ),
    Kind(
        name="space",
        path="/v1/orgs/{org}/spaces",
        bulky=True,
        deleted_field=DELETED_FIELD,
        parent="organization",
        binds="space",
        parent_field="parent",
        parent_field_kind="collection",
        ordered=True,
        change_token=("revision", "updatedAt", "comments", "changeRequests", "changeRequestsOpen", "changeRequestsDraft"),
        volatile=COMMON_VOLATILE
        | {"revision", "updatedAt", "comments", "changeRequests", "changeRequestsOpen", "changeRequestsDraft", "imports", "gitSync"},
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/spaces"),
            patch=Call("PATCH", "/v1/spaces/{id}"),
            move=Call("POST", "/v1/spaces/{id}/move"),
            delete=Call("DELETE", "/v1/spaces/{id}"),
            create_fields=frozenset({"title", "emoji", "parent", "editMode", "language"}),
            patch_fields=frozenset({"title", "emoji", "editMode", "defaultLevel"}),
            move_ref=_SPACE_REF,
            calls=(
                ("get", Call("GET", "/v1/spaces/{id}")),
                ("duplicate", Call("POST", "/v1/spaces/{id}/duplicate")),
                ("restore", Call("POST", "/v1/spaces/{id}/restore")),
                ("transfer", Call("POST", "/v1/spaces/{id}/transfer")),
                ("import", Call("POST", "/v1/spaces/{id}/content/import")),
            ),
        ),
    ),
    Kind(
        name="space-custom-field-value",
        path="/v1/spaces/{space}/custom-fields",
        parent="space",
        shape="array",
        id_field="customField.name",
        id_is_local=True,
        scope="space",
        volatile=frozenset({"customField"}),
        title_field="customField.name",
        writes=Writes(patch=Call("PATCH", "/v1/spaces/{space}/custom-fields"), patch_fields=frozenset({"value"})),
    ),
    Kind(
        name="revision",
        derived=True,
        path="/v1/spaces/{space}/content",
        parent="space",
        shape="object",
        id_field="",
        id_is_local=True,
        scope="space",
        strip=frozenset({"pages", "files"}),
        volatile=frozenset({"id", "parents", "createdAt", "urls", "git"}),
        title_field="id",
        note="The active revision; its pages and files are rows of their own.",
    ),
    Kind(
        name="page",
        path="/v1/spaces/{space}/content/pages",
        parent="space",
        shape="tree",
        binds="page",
        id_is_local=True,
        ordered=True,
        scope="space",
        strip=frozenset({"pages"}),
        volatile=frozenset({"urls", "path", "documentId", "updatedAt", "git"}),
        note="Pages nest; each page's markdown is read from the tree, or from GET .../content/page/{id} when the tree lacks it.",
    ),
    Kind(
        name="page-link",
        derived=True,
        path="/v1/spaces/{space}/content/page/{page}/links",
        parent="page",
        id_field="",
        id_is_local=True,
        scope="space",
        title_field="targetReference.kind",
        note="Read only for pages that the space's link listing names as a location.",
    ),
    Kind(
        name="file",
        path="/v1/spaces/{space}/content/files",
        parent="space",
        binds="file",
        id_is_local=True,
        scope="space",
        volatile=frozenset({"downloadURL", "git"}),
        title_field="name",
    ),
    Kind(
        name="file-backlink",
        derived=True,
        path="/v1/spaces/{space}/content/files/{file}/backlinks",
        parent="file",
        id_field="",
        id_is_local=True,
        scope="space",
        title_field="kind",
    ),
    Kind(
        name="space-link",
        derived=True,
        path="/v1/spaces/{space}/links",
        parent="space",
        id_field="",
        id_is_local=True,
        scope="space",
        title_field="targetReference.kind",
    ),
    Kind(
        name="comment",
        path="/v1/spaces/{space}/comments",
        parent="space",
        binds="comment",
        scope="space",
        volatile=COMMON_VOLATILE | {"replies", "postedBy", "resolvedBy", "target"},
        title_field="body.markdown",
        writes=Writes(
            create=Call("POST", "/v1/spaces/{space}/comments"),
            patch=Call("PUT", "/v1/spaces/{space}/comments/{id}"),
            delete=Call("DELETE", "/v1/spaces/{space}/comments/{id}"),
            create_fields=frozenset({"body", "page", "node"}),
            patch_fields=frozenset({"body", "resolved"}),
        ),
    ),
    Kind(
        name="comment-reply",
        path="/v1/spaces/{space}/comments/{comment}/replies",
        parent="comment",
        scope="space",
        when=lambda comment: bool(comment.get("replies", 1)),
        volatile=COMMON_VOLATILE | {"postedBy"},
        title_field="body.markdown",
    ),
    Kind(
        name="change-request",
        path="/v1/spaces/{space}/change-requests",
        parent="space",
        params=tuple({"status": s} for s in ("draft", "open", "archived", "merged")),
        binds="change_request",
        scope="space",
        change_token=("updatedAt", "revision", "comments", "status"),
        volatile=COMMON_VOLATILE | {"revision", "updatedAt", "comments", "outdated", "createdBy", "revisionMergedAncestor"},
        title_field="subject",
        writes=Writes(
            create=Call("POST", "/v1/spaces/{space}/change-requests"),
            patch=Call("PATCH", "/v1/spaces/{space}/change-requests/{id}"),
            create_fields=frozenset({"subject"}),
            patch_fields=frozenset({"subject", "status"}),
        ),
        note="Listed once per status: the list's status filter has no 'all'.",
    ),
    Kind(
        name="change-request-revision",
        derived=True,
        path="/v1/spaces/{space}/change-requests/{change_request}/content",
        parent="change-request",
        shape="object",
        id_field="",
        id_is_local=True,
        scope="change-request",
        strip=frozenset({"pages", "files"}),
        volatile=frozenset({"id", "parents", "createdAt", "urls", "git"}),
        title_field="id",
    ),
    Kind(
        name="change-request-page",
        path="/v1/spaces/{space}/change-requests/{change_request}/content/pages",
        parent="change-request",
        shape="tree",
        binds="page",
        id_is_local=True,
        ordered=True,
        scope="change-request",
        strip=frozenset({"pages"}),
        volatile=frozenset({"urls", "path", "documentId", "updatedAt", "git"}),
    ),
    Kind(
        name="change-request-page-link",
        derived=True,
        path="/v1/spaces/{space}/change-requests/{change_request}/content/page/{page}/links",
        parent="change-request-page",
        id_field="",
        id_is_local=True,
        scope="change-request",
        title_field="targetReference.kind",
        note="Read only for pages whose links the change request's own content names.",
    ),
    Kind(
        name="change-request-file",
        path="/v1/spaces/{space}/change-requests/{change_request}/content/files",
        parent="change-request",
        binds="file",
        id_is_local=True,
        scope="change-request",
        volatile=frozenset({"downloadURL", "git"}),
        title_field="name",
    ),
    Kind(
        name="change-request-file-backlink",
        derived=True,
        path="/v1/spaces/{space}/change-requests/{change_request}/content/files/{file}/backlinks",
        parent="change-request-file",
        id_field="",
        id_is_local=True,
        scope="change-request",
        title_field="kind",
    ),
    Kind(
        name="change-request-comment",
        path="/v1/spaces/{space}/change-requests/{change_request}/comments",
        parent="change-request",
        binds="comment",
        scope="change-request",
        volatile=COMMON_VOLATILE | {"replies", "postedBy", "resolvedBy", "target"},
        title_field="body.markdown",
    ),
    Kind(
        name="change-request-comment-reply",
        path="/v1/spaces/{space}/change-requests/{change_request}/comments/{comment}/replies",
        parent="change-request-comment",
        scope="change-request",
        when=lambda comment: bool(comment.get("replies", 1)),
        volatile=COMMON_VOLATILE | {"postedBy"},
        title_field="body.markdown",
    ),
    # --- docs sites ---------------------------------------------------------------------
    Kind(
        name="site",
        path="/v1/orgs/{org}/sites",
        parent="organization",
        binds="site",
        volatile=COMMON_VOLATILE | {"siteSpaces", "features", "ads"},
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/sites"),
            patch=Call("PATCH", "/v1/orgs/{org}/sites/{id}"),
            delete=Call("DELETE", "/v1/orgs/{org}/sites/{id}"),
            create_fields=frozenset({"type", "title", "visibility"}),
            patch_fields=frozenset(
                {"title", "visibility", "basename", "adaptiveContent", "proxy", "defaultSiteSpace", "defaultSiteSection"}
            ),
        ),
    ),
    Kind(
        name="site-section-group",
        path="/v1/orgs/{org}/sites/{site}/section-groups",
        parent="site",
        ordered=True,
        volatile=COMMON_VOLATILE | {"sections"},
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/sites/{site}/section-groups"),
            patch=Call("PATCH", "/v1/orgs/{org}/sites/{site}/section-groups/{id}"),
            move=Call("POST", "/v1/orgs/{org}/sites/{site}/section-groups/{id}/move"),
            delete=Call("DELETE", "/v1/orgs/{org}/sites/{site}/section-groups/{id}"),
            create_fields=frozenset({"title", "icon", "sections"}),
            patch_fields=frozenset({"title", "icon"}),
            move_ref=("site-section", "id"),
            calls=(
                ("add-section", Call("POST", "/v1/orgs/{org}/sites/{site}/section-groups/{id}/sections")),
                ("remove-section", Call("DELETE", "/v1/orgs/{org}/sites/{site}/section-groups/{id}/sections/{section}")),
            ),
        ),
    ),
    Kind(
        name="site-section",
        path="/v1/orgs/{org}/sites/{site}/sections",
        parent="site",
        ordered=True,
        volatile=COMMON_VOLATILE | {"siteSpaces"},
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/sites/{site}/sections"),
            patch=Call("PATCH", "/v1/orgs/{org}/sites/{site}/sections/{id}"),
            move=Call("POST", "/v1/orgs/{org}/sites/{site}/sections/{id}/move"),
            delete=Call("DELETE", "/v1/orgs/{org}/sites/{site}/sections/{id}"),
            create_fields=frozenset({"spaceId", "title"}),
            patch_fields=frozenset({"title", "path", "defaultSiteSpace", "condition", "icon", "description"}),
            move_ref=("site-section", "siteSection"),
        ),
    ),
    Kind(
        name="site-space",
        path="/v1/orgs/{org}/sites/{site}/site-spaces",
        parent="site",
        ordered=True,
        volatile=COMMON_VOLATILE | {"space", "hasAdvancedCustomizationFeature"},
        writes=Writes(
            create=Call("POST", "/v1/orgs/{org}/sites/{site}/site-spaces"),
            patch=Call("PATCH", "/v1/orgs/{org}/sites/{site}/site-spaces/{id}"),
            move=Call("POST", "/v1/orgs/{org}/sites/{site}/site-spaces/{id}/move"),
            delete=Call("DELETE", "/v1/orgs/{org}/sites/{site}/site-spaces/{id}"),
            create_fields=frozenset({"spaceId", "sectionId"}),
            patch_fields=frozenset({"path", "condition"}),
            move_ref=("site-space", "siteSpace"),
        ),
        note="The embedded space is volatile here: it is a `space` row of its own; `space.id` is kept as the reference.",
    ),
    Kind(
        name="site-adaptive-schema",
        path="/v1/orgs/{org}/sites/{site}/adaptive-schema",
        parent="site",
        shape="object",
        id_field="",
        id_is_local=True,
        title_field="object",
        volatile=frozenset({"updatedAt"}),
        writes=Writes(patch=Call("PUT", "/v1/orgs/{org}/sites/{site}/adaptive-schema"), patch_fields=frozenset({"jsonSchema"})),
    ),
    Kind(
        name="site-published",
        derived=True,
        path="/v1/orgs/{org}/sites/{site}/published",
        parent="site",
        shape="object",
        id_field="",
        id_is_local=True,
        title_field="object",
        volatile=frozenset({"site"}),
        note="What visitors see: the site's structure and customizations.",
    ),
)

BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}
DERIVED: frozenset[str] = frozenset(kind.name for kind in KINDS if kind.derived)

NOT_CRAWLED: dict[str, str] = {
    "GET /v1/orgs": "the tenant's organizations: the crawl's entry point, not a kind",
    "GET /v1/email-domains/{emailDomain}/orgs": "a lookup by email domain; the same organizations as GET /v1/orgs",
    "GET /v1/orgs/{organizationId}/search": "full-text search needs a query; it returns nothing the content rows lack",
    "GET /v1/spaces/{spaceId}/search": "full-text search needs a query; it returns nothing the content rows lack",
    "GET /v1/spaces/{spaceId}/change-requests/{changeRequestId}/pdf": "an export action that returns a temporary URL",
    "GET /v1/orgs/{organizationId}/link-invites/{inviteId}": "invites cannot be listed, only read by a known id",
    "GET /v1/user": "the token's own user: `config check --online` asks it; it belongs to no organization",
}
"""GET operations the crawler deliberately does not call, with the reason. Single-object
GETs whose list is crawled are derived in `crawled_routes` and need no entry."""

SINGLE_OBJECT_OF: dict[str, str] = {
    "GET /v1/collections/{collectionId}": "collection",
    "GET /v1/spaces/{spaceId}": "space",
    "GET /v1/orgs/{organizationId}/custom-fields/{fieldName}": "custom-field",
    "GET /v1/orgs/{organizationId}/members/{userId}": "member",
    "GET /v1/orgs/{organizationId}/openapi/{specSlug}": "openapi-spec",
    "GET /v1/orgs/{organizationId}/saml/{samlProviderId}": "saml-provider",
    "GET /v1/orgs/{organizationId}/sites/{siteId}": "site",
    "GET /v1/orgs/{organizationId}/teams/{teamId}": "team",
    "GET /v1/orgs/{organizationId}/translations/{translationSettingsId}": "translation",
    "GET /v1/integrations/{integrationName}": "integration",
    "GET /v1/spaces/{spaceId}/change-requests/{changeRequestId}": "change-request",
    "GET /v1/spaces/{spaceId}/comments/{commentId}": "comment",
    "GET /v1/spaces/{spaceId}/comments/{commentId}/replies/{commentReplyId}": "comment-reply",
    "GET /v1/spaces/{spaceId}/change-requests/{changeRequestId}/comments/{commentId}": "change-request-comment",
    "GET /v1/spaces/{spaceId}/change-requests/{changeRequestId}/comments/{commentId}/replies/{commentReplyId}": "change-request-comment-reply",
    "GET /v1/spaces/{spaceId}/content/files/{fileId}": "file",
    "GET /v1/spaces/{spaceId}/change-requests/{changeRequestId}/content/files/{fileId}": "change-request-file",
    "GET /v1/spaces/{spaceId}/content/page/{pageId}": "page",
    "GET /v1/spaces/{spaceId}/change-requests/{changeRequestId}/content/page/{pageId}": "change-request-page",
}
"""Single-object GETs: the rows come from the kind's list; the crawler calls some of these
only as a fallback (a page whose markdown the tree leaves out)."""

PAGE_BODY_PATH = {
    "page": "/v1/spaces/{space}/content/page/{page}",
    "change-request-page": "/v1/spaces/{space}/change-requests/{change_request}/content/page/{page}",
}


def children(kind_name: str | None) -> tuple[Kind, ...]:
    """The kinds listed under `kind_name` (None: the top), in catalog order."""
    return _CHILDREN.get(kind_name, ())


_CHILDREN: dict[str | None, tuple[Kind, ...]] = {
    parent: tuple(kind for kind in KINDS if kind.parent == parent) for parent in {kind.parent for kind in KINDS}
}
"""Why a table: the crawler asks for the children of every row it reads (a scan of the catalog
each time was a percent of a crawl's CPU)."""


def route_shape(path: str) -> str:
    """A path with every placeholder made anonymous, to compare templates across naming."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def crawled_routes() -> set[str]:
    """`GET <shape>` of every operation the crawler reads, for the coverage test."""
    routes = {f"GET {route_shape(kind.path)}" for kind in KINDS}
    routes.add(f"GET {route_shape('/v1/orgs')}")
    return routes


def content_hash(kind: Kind, data: Mapping[str, Any]) -> str:
    """A hash of what a row means: volatile fields, stripped children and the parent
    reference (captured as the row's parent) are left out. In hex, for what leaves the mirror
    (an export's records, a plan's fingerprints); the mirror stores `stored_hash`."""
    from syncd.state.rows import content_hash as hash_without

    return hash_without(data, HASH_IGNORES[kind.name])


def stored_hash(kind: Kind, data: Mapping[str, Any]) -> str:
    """`content_hash` as the mirror stores it (`Row.hash`: 22 characters, `syncd.state.rows`)."""
    from syncd.state.rows import stored_hash as stored_without

    return stored_without(data, HASH_IGNORES[kind.name])


HASH_IGNORES: dict[str, frozenset[str]] = {
    kind.name: frozenset(kind.volatile | kind.strip | ({kind.parent_field} if kind.parent_field else set())) for kind in KINDS
}
"""What `content_hash` leaves out of each kind (made once: it is asked for every object), and
what an update's recorded details leave out (`syncd.state.merge`)."""


def title_of(kind: Kind, data: Mapping[str, Any]) -> str:
    value = dotted(data, kind.title_field) if kind.title_field else None
    return str(value)[:80] if value is not None else ""


def validate_catalog() -> list[str]:
    """Problems in the table itself (a test keeps this empty)."""
    problems = []
    names = set(BY_NAME)
    bound = {kind.binds: kind.name for kind in KINDS if kind.binds}
    for kind in KINDS:
        if kind.parent is not None and kind.parent not in names:
            problems.append(f"{kind.name}: unknown parent {kind.parent}")
        for name in placeholders(kind.path):
            if name != "org" and name not in bound:
                problems.append(f"{kind.name}: {{{name}}} is bound by no kind")
        if kind.parent_field_kind and kind.parent_field_kind not in names:
            problems.append(f"{kind.name}: unknown parent_field_kind {kind.parent_field_kind}")
    return problems


__all__ = [
    "BY_NAME",
    "DERIVED",
    "KINDS",
    "NOT_CRAWLED",
    "PAGE_BODY_PATH",
    "ROOT",
    "SINGLE_OBJECT_OF",
    "Call",
    "Kind",
    "Writes",
    "children",
    "content_hash",
    "content_id",
    "crawled_routes",
    "dotted",
    "fill",
    "listing_key",
    "route_shape",
    "stored_hash",
    "title_of",
    "validate_catalog",
    "write_call",
    "write_path",
]
