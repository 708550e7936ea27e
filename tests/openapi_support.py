"""Checking the emulator's answers against the public OpenAPI document of the real service.

`OpenApi` indexes the document's operations by method and path shape (path parameter names
differ between the emulator, the markdown spec and the OpenAPI document, so `{anything}`
matches `{anything_else}`) and validates JSON bodies with jsonschema against the documented
request and response schemas. The whole document is one registry resource, so every
`#/components/...` reference resolves as it does for the service's own clients.

Also here: the operations of part 4 of the markdown spec (the emulator must serve all of
them) and the ones among them that the OpenAPI document does not have.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).resolve().parents[1].parent / "shared" / "spec" / "gitbook-openapi-0.202.0.json"
CI_TRUE = frozenset({"1", "true", "yes", "on"})
"""Values of `CI` that mean "running in CI" (GitHub Actions and GitLab set `true`)."""


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get("CI", "").strip().lower() in CI_TRUE


def require_spec(path: Path = SPEC_PATH, environ: Mapping[str, str] = os.environ) -> Path:
    """`path` when the document is there. Missing: a failure in CI, where ../shared/spec is
    always provided and a silent skip would hide that the conformance tests never ran; a
    skip elsewhere (a checkout without ../shared beside it)."""
    if path.is_file():
        return path
    message = f"OpenAPI document not found at {path} (CI provides ../shared/spec beside the repository)"
    if in_ci(environ):
        pytest.fail(f"{message}; CI={environ['CI']!r}: in CI the conformance tests must run, not skip", pytrace=False)
    pytest.skip(message)


SPEC_URI = "urn:gitbook-openapi"
API_PREFIX = "/v1"
HTTP_METHODS = ("get", "put", "post", "delete", "patch")
MESSAGE_MAX = 240

# Error answers the operation does not document itself fall back to the document's shared
# error responses (the service answers every operation with these shapes).
SHARED_ERRORS = {
    400: "BadRequestError",
    401: "UnauthorizedError",
    403: "ForbiddenError",
    404: "NotFoundError",
    409: "ConflictError",
    412: "PreconditionFailedError",
}
UNEXPECTED_ERROR = "UnexpectedError"

Op = tuple[str, str]
"""(METHOD, path) of an operation, e.g. ("GET", "/v1/spaces/{spaceId}")."""


# ----- part 4 of the markdown spec ------------------------------------------------------------


def _comment_ops(base: str) -> list[Op]:
    """The comment operations, identical under a space and under a change request."""
    one, replies = f"{base}/{{commentId}}", f"{base}/{{commentId}}/replies"
    reply = f"{replies}/{{commentReplyId}}"
    return [
        ("GET", base),
        ("POST", base),
        ("GET", one),
        ("PUT", one),
        ("DELETE", one),
        ("GET", replies),
        ("POST", replies),
        ("GET", reply),
        ("PUT", reply),
        ("DELETE", reply),
    ]


def _content_ops(base: str) -> list[Op]:
    """Content reads, identical for a space's content and a change request's content."""
    return [
        ("GET", base),
        ("POST", f"{base}/import"),
        ("GET", f"{base}/pages"),
        ("GET", f"{base}/files"),
        ("GET", f"{base}/files/{{fileId}}"),
        ("GET", f"{base}/files/{{fileId}}/backlinks"),
        ("GET", f"{base}/page/{{pageId}}"),
        ("GET", f"{base}/page/{{pageId}}/links"),
    ]


_ORG = "/v1/orgs/{organizationId}"
_SITE = f"{_ORG}/sites/{{siteId}}"
_CR = "/v1/spaces/{spaceId}/change-requests/{changeRequestId}"

PART4_OPERATIONS: list[Op] = [
    # Collections
    ("GET", "/v1/collections/{collectionId}"),
    ("DELETE", "/v1/collections/{collectionId}"),
    ("PATCH", "/v1/collections/{collectionId}"),
    ("GET", "/v1/collections/{collectionId}/spaces"),
    ("POST", "/v1/collections/{collectionId}/move"),
    ("POST", "/v1/collections/{collectionId}/transfer"),
    ("GET", f"{_ORG}/collections"),
    ("POST", f"{_ORG}/collections"),
    # Spaces
    ("GET", "/v1/spaces/{spaceId}"),
    ("DELETE", "/v1/spaces/{spaceId}"),
    ("PATCH", "/v1/spaces/{spaceId}"),
    ("POST", "/v1/spaces/{spaceId}/duplicate"),
    ("POST", "/v1/spaces/{spaceId}/restore"),
    ("POST", "/v1/spaces/{spaceId}/move"),
    ("POST", "/v1/spaces/{spaceId}/transfer"),
    ("GET", "/v1/spaces/{spaceId}/links"),
    ("GET", "/v1/spaces/{spaceId}/custom-fields"),
    ("PATCH", "/v1/spaces/{spaceId}/custom-fields"),
    # Space content and search
    ("GET", "/v1/spaces/{spaceId}/search"),
    *_content_ops("/v1/spaces/{spaceId}/content"),
    # Change requests, and their content (same shapes as the space content)
    ("GET", "/v1/spaces/{spaceId}/change-requests"),
    ("POST", "/v1/spaces/{spaceId}/change-requests"),
    ("GET", _CR),
    ("PATCH", _CR),
    ("POST", f"{_CR}/merge"),
    ("POST", f"{_CR}/update"),
    ("GET", f"{_CR}/pdf"),
    *_content_ops(f"{_CR}/content"),
    # Comments on spaces and on change requests ("two path families have identical shapes";
    # the reply DELETE row names its 204 for the space family, the shapes cover both)
    *_comment_ops("/v1/spaces/{spaceId}/comments"),
    *_comment_ops(f"{_CR}/comments"),
    # Docs sites
    ("GET", f"{_ORG}/sites"),
    ("POST", f"{_ORG}/sites"),
    ("GET", _SITE),
    ("DELETE", _SITE),
    ("PATCH", _SITE),
    ("GET", f"{_SITE}/adaptive-schema"),
    ("PUT", f"{_SITE}/adaptive-schema"),
    ("GET", f"{_SITE}/published"),
    # Site sections
    ("GET", f"{_SITE}/sections"),
    ("POST", f"{_SITE}/sections"),
    ("DELETE", f"{_SITE}/sections/{{siteSectionId}}"),
    ("PATCH", f"{_SITE}/sections/{{siteSectionId}}"),
    ("POST", f"{_SITE}/sections/{{siteSectionId}}/move"),
    # Site section groups
    ("GET", f"{_SITE}/section-groups"),
    ("POST", f"{_SITE}/section-groups"),
    ("DELETE", f"{_SITE}/section-groups/{{siteSectionGroupId}}"),
    ("PATCH", f"{_SITE}/section-groups/{{siteSectionGroupId}}"),
    ("POST", f"{_SITE}/section-groups/{{siteSectionGroupId}}/sections"),
    ("DELETE", f"{_SITE}/section-groups/{{siteSectionGroupId}}/sections/{{siteSectionId}}"),
    ("POST", f"{_SITE}/section-groups/{{siteSectionGroupId}}/move"),
    # Site spaces
    ("GET", f"{_SITE}/site-spaces"),
    ("POST", f"{_SITE}/site-spaces"),
    ("DELETE", f"{_SITE}/site-spaces/{{siteSpaceId}}"),
    ("PATCH", f"{_SITE}/site-spaces/{{siteSpaceId}}"),
    ("POST", f"{_SITE}/site-spaces/{{siteSpaceId}}/move"),
    # Organizations, invites, search
    ("GET", "/v1/orgs"),
    ("GET", _ORG),
    ("PATCH", _ORG),
    ("GET", f"{_ORG}/link-invites/{{inviteId}}"),
    ("DELETE", f"{_ORG}/link-invites/{{inviteId}}"),
    ("PATCH", f"{_ORG}/link-invites/{{inviteId}}"),
    ("GET", f"{_ORG}/search"),
    ("GET", "/v1/email-domains/{emailDomain}/orgs"),
    # Members and teams
    ("GET", f"{_ORG}/members"),
    ("GET", f"{_ORG}/members/{{userId}}"),
    ("DELETE", f"{_ORG}/members/{{userId}}"),
    ("PATCH", f"{_ORG}/members/{{userId}}"),
    ("POST", f"{_ORG}/ping"),
    ("POST", f"{_ORG}/members/{{userId}}/sso"),
    ("GET", f"{_ORG}/members/{{userId}}/spaces"),
    ("GET", f"{_ORG}/members/{{userId}}/teams"),
    ("GET", f"{_ORG}/teams"),
    ("PUT", f"{_ORG}/teams"),
    ("GET", f"{_ORG}/teams/{{teamId}}"),
    ("DELETE", f"{_ORG}/teams/{{teamId}}"),
    ("PATCH", f"{_ORG}/teams/{{teamId}}"),
    # Single sign-on
    ("GET", f"{_ORG}/saml"),
    ("POST", f"{_ORG}/saml"),
    ("GET", f"{_ORG}/saml/{{samlProviderId}}"),
    ("DELETE", f"{_ORG}/saml/{{samlProviderId}}"),
    ("PATCH", f"{_ORG}/saml/{{samlProviderId}}"),
    ("GET", f"{_ORG}/sso"),
    # OpenAPI specs
    ("GET", f"{_ORG}/openapi"),
    ("POST", f"{_ORG}/openapi"),
    ("GET", f"{_ORG}/openapi/{{specSlug}}"),
    ("PUT", f"{_ORG}/openapi/{{specSlug}}"),
    ("DELETE", f"{_ORG}/openapi/{{specSlug}}"),
    # Translation settings
    ("GET", f"{_ORG}/translations"),
    ("POST", f"{_ORG}/translations"),
    ("GET", f"{_ORG}/translations/{{translationSettingsId}}"),
    ("PUT", f"{_ORG}/translations/{{translationSettingsId}}"),
    ("DELETE", f"{_ORG}/translations/{{translationSettingsId}}"),
    # Custom fields
    ("GET", f"{_ORG}/custom-fields"),
    ("POST", f"{_ORG}/custom-fields"),
    ("GET", f"{_ORG}/custom-fields/{{fieldName}}"),
    ("DELETE", f"{_ORG}/custom-fields/{{fieldName}}"),
    ("PATCH", f"{_ORG}/custom-fields/{{fieldName}}"),
    # Integrations
    ("GET", "/v1/integrations"),
    ("GET", "/v1/integrations/{integrationName}"),
    ("POST", "/v1/integrations/{integrationName}"),
    ("DELETE", "/v1/integrations/{integrationName}"),
    ("GET", "/v1/integrations/{integrationName}/installations"),
]

# Operations the markdown spec documents (part 4) that the OpenAPI document 0.202.0 does not
# have, so no schema can check them; the contract tests of their families cover them.
NOT_IN_OPENAPI: list[Op] = [
    # Spaces: moving to another organization, link reports, custom field values.
    ("POST", "/v1/spaces/{spaceId}/transfer"),
    ("GET", "/v1/spaces/{spaceId}/links"),
    ("GET", "/v1/spaces/{spaceId}/custom-fields"),
    ("PATCH", "/v1/spaces/{spaceId}/custom-fields"),
    # Space content: import, backlinks of a file and links of a page (the OpenAPI document
    # has `meta-links` instead, a different answer).
    ("POST", "/v1/spaces/{spaceId}/content/import"),
    ("GET", "/v1/spaces/{spaceId}/content/files/{fileId}/backlinks"),
    ("GET", "/v1/spaces/{spaceId}/content/page/{pageId}/links"),
    # Change request content: the same three (the OpenAPI document's POST .../content is a
    # different operation with another body).
    ("POST", f"{_CR}/content/import"),
    ("GET", f"{_CR}/content/files/{{fileId}}/backlinks"),
    ("GET", f"{_CR}/content/page/{{pageId}}/links"),
    # Sites: adding a section to a group and taking it out.
    ("POST", f"{_SITE}/section-groups/{{siteSectionGroupId}}/sections"),
    ("DELETE", f"{_SITE}/section-groups/{{siteSectionGroupId}}/sections/{{siteSectionId}}"),
    # Custom fields of the organization.
    ("GET", f"{_ORG}/custom-fields"),
    ("POST", f"{_ORG}/custom-fields"),
    ("GET", f"{_ORG}/custom-fields/{{fieldName}}"),
    ("DELETE", f"{_ORG}/custom-fields/{{fieldName}}"),
    ("PATCH", f"{_ORG}/custom-fields/{{fieldName}}"),
]


# Schema keywords the emulator does not satisfy on purpose, because the markdown spec (the
# authority where the two disagree) says otherwise: schema location (plus `:property` for a
# single missing required property) -> why.
_TRANSLATION = "#/components/schemas/Translation"
MARKDOWN_WINS: dict[str, str] = {
    # Part 2 describes translation *settings* (`object` = `translation-settings`: title,
    # languages, permissions, urls), created from a title alone (part 4). The document's
    # Translation is another model under the same paths, a sync job of one source space into
    # one language: its object name and its job fields have nothing to be taken from. The
    # fields both describe (id, createdAt, updatedAt, permissions, urls) stay checked.
    f"{_TRANSLATION}/properties/object/enum": "part 2: object = translation-settings",
    **{
        f"{_TRANSLATION}/required:{name}": "part 2: translation settings have no such field"
        for name in ("status", "source", "language", "instructions", "stats")
    },
}


# ----- paths ----------------------------------------------------------------------------------

_PARAM = re.compile(r"\{[^}/]+\}")


def shape(path: str) -> str:
    """The path without `/v1` and with every `{param}` as `{}`: equal shapes, same operation."""
    if path.startswith(API_PREFIX + "/"):
        path = path[len(API_PREFIX) :]
    return _PARAM.sub("{}", path)


def _pointer(*segments: str) -> str:
    return "/" + "/".join(s.replace("~", "~0").replace("/", "~1") for s in segments)


# ----- formats --------------------------------------------------------------------------------


def _format_checker() -> FormatChecker:
    """jsonschema's checkers plus `date-time` and `uri`, whose stock checkers need packages
    this project does not install; the service's timestamps and URLs must be real ones."""
    checker = FormatChecker()

    @checker.checks("date-time", raises=ValueError)
    def _date_time(value: object) -> bool:
        if not isinstance(value, str):
            return True
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", value):
            return False
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True

    @checker.checks("uri")
    def _uri(value: object) -> bool:
        if not isinstance(value, str):
            return True
        parts = urlsplit(value)
        return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme)) and " " not in value

    return checker


