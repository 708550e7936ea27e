"""The emulator answers as the public OpenAPI document says the real service answers.

One scenario walks a generated emulator through every operation it serves that the OpenAPI
document (../shared/spec/gitbook-openapi-0.202.0.json) also has: creates before reads,
updates and moves, deletes last, with ids discovered through the API. Each answer's status
must be one the operation documents, and its JSON body must validate against the documented
schema (jsonschema, the document as the registry for `#/components/...`). Error answers
(400, 401, 404) of every family are checked against the documented error schemas. All
mismatches are collected and reported at once, so one run lists everything that drifted.

Two more tests keep the route table honest: every emulator operation is in the OpenAPI
document or in the commented allowlist of operations only the markdown spec has, and every
operation of part 4 of the markdown spec is served.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from syncd.emulator.app import api_routes, create_app
from syncd.emulator.route_table import FAMILIES
from syncd.emulator.routes.members import INVITE
from syncd.emulator.server import RunningEmulator
from syncd.emulator.store import Store
from tests.conftest import ALL_TOKEN, Api
from tests.openapi_support import (
    NOT_IN_OPENAPI,
    PART4_OPERATIONS,
    SPEC_PATH,
    Mismatch,
    OpenApi,
    Op,
    require_spec,
    shape,
)

Ctx = dict[str, Any]
Saver = Callable[[Ctx, Any], None]
NO_TOKEN = None
UNKNOWN = "does-not-exist-0000"
TOO_LONG_SUBJECT = "s" * 101
TOO_LONG_SPACE_TITLE = "t" * 51
BODY_PREVIEW = 200


@pytest.fixture(scope="module")
def openapi() -> OpenApi:
    """The OpenAPI document beside the repository; missing, it fails in CI (`CI` set to a true
    value) and skips elsewhere (`require_spec`)."""
    return OpenApi.load(require_spec(SPEC_PATH))


def test_a_missing_document_fails_in_ci_and_skips_elsewhere(tmp_path: Path) -> None:
    missing = tmp_path / "shared" / "spec" / SPEC_PATH.name
    for value in ("true", "1", "TRUE", "yes"):
        with pytest.raises(pytest.fail.Exception, match=re.escape(str(missing))):
            require_spec(missing, {"CI": value})
    for environ in ({}, {"CI": ""}, {"CI": "false"}, {"CI": "0"}):
        with pytest.raises(pytest.skip.Exception, match=re.escape(str(missing))):
            require_spec(missing, environ)


# ----- the scenario table -----------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One call. `path` names context keys in braces; `body` and `query` may be functions
    of the context. `error` is the status an error call must get (None: any success)."""

    method: str
    path: str
    body: Any = None
    query: Any = None
    error: int | None = None
    save: Saver | None = None
    token: str | None = ALL_TOKEN


def ok(method: str, path: str, body: Any = None, *, query: Any = None, save: Saver | None = None) -> Step:
    return Step(method, path, body, query, save=save)


def fails(error: int, method: str, path: str, body: Any = None, *, token: str | None = ALL_TOKEN) -> Step:
    return Step(method, path, body, error=error, token=token)


def keep(**getters: Callable[[Any], Any]) -> Saver:
    """Store values read from an answer in the context under the given keys."""

    def save(ctx: Ctx, data: Any) -> None:
        for key, get in getters.items():
            ctx[key] = get(data)

    return save


def the_id(data: Any) -> Any:
    return data["id"]


def item(index: int = 0, key: str = "id", where: Callable[[Any], bool] = lambda _: True) -> Callable[[Any], Any]:
    """A field of the `index`-th list item that satisfies `where`."""
    return lambda data: [i for i in data["items"] if where(i)][index][key]


def org_invite(ctx: Ctx, org: Any) -> None:
    """Link invites have no list or create operation (part 4 has get, patch and delete), so
    the scenario takes an organization invite the generator made from the store."""
    invites = ctx["store"].where(INVITE, org=org["id"])
    ctx["inviteId"] = next(r["id"] for r in invites if "level" not in r)


