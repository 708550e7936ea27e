"""plan_copy(source, target, idmap, mode) -> Plan: the steps that make the target match.

Pure: the snapshots as read and the id map in, ops out. Copy order (DESIGN.md): organization
settings, teams, custom fields, translations, OpenAPI specs, SAML providers (`org`),
collections parents first and spaces, custom field values of spaces, space content (`tree`),
sites with their groups, sections, site-spaces and adaptive schemas (`sites`), the
organization's default content, then, in mirror mode, deletes (`deletes`); the settle steps
that put the tree's and each site's layout right run once what they order is made (the tree's
before the deletes of collections and spaces, which must not take along what moves out of
them; a site's after the deletes of its children, which free paths). The target's access settings
(who may join or sign in, SAML providers) are its own unless the plan is made `with_access`.
"""

from __future__ import annotations

from syncd.catalog import BY_NAME, DERIVED
from syncd.copy.context import ContentStrategy, Mode, PlanContext
from syncd.copy.deletes import plan_deletes
from syncd.copy.model import IdMap, Snapshot
from syncd.copy.ops import Plan
from syncd.copy.org import plan_default_content, plan_flat, plan_organization
from syncd.copy.rules import COVERED, NOT_COPIED, RULES
from syncd.copy.sites import plan_site_settles, plan_sites
from syncd.copy.tree import SETTLE_KEY, plan_content, plan_tree, plan_tree_settle, plan_values


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
    return ctx.plan


def report_uncopied(ctx: PlanContext) -> None:
    for kind in ctx.source.kinds():
        if kind in RULES or kind in COVERED or kind in DERIVED:
            continue
        count = len(ctx.source.of_kind(kind))
        reason = NOT_COPIED.get(kind) or (f"{kind} is not copied" if kind in BY_NAME else f"unknown kind {kind!r}: not copied")
        ctx.skip(kind, None, f"{count} {kind}", reason)


__all__ = ["ContentStrategy", "Mode", "plan_copy"]
