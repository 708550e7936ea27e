"""plan_copy(source, target, idmap, mode) -> Plan: the steps that make the target match.

Pure: the snapshots as read and the id map in, ops out. Copy order (DESIGN.md): organization
settings, teams, custom fields, translations, OpenAPI specs, SAML providers (`org`),
collections parents first and spaces, custom field values of spaces, space content (`tree`),
sites with their groups, sections, site-spaces and adaptive schemas (`sites`), the
organization's default content, then, in mirror mode, deletes (`deletes`); what the plan leaves
on the target that no source object maps to is listed (`Plan.left`, `plan_leftovers`); the settle steps
that put the tree's and each site's layout right run once what they order is made (the tree's
before the deletes of collections and spaces, which must not take along what moves out of
them; a site's after the deletes of its children, which free paths). The target's access settings
(who may join or sign in, SAML providers) are its own unless the plan is made `with_access`.
"""

from __future__ import annotations

from syncd.catalog import BY_NAME, DERIVED
from syncd.copy.context import ContentStrategy, Mode, PlanContext
from syncd.copy.deletes import plan_deletes
from syncd.copy.model import BOOKKEEPING, IdMap, Snapshot
from syncd.copy.ops import Leftover, Plan, wholly_excused
from syncd.copy.org import plan_default_content, plan_flat, plan_organization
from syncd.copy.review import object_path
from syncd.copy.rules import COPIED_KINDS, COVERED, NOT_COPIED, RULES, title_of
from syncd.copy.sites import plan_site_settles, plan_sites
from syncd.copy.tree import SETTLE_KEY, plan_content, plan_tree, plan_tree_settle, plan_values
from syncd.copy.verify import unmatched


def plan_copy(
    source: Snapshot,
    target: Snapshot,
    idmap: IdMap,
    mode: Mode = "copy",
    *,
    max_delete: int = 10,
    adopt: bool = True,
    content: ContentStrategy | None = None,
    with_access: bool = False,
) -> Plan:
    """The ops that make `target` match `source` (see the module docstring); the target's
    access settings are kept unless `with_access` (`syncd.copy.org`)."""
    ctx = PlanContext(source, target, idmap, mode=mode, adopt=adopt, content=content or ContentStrategy(), with_access=with_access)
    report_uncopied(ctx)
    plan_organization(ctx)
    plan_flat(ctx)
    parents = plan_tree(ctx)
    plan_values(ctx)
    plan_content(ctx)
    plan_sites(ctx)
    plan_default_content(ctx)
    if mode == "mirror":
        plan_deletes(ctx, max_delete)
    plan_tree_settle(ctx, parents)
    if SETTLE_KEY in ctx.keys:
        for op in ctx.plan.ops:
            if op.action == "delete" and op.kind in ("collection", "space"):
                op.after.append(SETTLE_KEY)
    plan_site_settles(ctx)
    ctx.plan.skips = list(dict.fromkeys(ctx.plan.skips))
    ctx.plan.left = plan_leftovers(ctx)
    return ctx.plan


def plan_leftovers(ctx: PlanContext) -> list[Leftover]:
    """Target objects no source object maps to that this plan neither adopts nor deletes:
    what the copy leaves there (all of them in copy mode; in mirror mode what syncd did not
    make). Verify finds the same objects `extra` (`verify.unmatched`)."""
    handled = {(op.kind, op.target_id) for op in ctx.plan.ops if op.action in ("adopt", "delete") and op.target_id}
    mapped: dict[str, dict[str, str]] = {}
    for (kind, source_id), entry in ctx.idmap.entries.items():
        if kind not in BOOKKEEPING:
            mapped.setdefault(kind, {})[entry.target_id] = source_id
    left = []
    kept = wholly_excused(ctx.plan.skips)  # the target's own, as it has them (its access settings)
    for kind in COPIED_KINDS:
        if kind not in RULES or kind in ("organization", "site-adaptive-schema") or kind in kept:
            continue  # one of each per organization or site: never only on the target
        for node, _ in unmatched(kind, ctx.source, ctx.target, mapped.get(kind, {})):
            if (kind, node.id) not in handled:
                left.append(Leftover(kind, node.id, title_of(kind, node), object_path(kind, node, ctx.target)))
    return left


def report_uncopied(ctx: PlanContext) -> None:
    for kind in ctx.source.kinds():
        if kind in RULES or kind in COVERED or kind in DERIVED:
            continue
        count = ctx.source.count(kind)
        reason = NOT_COPIED.get(kind) or (f"{kind} is not copied" if kind in BY_NAME else f"unknown kind {kind!r}: not copied")
        ctx.skip(kind, None, f"{count} {kind}", reason)


__all__ = ["ContentStrategy", "Mode", "plan_copy"]