def both(*savers: Saver) -> Saver:
    def save(ctx: Ctx, data: Any) -> None:
        for saver in savers:
            saver(ctx, data)

    return save


def document_page(revision: Any) -> str:
    """Id of the first page of type `document` in a revision's page tree (breadth first)."""
    queue = list(revision["pages"])
    while queue:
        page = queue.pop(0)
        if page.get("type", "document") == "document":
            return page["id"]
        queue.extend(page.get("pages", []))
    raise KeyError("no document page in the revision")


def markdown(text: str) -> dict[str, Any]:
    return {"body": {"markdown": text}}


ORG = "/v1/orgs/{organizationId}"
SPACE = "/v1/spaces/{spaceId}"
CR = SPACE + "/change-requests/{changeRequestId}"
SITE = ORG + "/sites/{newSiteId}"
PETSTORE = "openapi: 3.0.0\ninfo: {title: Petstore, version: '1'}\npaths: {}\n"
# Names the scenario chooses for what it creates under a name rather than an id.
NAMES = {"specSlug": "contract-petstore", "otherSpecSlug": "contract-other", "newIntegration": "contract-test"}
EMPTY_DOCUMENT = {"object": "document", "data": {}, "nodes": []}
ADAPTIVE_SCHEMA = {
    "type": "object",
    "properties": {
        "unsigned": {
            "type": "object",
            "description": "Unsigned claims of the site visitor.",
            "properties": {"betaUser": {"type": "boolean", "description": "Opted into the beta"}},
            "additionalProperties": False,
        },
        "paidPlan": {"type": "boolean", "description": "On a paid plan"},
    },
    "additionalProperties": False,
}


def _comment_steps(base: str, key: str) -> list[Step]:
    """The comment family under `base` (a space or a change request); `key` prefixes ids."""
    one, reply = f"{base}/comments/{{{key}CommentId}}", f"{base}/comments/{{{key}CommentId}}/replies/{{{key}ReplyId}}"
    return [
        ok("GET", f"{base}/comments"),
        ok("POST", f"{base}/comments", lambda c: {**markdown("Is this still accurate?"), "page": c["pageId"]}, save=keep(**{f"{key}CommentId": the_id})),
        ok("GET", one),
        ok("PUT", one, {**markdown("Is this still accurate? (edited)"), "addedReactions": ["👍"]}),
        ok("GET", f"{one}/replies"),
        ok("POST", f"{one}/replies", markdown("Yes, checked today."), save=keep(**{f"{key}ReplyId": the_id})),
        ok("GET", reply),
        ok("PUT", reply, markdown("Yes, checked today (edited).")),
        ok("PUT", one, {"resolved": True}),
        fails(404, "GET", f"{base}/comments/{UNKNOWN}"),
        fails(400, "POST", f"{base}/comments", {"page": "no-body"}),
        fails(401, "GET", f"{base}/comments", token=NO_TOKEN),
        ok("DELETE", reply),
        ok("DELETE", one),
    ]


