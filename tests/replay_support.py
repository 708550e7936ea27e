"""Organizations for plan/verify tests, built through the model's write calls (so their rows
follow the crawler's conventions), and small helpers shared by test_plan and test_verify."""

from __future__ import annotations

import random
from typing import Any

from syncd.replay.ops import Plan
from syncd.replay.plan import ContentStrategy, plan
from syncd.replay.simulate import TargetModel, apply_to_model
from syncd.replay.snapshot import IdMap, Snapshot
from syncd.replay.verify import Verification, compare


class OrgMaker:
    """One organization made call by call; `snapshot()` is what a crawl would record."""

    def __init__(self, org: str = "SORG", tenant: str = "src", prefix: str = "s") -> None:
        self.model = TargetModel.from_snapshot(Snapshot(tenant, org), id_prefix=prefix)
        self.org = org

    @classmethod
    def of(cls, snapshot: Snapshot, prefix: str) -> OrgMaker:
        """A maker that goes on from an existing snapshot (to change a source)."""
        maker = cls.__new__(cls)
        maker.model = TargetModel.from_snapshot(snapshot, id_prefix=prefix)
        maker.org = snapshot.org
        return maker

    def call(self, call_name: str, params: dict[str, str] | None = None, /, **body: Any) -> dict[str, Any]:
        return self.model.call(call_name, params, body)

    def settings(self, **fields: Any) -> None:
        self.call("organization.patch", **fields)

    def team(self, title: str, members: int = 0) -> str:
        team_id = self.call("team.create", title=title)["id"]
        if members:
            self.model.set_data("team", team_id, members=members)
        return team_id

    def custom_field(self, name: str, field_type: str = "text", **fields: Any) -> str:
        return self.call("custom-field.create", name=name, type=field_type, **fields)["id"]

    def translation(self, title: str, languages: list[str] | None = None) -> str:
        return self.call("translation.create", title=title, languages=languages or ["fr"])["id"]

    def spec(self, slug: str, *, url: str | None = None, text: str | None = None) -> str:
        source = {"url": url} if url else {"text": text or f"openapi: 3.0.0\ninfo:\n  title: {slug}\n"}
        return self.call("openapi-spec.create", {"spec": slug}, source=source)["id"]

    def saml(self, label: str, team: str | None = None, **fields: Any) -> str:
        body = {"label": label, **fields}
        if team:
            body["defaultTeam"] = team
        return self.call("saml-provider.create", **body)["id"]

    def collection(self, title: str, parent: str | None = None, **fields: Any) -> str:
        body: dict[str, Any] = {"title": title}
        if parent:
            body["parent"] = parent
        collection_id = self.call("collection.create", **body)["id"]
        if fields:
            self.call("collection.patch", {"id": collection_id}, **fields)
        return collection_id

    def space(self, title: str, parent: str | None = None, *, visibility: str = "public", **fields: Any) -> str:
        body: dict[str, Any] = {"title": title}
        if parent:
            body["parent"] = parent
        space_id = self.call("space.create", **body)["id"]
        self.model.set_data("space", space_id, visibility=visibility)
        if fields:
            self.call("space.patch", {"id": space_id}, **fields)
        return space_id

    def page(self, space: str, title: str, markdown: str = "", parent: str | None = None) -> str:
        return self.model.add_page(space, title, markdown or f"# {title}\n", parent)

    def file(self, space: str, name: str, size: int = 10) -> str:
        return self.model.add_file(space, name, size=size)

    def value(self, space: str, name: str, value: Any) -> None:
        self.call("space-custom-field-value.patch", {"space": space}, values={name: {"value": value}})

    def move(self, kind: str, item: str, *, parent: Any = "keep", before: str | None = None, after: str | None = None, site: str | None = None) -> None:
        body: dict[str, Any] = {}
        if parent != "keep":
            body["parent"] = parent
        ref_type, key = {
            "collection": ("space", "space"),
            "space": ("space", "space"),
            "site-section": ("site-section", "siteSection"),
            "site-section-group": ("site-section", "id"),
            "site-space": ("site-space", "siteSpace"),
        }[kind]
        if before or after:
            body["position"] = {"before" if before else "after": {"type": ref_type, key: before or after}}
        params = {"id": item, **({"site": site} if site else {})}
        self.call(f"{kind}.move", params, **body)

    def site(self, title: str, **fields: Any) -> str:
        site_id = self.call("site.create", title=title, visibility=fields.pop("visibility", "public"))["id"]
        if fields:
            self.call("site.patch", {"site": site_id}, **fields)
        return site_id

    def group(self, site: str, title: str, **fields: Any) -> str:
        return self.call("site-section-group.create", {"site": site}, title=title, **fields)["id"]

    def section(self, site: str, space: str, title: str, **fields: Any) -> tuple[str, str]:
        """(section id, its first site-space's id)."""
        answer = self.call("site-section.create", {"site": site}, spaceId=space, title=title)
        if fields:
            self.call("site-section.patch", {"site": site, "id": answer["id"]}, **fields)
        return answer["id"], answer["siteSpaces"][-1]["id"]

    def into_group(self, site: str, group: str, section: str) -> None:
        self.call("site-section-group.add-section", {"site": site, "id": group}, sectionId=section)

    def site_space(self, site: str, space: str, section: str | None = None, **fields: Any) -> str:
        body: dict[str, Any] = {"spaceId": space}
        if section:
            body["sectionId"] = section
        site_space = self.call("site-space.create", {"site": site}, **body)["id"]
        if fields:
            self.call("site-space.patch", {"site": site, "id": site_space}, **fields)
        return site_space

    def snapshot(self) -> Snapshot:
        return self.model.to_snapshot()


