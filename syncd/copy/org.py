"""How an organization's settings and its flat kinds are copied: teams, custom fields,
translations, OpenAPI specs and SAML providers (one listing each, no order, no nesting).

Each is adopted (same name on the target), created, or patched field by field; a create's
answer is checked against what the source says and what differs is patched in the same run.
The organization itself keeps its identity: its title and logo are never copied. Its access
settings (who may join or sign in: `rules.ACCESS_FIELDS` and the SAML providers) are copied
only when the plan is made `with_access`, in an op of their own; otherwise one skip says that
the target kept them, and excuses what verify finds different there.
"""

from __future__ import annotations

from syncd.catalog import BY_NAME, dotted
from syncd.copy.context import PlanContext, seg
from syncd.copy.model import Node
from syncd.copy.ops import WHOLE_KIND, Expect, Op
from syncd.copy.rules import ACCESS_FIELDS, ACCESS_KEY, ACCESS_KINDS, ORGANIZATION_IDENTITY, RULES, TEAM_MEMBERS_REASON, text

FLAT_KINDS: tuple[str, ...] = ("team", "custom-field", "translation", "openapi-spec", "saml-provider")
"""In copy order: SAML providers name teams."""


def plan_organization(ctx: PlanContext) -> None:
    """Organization settings (the default content, which names a site, comes after sites)."""
    node = ctx.source.get("organization", ctx.source.org)
    if node is None or ctx.target.get("organization", ctx.org) is None:
        return
    target = ctx.target.get("organization", ctx.org)
    for field, reason in ORGANIZATION_IDENTITY.items():
        if target is not None and dotted(node.data, field) != dotted(target.data, field):
            ctx.skip("organization", node.id, field, f"{field} not copied: {reason}", (field,))
    path = ctx.path("organization", "patch")
    ctx.patch_existing("organization", node, ctx.org, path, exclude=("defaultContent", *ACCESS_FIELDS))
    if ctx.with_access:
        others = tuple(name for name in RULES["organization"].fields if name not in ACCESS_FIELDS)
        ctx.patch_existing("organization", node, ctx.org, path, exclude=others, key=ACCESS_KEY)
    else:
        report_kept_access(ctx)


def report_kept_access(ctx: PlanContext) -> None:
    """One skip for the access settings the target keeps: the fields that differ from the
    source's, and the SAML providers of both sides (verify compares them through the id map,
    which a copy without access does not extend); it excuses every access field and every
    SAML provider in verify."""
    node = ctx.source.get("organization", ctx.source.org)
    current = ctx.current("organization", ctx.org)
    if node is None or current is None:
        return
    desired = ctx.desired("organization", node)
    kept = [name for name in ACCESS_FIELDS if desired.get(name) != current.get(name)]
    for kind, name in ACCESS_KINDS.items():
        mine, theirs = len(ctx.source.of_kind(kind)), len(ctx.target.of_kind(kind))
        if mine or theirs:
            kept.append(f"{name} ({mine} in the source, {theirs} on the target)")
    if kept:
        excuses = (*ACCESS_FIELDS, *(WHOLE_KIND + kind for kind in ACCESS_KINDS))
        ctx.skip("organization", node.id, "access settings", f"{', '.join(kept)} kept as the target has them: --with-access copies them", excuses)


def plan_default_content(ctx: PlanContext) -> None:
    """The organization's default content (a site: copied once sites are)."""
    node = ctx.source.get("organization", ctx.source.org)
    if node is None or ctx.target.get("organization", ctx.org) is None:
        return
    desired = ctx.desired("organization", node).get("defaultContent")
    current = (ctx.current("organization", ctx.org) or {}).get("defaultContent")
    if desired == current:
        return
    value = ctx.ref_value("organization", "defaultContent", desired, node)
    if value is not None and not isinstance(value, dict):
        return  # names a site that is not copied (reported)
    ctx.emit(Op(
        key="patch:organization:default-content", action="patch", kind="organization", source_id=node.id, target_id=ctx.org,
        title="default content", method="PATCH", path=ctx.path("organization", "patch"), body={"defaultContent": value},
    ))


def created_order(ctx: PlanContext, kind: str) -> list[Node]:
    """Objects of an unordered kind oldest first (a listing's order is not a copy's business,
    but creating them in this order is what a reader of the source would expect)."""
    return sorted(ctx.source.of_kind(kind), key=lambda n: (str(n.data.get("createdAt") or ""), n.id))


def plan_flat(ctx: PlanContext) -> None:
    for kind in FLAT_KINDS:
        if kind in ACCESS_KINDS and not ctx.with_access:
            continue
        for node in created_order(ctx, kind):
            plan_flat_object(ctx, kind, node)


def plan_flat_object(ctx: PlanContext, kind: str, node: Node) -> None:
    rule = RULES[kind]
    title = ctx.title(kind, node)
    values = ctx.desired(kind, node)
    key = rule.key if isinstance(rule.key, str) else rule.key[0]
    if text(values.get(key)) is None:
        ctx.skip(kind, node.id, title, f"it has no {key}: not copied", ("missing",))
        return
    if kind == "openapi-spec" and values.get("source") is None:
        ctx.skip(kind, node.id, title, "its source text could not be read: not copied", ("missing",))
        return
    writes = BY_NAME[kind].writes
    assert writes is not None
    address = writes.address

    def address_of(source_id: str) -> str:
        """`{id}` of the kind's paths: the target id, or the field the kind is addressed by."""
        if address != "id":
            return seg(str(values[address]))
        return ctx.seg(kind, source_id)

    def create() -> Op:
        body = ctx.create_body(kind, node, values)
        segments = {"id": seg(str(values[address]))} if address != "id" else {}
        path = ctx.path(kind, "create", **segments)
        expect = Expect(ctx.list_path(kind))
        patch_path = ctx.path(kind, "patch", id=address_of(node.id))
        exclude = ("title",) if kind == "translation" else ()
        want = ctx.want(kind, node, values, exclude=exclude)
        return ctx.create_op(kind, node, path, body, expect, serial=f"list:{kind}", want=want, patch_path=patch_path)

    if not ctx.ensure(kind, node, lambda: ctx.target.children(kind, ("organization", ctx.org)), create):
        return
    target_id = ctx.tid(kind, node.id)
    if target_id is not None:
        always = ("title",) if kind == "translation" else ()  # PUT: title is required
        ctx.patch_existing(kind, node, target_id, ctx.path(kind, "patch", id=address_of(node.id)), always=always)
    else:
        ctx.report_unwritable(kind, node, None)
    members = node.data.get("members")
    if kind == "team" and isinstance(members, int) and members > 0:
        ctx.skip(kind, node.id, title, TEAM_MEMBERS_REASON, ("members",))


__all__ = ["FLAT_KINDS", "plan_default_content", "plan_flat", "plan_organization", "report_kept_access"]