SCENARIO: list[Step] = [
    # --- organizations
    ok("GET", "/v1/orgs", save=keep(organizationId=item(0), otherOrgId=item(1))),
    ok("GET", ORG, save=both(keep(emailDomain=lambda org: org["emailDomains"][0]), org_invite)),
    ok("PATCH", ORG, {"title": "Contract organization", "inviteLinks": True}),
    ok("GET", "/v1/email-domains/{emailDomain}/orgs"),
    ok("GET", ORG + "/search", query={"query": "guide"}),
    ok("GET", ORG + "/spaces", save=keep(spaceId=item(0), spaceId2=item(1))),
    fails(401, "GET", "/v1/orgs", token=NO_TOKEN),
    ok("GET", "/v1/user"),
    fails(401, "GET", "/v1/user", token=NO_TOKEN),
    fails(404, "GET", f"/v1/orgs/{UNKNOWN}"),
    fails(400, "PATCH", ORG, {"title": "x"}),
    # --- members, teams (deletes at the end of the scenario)
    ok("GET", ORG + "/members", query={"limit": 100}, save=keep(userId=item(where=lambda m: m.get("role") not in ("admin", None)))),
    ok("GET", ORG + "/members/{userId}"),
    ok("PATCH", ORG + "/members/{userId}", {"role": "edit"}),
    ok("POST", ORG + "/members/{userId}/sso"),
    ok("GET", ORG + "/members/{userId}/spaces"),
    ok("GET", ORG + "/members/{userId}/teams"),
    ok("POST", ORG + "/ping"),
    ok("GET", ORG + "/teams"),
    ok("PUT", ORG + "/teams", lambda c: {"title": "Contract team", "members": [c["userId"]]}, save=keep(teamId=the_id)),
    ok("GET", ORG + "/teams/{teamId}"),
    ok("PATCH", ORG + "/teams/{teamId}", {"title": "Contract team (renamed)"}),
    ok("GET", ORG + "/link-invites/{inviteId}"),
    ok("PATCH", ORG + "/link-invites/{inviteId}", {"role": "comment"}),
    fails(400, "PUT", ORG + "/teams", {}),
    fails(404, "GET", ORG + f"/teams/{UNKNOWN}"),
    fails(404, "GET", ORG + f"/members/{UNKNOWN}"),
    fails(401, "GET", ORG + "/members", token=NO_TOKEN),
    # --- settings: SAML, OpenAPI specs, translations
    ok("GET", ORG + "/saml"),
    ok("POST", ORG + "/saml", {"label": "Okta", "ssoURL": "https://idp.example.com/sso", "entityID": "urn:example:idp", "defaultRole": "read"}, save=keep(samlId=the_id)),
    ok("GET", ORG + "/saml/{samlId}"),
    ok("PATCH", ORG + "/saml/{samlId}", {"label": "Okta (prod)"}),
    ok("GET", ORG + "/sso"),
    ok("GET", ORG + "/openapi"),
    ok("POST", ORG + "/openapi", lambda c: {"slug": c["specSlug"], "source": {"url": "https://petstore3.example.com/openapi.json"}}),
    ok("GET", ORG + "/openapi/{specSlug}"),
    ok("PUT", ORG + "/openapi/{specSlug}", {"source": {"text": PETSTORE}}),
    ok("GET", ORG + "/openapi/{specSlug}/versions/latest/content/raw"),
    ok("PUT", ORG + "/openapi/{otherSpecSlug}", {"source": {"url": "https://other.example.com/openapi.yaml"}}),
    ok("GET", ORG + "/translations"),
    # The markdown's body (`title`) plus the OpenAPI document's required fields: the request
    # is valid for both descriptions.
    ok(
        "POST",
        ORG + "/translations",
        lambda c: {"title": "French", "language": "fr", "source": {"space": c["spaceId"], "language": "en"}},
        save=keep(translationId=the_id),
    ),
    ok("GET", ORG + "/translations/{translationId}"),
    ok("PUT", ORG + "/translations/{translationId}", {"title": "French (France)", "instructions": EMPTY_DOCUMENT}),
    fails(400, "POST", ORG + "/saml", {}),
    fails(404, "GET", ORG + f"/openapi/{UNKNOWN}"),
    fails(404, "GET", ORG + f"/translations/{UNKNOWN}"),
    fails(401, "GET", ORG + "/saml", token=NO_TOKEN),
    ok("DELETE", ORG + "/saml/{samlId}"),
    ok("DELETE", ORG + "/openapi/{specSlug}"),
    ok("DELETE", ORG + "/openapi/{otherSpecSlug}"),
    ok("DELETE", ORG + "/translations/{translationId}"),
    # --- collections and spaces
    ok("GET", ORG + "/collections", save=keep(collectionId=item(0))),
    ok("POST", ORG + "/collections", {"title": "Contract collection"}, save=keep(newCollectionId=the_id)),
    ok("GET", "/v1/collections/{newCollectionId}"),
    ok("PATCH", "/v1/collections/{newCollectionId}", {"title": "Contract collection 2", "description": "Made by the contract test", "defaultLevel": "comment"}),
    ok("GET", "/v1/collections/{collectionId}/spaces"),
    ok("POST", "/v1/collections/{newCollectionId}/move", lambda c: {"parent": c["collectionId"]}),
    ok("POST", "/v1/collections/{newCollectionId}/move", {"parent": None}),
    ok("POST", ORG + "/spaces", {"title": "Contract space", "emoji": "1f680"}, save=keep(newSpaceId=the_id)),
    ok("GET", "/v1/spaces/{newSpaceId}"),
    ok("PATCH", "/v1/spaces/{newSpaceId}", {"title": "Contract space 2", "editMode": "locked", "defaultLevel": "comment"}),
    ok("POST", "/v1/spaces/{newSpaceId}/duplicate", save=keep(copySpaceId=the_id)),
    ok("POST", "/v1/spaces/{copySpaceId}/move", lambda c: {"parent": c["newCollectionId"]}),
    ok("POST", "/v1/spaces/{newSpaceId}/move", lambda c: {"parent": c["newCollectionId"], "position": {"before": {"type": "space", "space": c["copySpaceId"]}}}),
    ok("DELETE", "/v1/spaces/{copySpaceId}"),
    ok("POST", "/v1/spaces/{copySpaceId}/restore"),
    ok("POST", "/v1/collections/{newCollectionId}/transfer", lambda c: {"organization": c["otherOrgId"]}),
    fails(404, "GET", f"/v1/collections/{UNKNOWN}"),
    fails(404, "GET", f"/v1/spaces/{UNKNOWN}"),
    fails(400, "PATCH", SPACE, {"title": TOO_LONG_SPACE_TITLE}),
    fails(401, "GET", SPACE, token=NO_TOKEN),
    ok("DELETE", "/v1/collections/{newCollectionId}"),
    # --- space content
    ok("GET", SPACE + "/content", save=keep(pageId=document_page, fileId=lambda rev: rev["files"][0]["id"])),
    ok("GET", SPACE + "/content", query={"metadata": False, "computed": False}),
    ok("GET", SPACE + "/content/pages"),
    ok("GET", SPACE + "/content/files"),
    ok("GET", SPACE + "/content/files/{fileId}"),
    ok("GET", SPACE + "/content/page/{pageId}"),
    ok("GET", SPACE + "/content/page/{pageId}", query={"format": "markdown"}),
    ok("GET", SPACE + "/search", query={"query": "guide"}),
    fails(404, "GET", SPACE + f"/content/page/{UNKNOWN}"),
    fails(404, "GET", SPACE + f"/content/files/{UNKNOWN}"),
    fails(400, "GET", SPACE + "/search"),
    fails(401, "GET", SPACE + "/content", token=NO_TOKEN),
    # --- change requests (comments on them below, merge last)
    ok("GET", SPACE + "/change-requests"),
    ok("POST", SPACE + "/change-requests", {"subject": "Contract change request"}, save=keep(changeRequestId=the_id)),
    ok("GET", CR),
    ok("PATCH", CR, {"subject": "Contract change request (edited)", "status": "open"}),
    ok("GET", CR + "/content"),
    ok("GET", CR + "/content/pages"),
    ok("GET", CR + "/content/files"),
    ok("GET", CR + "/content/files/{fileId}"),
    ok("GET", CR + "/content/page/{pageId}"),
    ok("GET", CR + "/pdf"),
    ok("GET", CR + "/pdf", query=lambda c: {"only": True, "page": c["pageId"]}),
    ok("POST", CR + "/update"),
    fails(404, "GET", SPACE + f"/change-requests/{UNKNOWN}"),
    fails(400, "PATCH", CR, {"subject": TOO_LONG_SUBJECT}),
    fails(401, "GET", CR, token=NO_TOKEN),
    # --- comments on the space and on the change request
    *_comment_steps(SPACE, "space"),
    *_comment_steps(CR, "cr"),
    ok("POST", CR + "/merge"),
    # --- docs sites, their sections, section groups and site spaces
    ok("GET", ORG + "/sites", save=keep(siteId=item(0))),
    ok("GET", ORG + "/sites/{siteId}"),
    ok("GET", ORG + "/sites/{siteId}/published"),
    ok("POST", ORG + "/sites", {"title": "Contract site", "visibility": "public"}, save=keep(newSiteId=the_id)),
    ok("PATCH", SITE, {"title": "Contract site 2", "basename": "contract", "adaptiveContent": {"enabled": True}}),
    ok("PUT", SITE + "/adaptive-schema", {"jsonSchema": ADAPTIVE_SCHEMA}),
    ok("GET", SITE + "/adaptive-schema"),
    ok(
        "POST",
        SITE + "/sections",
        lambda c: {"spaceId": c["spaceId"], "title": "Guides"},
        save=keep(sectionId=the_id, firstSiteSpaceId=lambda s: s["siteSpaces"][0]["id"]),
    ),
    ok("POST", SITE + "/sections", lambda c: {"spaceId": c["spaceId2"], "title": "Reference"}, save=keep(sectionId2=the_id)),
    ok("GET", SITE + "/sections"),
    ok("PATCH", SITE + "/sections/{sectionId}", {"title": "User guides", "path": "guides", "description": "How to", "condition": "visitor.claims.paidPlan"}),
    ok("POST", SITE + "/sections/{sectionId2}/move", lambda c: {"position": {"before": {"type": "site-section", "siteSection": c["sectionId"]}}}),
    ok("POST", SITE + "/section-groups", lambda c: {"title": "Products", "sections": [c["sectionId"]]}, save=keep(groupId=the_id)),
    ok("POST", SITE + "/section-groups", {"title": "More"}, save=keep(groupId2=the_id)),
    ok("GET", SITE + "/section-groups"),
    ok("PATCH", SITE + "/section-groups/{groupId}", {"title": "All products"}),
    ok("POST", SITE + "/section-groups/{groupId2}/move", lambda c: {"position": {"before": {"type": "site-section", "id": c["groupId"]}}}),
    ok("POST", SITE + "/site-spaces", lambda c: {"spaceId": c["spaceId2"], "sectionId": c["sectionId"]}, save=keep(siteSpaceId=the_id)),
    ok("GET", SITE + "/site-spaces"),
    ok("PATCH", SITE + "/site-spaces/{siteSpaceId}", {"path": "variant", "condition": "visitor.claims.unsigned.betaUser"}),
    ok("POST", SITE + "/site-spaces/{siteSpaceId}/move", lambda c: {"position": {"before": {"type": "site-space", "siteSpace": c["firstSiteSpaceId"]}}}),
    fails(404, "GET", ORG + f"/sites/{UNKNOWN}"),
    fails(400, "POST", ORG + "/sites", {"title": "x"}),
    fails(400, "PUT", SITE + "/adaptive-schema", {}),
    fails(401, "GET", ORG + "/sites", token=NO_TOKEN),
    ok("DELETE", SITE + "/site-spaces/{siteSpaceId}"),
    ok("DELETE", SITE + "/section-groups/{groupId2}"),
    ok("DELETE", SITE + "/sections/{sectionId2}"),
    ok("DELETE", SITE),
    # --- integrations
    ok("GET", "/v1/integrations", save=keep(integrationName=item(0, "name"))),
    ok("GET", "/v1/integrations/{integrationName}"),
    ok("GET", "/v1/integrations/{integrationName}/installations"),
    ok(
        "POST",
        "/v1/integrations/{newIntegration}",
        lambda c: {
            "title": "Contract test",
            "description": "Published by the contract test",
            "scopes": ["space:content:read"],
            "script": "export default {};",
            "organization": c["organizationId"],
        },
    ),
    fails(404, "GET", f"/v1/integrations/{UNKNOWN}"),
    fails(400, "POST", "/v1/integrations/{newIntegration}", {"title": "x"}),
    fails(401, "GET", "/v1/integrations", token=NO_TOKEN),
    ok("DELETE", "/v1/integrations/{newIntegration}"),
    # --- what other steps needed, deleted last
    ok("DELETE", ORG + "/link-invites/{inviteId}"),
    ok("DELETE", ORG + "/teams/{teamId}"),
    ok("DELETE", ORG + "/members/{userId}"),
    ok("DELETE", "/v1/spaces/{newSpaceId}"),
]