FORMATS = _format_checker()


# ----- the document ---------------------------------------------------------------------------


def _nullable_to_type(node: Any) -> Any:
    """OpenAPI 3.0's `nullable: true` as JSON Schema: null is one more allowed value."""
    if isinstance(node, list):
        return [_nullable_to_type(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _nullable_to_type(value) for key, value in node.items()}
    if out.pop("nullable", False) is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    """The OpenAPI path template (without /v1)."""
    spec: dict[str, Any]

    @property
    def pointer(self) -> str:
        return _pointer("paths", self.path, self.method.lower())

    @property
    def statuses(self) -> list[str]:
        return list(self.spec.get("responses", {}))


@dataclass(frozen=True)
class Mismatch:
    """One way an answer differs from the document."""

    operation: str
    status: int | None
    where: str
    """JSON path in the body (`$` = the body itself, `[*]` = every item), or status/body."""
    message: str
    schema: str = ""
    """Where the failing keyword is in the document, e.g. `Space/properties/permissions/required`."""

    def __str__(self) -> str:
        status = f" -> {self.status}" if self.status is not None else ""
        schema = f"  [schema {self.schema}]" if self.schema else ""
        return f"{self.operation}{status}: {self.where}: {self.message}{schema}"


def _truncate(text: str, limit: int = MESSAGE_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class OpenApi:
    """The document's operations, and validators of the schemas they document."""

    def __init__(self, document: dict[str, Any]) -> None:
        version = str(document.get("openapi", ""))
        if not version.startswith(("3.0", "3.1")):
            raise ValueError(f"unsupported OpenAPI version {version!r}")
        if version.startswith("3.0"):
            document = _nullable_to_type(document)
        self.document = document
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self.registry: Registry = Registry().with_resource(SPEC_URI, resource)
        self.operations: dict[tuple[str, str], Operation] = {}
        for path, item in document.get("paths", {}).items():
            for method in HTTP_METHODS:
                if method in item:
                    op = Operation(method.upper(), path, item[method])
                    self.operations[(op.method, shape(path))] = op
        self._validators: dict[str, Draft202012Validator] = {}

    @classmethod
    def load(cls, path: Path = SPEC_PATH) -> "OpenApi":
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def find(self, method: str, path: str) -> Operation | None:
        """The documented operation with this method and path shape (any parameter names)."""
        return self.operations.get((method.upper(), shape(path)))

    # ----- the document's objects -----------------------------------------------------------

    def node(self, pointer: str) -> Any:
        node: Any = self.document
        for segment in pointer[1:].split("/") if pointer else []:
            segment = segment.replace("~1", "/").replace("~0", "~")
            node = node[int(segment)] if isinstance(node, list) else node[segment]
        return node

    def _deref(self, node: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
        """Follow `$ref`s between OpenAPI objects (responses, request bodies)."""
        while "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"{pointer}: only local references are supported, got {ref!r}")
            pointer = ref[1:]
            node = self.node(pointer)
        return node, pointer

    def _validator(self, schema_pointer: str) -> Draft202012Validator:
        found = self._validators.get(schema_pointer)
        if found is None:
            schema = {"$ref": f"{SPEC_URI}#{quote(schema_pointer, safe='/~')}"}
            found = Draft202012Validator(schema, registry=self.registry, format_checker=FORMATS)
            self._validators[schema_pointer] = found
        return found

    def response(self, op: Operation, status: int) -> tuple[dict[str, Any], str] | None:
        """The response object documented for `status` (with its pointer), or None.

        A success must be documented by the operation itself (exact code or `2XX`). An error
        may also fall back to the operation's `default` and then to the document's shared
        `components/responses/*Error`, which the service uses for every operation."""
        responses = op.spec.get("responses", {})
        keys = [str(status), f"{str(status)[0]}XX"]
        if status >= 400:
            keys.append("default")
        for key in keys:
            if key in responses:
                return self._deref(responses[key], op.pointer + _pointer("responses", key))
        if status >= 400:
            name = SHARED_ERRORS.get(status, UNEXPECTED_ERROR)
            return self._deref({"$ref": f"#/components/responses/{name}"}, "")
        return None

    # ----- checks ---------------------------------------------------------------------------

    def check_response(self, label: str, op: Operation, status: int, body: Any, content_type: str = "application/json") -> list[Mismatch]:
        """Mismatches of an answer (status, media type, parsed body) against the document."""
        found = self.response(op, status)
        if found is None:
            documented = ", ".join(op.statuses) or "none"
            return [Mismatch(label, status, "status", f"status {status} is not documented (documented: {documented})")]
        response, pointer = found
        content = response.get("content") or {}
        if not content:
            if body is not None:
                return [Mismatch(label, status, "body", f"documented without a body, got {_truncate(repr(body), 80)}")]
            return []
        media = content_type.split(";")[0].strip().lower()
        if media not in content:
            return [Mismatch(label, status, "body", f"answered {media or 'no content type'}, documented: {', '.join(content)}")]
        if body is None:
            return [Mismatch(label, status, "body", f"empty body, but {media} is documented")]
        if content[media].get("schema") is None or media != "application/json":
            return []  # text and binary answers: the media type is what can be checked
        return self._check(label, status, pointer + _pointer("content", media, "schema"), body)

    def check_request(self, label: str, op: Operation, body: Any) -> list[Mismatch]:
        """Mismatches of a request body the test sends: a scenario must send valid calls."""
        spec = op.spec.get("requestBody")
        if spec is None or body is None:
            return []
        request, pointer = self._deref(spec, op.pointer + _pointer("requestBody"))
        if (request.get("content") or {}).get("application/json", {}).get("schema") is None:
            return []
        return self._check(f"{label} (request body)", None, pointer + _pointer("content", "application/json", "schema"), body)

    def _check(self, label: str, status: int | None, root: str, body: Any) -> list[Mismatch]:
        """Every failing keyword, once per JSON path pattern; the missing properties of one
        object are reported together."""
        grouped: dict[tuple[str, str, str], list[str]] = {}
        for error in self._validator(root).iter_errors(body):
            for leaf in self._explain(error):
                schema = self.schema_location(root, leaf)
                if schema in MARKDOWN_WINS or f"{schema}:{_missing(leaf)}" in MARKDOWN_WINS:
                    continue
                where = re.sub(r"\[\d+\]", "[*]", leaf.json_path)
                key = (where, schema, str(leaf.validator))
                grouped.setdefault(key, [])
                message = self._message(root, leaf)
                if message not in grouped[key]:
                    grouped[key].append(message)
        out = []
        for (where, schema, validator), messages in grouped.items():
            if validator == "required":
                text = "missing required " + ", ".join(messages)
            else:
                text = "; ".join(messages)
            out.append(Mismatch(label, status, where, _truncate(text), _short(schema)))
        return out

    def _explain(self, error: ValidationError) -> list[ValidationError]:
        """The errors that say what is wrong. For a oneOf/anyOf nothing matched, that is the
        errors of the branch the instance was meant for: branches whose discriminating
        property (a const/enum one level down) or JSON type differs are not it."""
        if error.validator not in ("oneOf", "anyOf") or not error.context:
            return [error]
        branches: dict[int, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        meant = [i for i, errs in branches.items() if not any(_disqualifies(e, error) for e in errs)]
        if not meant:
            return [error]
        best = min(meant, key=lambda i: len(branches[i]))
        return [leaf for sub in branches[best] for leaf in self._explain(sub)]

    def _message(self, root: str, error: ValidationError) -> str:
        if error.validator == "required":
            return repr(_missing(error))
        if error.validator in ("oneOf", "anyOf") and not error.context:
            location = self.schema_location(root, error)
            branches = self.node(location.lstrip("#"))
            names = [
                _branch_name(branch, i)
                for i, branch in enumerate(branches)
                if self._validator(f"{location.lstrip('#')}/{i}").is_valid(error.instance)
            ]
            return f"matches {len(names)} oneOf branches ({', '.join(names)}), exactly one must match"
        if error.validator in ("oneOf", "anyOf"):
            return f"matches none of the {error.validator} branches: {_truncate(repr(error.instance), 120)}"
        return error.message

    def schema_location(self, root: str, error: ValidationError) -> str:
        """The failing keyword as a pointer into the document, through every `$ref`.

        jsonschema leaves `$ref` out of schema paths, so a segment the current schema does
        not have is looked up in the schema its `$ref` points to."""
        location, rest = root, []
        node: Any = self.node(root)
        for segment in error.absolute_schema_path:
            while isinstance(node, dict) and segment not in node and isinstance(node.get("$ref"), str):
                location, rest = node["$ref"][1:], []
                node = self.node(location)
            if isinstance(node, list):
                node = node[int(segment)]
            elif isinstance(node, dict):
                node = node.get(segment)
            rest.append(str(segment).replace("~", "~0").replace("/", "~1"))
        return "#" + location + ("/" + "/".join(rest) if rest else "")


def _missing(error: ValidationError) -> str | None:
    """The property a `required` error is about (jsonschema only says it in the message)."""
    if error.validator != "required":
        return None
    found = re.fullmatch(r"'(.*)' is a required property", error.message)
    return found[1] if found else error.message


def _disqualifies(sub: ValidationError, parent: ValidationError) -> bool:
    """Whether a branch error shows the instance is of another kind than the branch."""
    depth = len(sub.absolute_path) - len(parent.absolute_path)
    if sub.validator == "type" and depth == 0:
        return True
    return sub.validator in ("const", "enum") and depth == 1


def _branch_name(branch: Any, index: int) -> str:
    if isinstance(branch, dict):
        if isinstance(branch.get("$ref"), str):
            return branch["$ref"].rsplit("/", 1)[-1]
        if branch.get("title"):
            return str(branch["title"])
    return f"#{index}"


def _short(location: str) -> str:
    """`#/components/schemas/Space/properties/x` -> `Space/properties/x`."""
    for prefix in ("#/components/schemas/", "#/components/responses/"):
        if location.startswith(prefix):
            return location[len(prefix) :]
    return location