def empty_target(org: str = "TORG", tenant: str = "dst") -> Snapshot:
    return OrgMaker(org, tenant, "t").snapshot()


def copy_once(
    source: Snapshot, target: Snapshot, idmap: IdMap | None = None, *, mode: str = "copy", content: ContentStrategy | None = None, rng: random.Random | None = None, **options: Any
) -> tuple[Plan, Snapshot, IdMap]:
    """Plan and apply (on the model) once."""
    the_plan = plan(source, target, idmap or IdMap(), mode, content=content, **options)  # type: ignore[arg-type]
    after, mapped = apply_to_model(the_plan, target, idmap or IdMap(), source, rng=rng)
    return the_plan, after, mapped


def check_dependency_order(the_plan: Plan) -> None:
    """Every op's `after` names ops listed before it, keys are unique, and no step of the
    planner failed."""
    assert not [s for s in the_plan.skips if s.reason.startswith("cannot plan this")], the_plan.skips
    seen: set[str] = set()
    for op in the_plan.ops:
        assert op.key not in seen, f"repeated key {op.key}"
        missing = [key for key in op.after if key not in seen]
        assert not missing, f"{op.key} waits for {missing}, not listed before it"
        seen.add(op.key)


def equal_except(verification: Verification, allowed_extra: set[tuple[str, str]], allowed_missing: frozenset[tuple[str, str | None]] = frozenset()) -> list[str]:
    """Problems besides extras that were on the target before (unrelated objects) and
    objects the plan said it cannot copy."""
    problems = [f"missing {e.kind} {e.title}" for e in verification.missing if (e.kind, e.source_id) not in allowed_missing]
    problems += [f"different {e.kind} {e.title}: {e.fields}" for e in verification.different]
    problems += [f"error {e.kind} {e.title}: {e.note}" for e in verification.errors]
    problems += [f"extra {e.kind} {e.title}" for e in verification.extra if (e.kind, e.target_id) not in allowed_extra]
    return problems


def verify(source: Snapshot, target: Snapshot, idmap: IdMap) -> Verification:
    return compare(source, target, idmap)