# ----- running it ---------------------------------------------------------------------------


def family_routes() -> dict[tuple[str, str], str]:
    """(METHOD, path shape) -> name of the route family module that serves it."""
    out = {}
    for family in FAMILIES:
        for route in family.routes:
            out[(route.method, shape(route.path))] = family.name
    return out


@dataclass
class Run:
    openapi: OpenApi
    served: dict[tuple[str, str], str]
    """(METHOD, shape) -> the emulator's path template."""
    families: dict[tuple[str, str], str]
    ctx: Ctx = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    causes: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    """(schema keyword, message) -> families whose answers show it: the summary by cause."""
    covered: set[tuple[str, str]] = field(default_factory=set)
    errors_checked: set[str] = field(default_factory=set)

    def problem(self, family: str, text: str) -> None:
        line = f"[{family}] {text}"
        if line not in self.problems:  # the same drift seen by two calls is one problem
            self.problems.append(line)

    def mismatches(self, family: str, found: list[Mismatch]) -> None:
        for mismatch in found:
            self.problem(family, str(mismatch))
            if mismatch.schema:
                self.causes.setdefault((mismatch.schema, mismatch.message), set()).add(family)

    def report(self) -> str:
        lines = [f"{len(self.problems)} mismatches with the OpenAPI document:", *sorted(self.problems)]
        if self.causes:
            lines.append("\nby schema (the same cause reached through several operations):")
            for (schema, message), families in sorted(self.causes.items()):
                lines.append(f"  {schema}: {message}  <- {', '.join(sorted(families))}")
        return "\n".join(lines)


def _fill(path: str, ctx: Ctx) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: quote(str(ctx[m[1]]), safe=""), path)


def _value(value: Any, ctx: Ctx) -> Any:
    return value(ctx) if callable(value) else value


def _preview(data: Any) -> str:
    text = " ".join(str(data).split())
    return text if len(text) <= BODY_PREVIEW else text[: BODY_PREVIEW - 3] + "..."


async def _run_step(api: Api, run: Run, step: Step) -> None:
    key = (step.method, shape(step.path))
    route = run.served.get(key)
    if route is None:
        return  # not served (yet): test_part4_operations_are_served names it
    family = run.families.get(key, "?")
    label = f"{step.method} {route}"
    try:
        url = _fill(step.path, run.ctx)
        body, query = _value(step.body, run.ctx), _value(step.query, run.ctx) or {}
    except (KeyError, IndexError) as missing:
        run.problem(family, f"{label}: not run, {missing} is unknown (an earlier step failed)")
        return
    op = run.openapi.find(step.method, step.path)
    if op is not None and step.error is None:
        run.mismatches(family, run.openapi.check_request(label, op, body))
    client = api.as_token(step.token)
    status, data = await client.call(step.method, url, json=body, **query)
    if step.error is None and not 200 <= status < 300:
        run.problem(family, f"{label}: expected a success, got {status}: {_preview(data)}")
        return
    if step.error is not None and status != step.error:
        run.problem(family, f"{label}: expected {step.error}, got {status}: {_preview(data)}")
        return
    if op is not None:
        content_type = client.last_headers.get("Content-Type", "")
        run.mismatches(family, run.openapi.check_response(label, op, status, data, content_type))
        if step.error is None:
            run.covered.add(key)
        else:
            run.errors_checked.add(family)
    if step.save is not None:
        try:
            step.save(run.ctx, data)
        except (KeyError, IndexError, TypeError, StopIteration) as exc:
            run.problem(family, f"{label}: could not read the ids later steps need ({exc!r}) from {_preview(data)}")


async def test_answers_match_the_openapi_document(openapi: OpenApi, emulator: RunningEmulator, api: Api) -> None:
    run = Run(
        openapi=openapi,
        served={(method, shape(path)): path for method, path in api_routes(emulator.app)},
        families=family_routes(),
        ctx={"store": emulator.store, **NAMES},
    )
    for step in SCENARIO:
        await _run_step(api, run, step)
    for (method, path_shape), route in sorted(run.served.items(), key=lambda kv: kv[1]):
        family = run.families.get((method, path_shape), "?")
        if openapi.find(method, route) is not None and (method, path_shape) not in run.covered:
            run.problem(family, f"{method} {route}: no successful call in the scenario (add a step)")
    families_in_openapi = {run.families.get(key, "?") for key in run.served if openapi.find(key[0], key[1]) is not None}
    for family in sorted(families_in_openapi - run.errors_checked):
        run.problem(family, "no error answer (400/401/404) was checked against the document")
    if run.problems:
        pytest.fail(run.report(), pytrace=False)


def test_the_checker_reports_drift(openapi: OpenApi) -> None:
    """The validation is not vacuous: wrong statuses, types, enums, missing fields, bodies
    where none is documented and wrong error bodies are all reported, with their place."""
    get_space = openapi.find("GET", "/v1/spaces/{anything}")
    delete_space = openapi.find("DELETE", "/v1/spaces/{anything}")
    assert get_space is not None and delete_space is not None
    found = openapi.check_response("GET space", get_space, 200, {"object": "space", "id": 5, "visibility": "secret"})
    text = "\n".join(map(str, found))
    assert "$.id: 5 is not of type 'string'" in text and "[schema Space/" in text
    assert "$.visibility: 'secret' is not one of" in text
    assert "$: missing required 'title'" in text
    assert [str(m) for m in openapi.check_response("GET space", get_space, 201, {})] == [
        "GET space -> 201: status: status 201 is not documented (documented: 200)"
    ]
    assert openapi.check_response("DELETE space", delete_space, 204, None) == []
    assert "documented without a body" in str(openapi.check_response("DELETE space", delete_space, 204, {"ok": True})[0])
    assert openapi.check_response("GET space", get_space, 404, {"error": {"code": 404, "message": "gone"}}) == []
    wrong = openapi.check_response("GET space", get_space, 404, {"error": {"code": 400, "message": "gone"}})
    assert [m.where for m in wrong] == ["$.error.code"]
    assert openapi.check_response("GET space", get_space, 200, "<html>", "text/html")[0].where == "body"


# ----- the route table ----------------------------------------------------------------------


def _served() -> list[Op]:
    return api_routes(create_app(Store()))


def test_every_operation_is_in_the_openapi_document_or_allowlisted(openapi: OpenApi) -> None:
    allowed = {(m, shape(p)) for m, p in NOT_IN_OPENAPI}
    unknown = [f"{m} {p}" for m, p in _served() if openapi.find(m, p) is None and (m, shape(p)) not in allowed]
    assert not unknown, "served but neither in the OpenAPI document nor in NOT_IN_OPENAPI:\n" + "\n".join(unknown)


def test_allowlist_holds_only_markdown_operations_missing_from_the_document(openapi: OpenApi) -> None:
    part4 = {(m, shape(p)) for m, p in PART4_OPERATIONS}
    stale = [f"{m} {p}" for m, p in NOT_IN_OPENAPI if openapi.find(m, p) is not None or (m, shape(p)) not in part4]
    assert not stale, "NOT_IN_OPENAPI entries that the document has or part 4 does not:\n" + "\n".join(stale)


def test_part4_operations_are_served() -> None:
    served = {(m, shape(p)) for m, p in _served()}
    missing = [f"{m} {p}" for m, p in PART4_OPERATIONS if (m, shape(p)) not in served]
    assert not missing, f"{len(missing)} operations of part 4 of the spec are not served:\n" + "\n".join(missing)
