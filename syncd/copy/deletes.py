"""Deletes (mirror mode only): what syncd itself created on the target and the source no
longer has, children before parents, capped by `--max-delete`, refused when the source looks
empty. Planned from what was read; never anything syncd adopted or did not make, and never an
object that still holds something that is not to be deleted.
"""

from __future__ import annotations

from syncd.catalog import BY_NAME
from syncd.copy.context import PlanContext, seg
from syncd.copy.model import Node
from syncd.copy.ops import Op
from syncd.copy.rules import ACCESS_KINDS, ref_id, title_of, tree_parent

DELETE_ORDER: tuple[str, ...] = (
    "site-space",
    "site-section",
    "site-section-group",
    "site",
    "saml-provider",
    "openapi-spec",
    "translation",
    "custom-field",
    "team",
    "space",
    "collection",
)
"""Children before parents."""


def plan_deletes(ctx: PlanContext, max_delete: int) -> None:
    """The deletes of a mirror (module docstring); the target's SAML providers only when
    access settings are copied (`PlanContext.with_access`)."""
    if not ctx.source.of_kind("collection") and not ctx.source.of_kind("space"):
        copied = sum(1 for (kind, _), m in ctx.idmap.entries.items() if kind in ("collection", "space"))
        if copied:
            ctx.plan.refused = (
                f"the source looks empty (no collections and no spaces) while {copied} were copied from it before: "
                "refusing to delete anything; check the source's token and organization"
            )
    doomed: dict[str, list[tuple[str, str]]] = {kind: [] for kind in DELETE_ORDER}
    kept = () if ctx.with_access else ACCESS_KINDS
    for (kind, source_id), entry in ctx.idmap.entries.items():
        if kind in doomed and kind not in kept and entry.origin == "created" and ctx.source.get(kind, source_id) is None and ctx.target.get(kind, entry.target_id) is not None:
            doomed[kind].append((source_id, entry.target_id))
    doomed_ids = {(kind, t) for kind, items in doomed.items() for _, t in items}
    for kind in ("collection", "space"):
        doomed[kind].sort(key=lambda item: -_depth(ctx, item[1]))
    keys: dict[tuple[str, str], str] = {}
    count = 0
    for kind in DELETE_ORDER:
        for source_id, target_id in doomed[kind]:
            node = ctx.target.get(kind, target_id)
            assert node is not None
            inside = _inside(ctx, kind, node)
            title = title_of(kind, node)
            kept = [item for item in inside if item not in doomed_ids]
            if kept:
                ctx.skip(kind, source_id, title, f"not deleted: it holds {len(kept)} object(s) syncd did not create or still copies", ("extra",))
                continue
            op = Op(
                key=f"delete:{kind}:{source_id}", action="delete", kind=kind, source_id=source_id, target_id=target_id, title=title,
                method="DELETE", path=ctx.path(kind, "delete", **_segments(kind, node)), note="created by syncd; gone from the source",
            )
            keys[(kind, target_id)] = ctx.emit(op, after=[keys.get(item) for item in inside]).key
            count += 1
    if count > max_delete and ctx.plan.refused is None:
        ctx.plan.refused = (
            f"{count} deletes exceed --max-delete {max_delete} (a daemon job's max_delete); nothing was applied. "
            "Check the source, then raise the limit if they are intended"
        )


def _segments(kind: str, node: Node) -> dict[str, str]:
    writes = BY_NAME[kind].writes
    assert writes is not None
    address = node.api_id if writes.address == "id" else str(node.data.get(writes.address))
    segments = {"id": seg(address)}
    if node.parent is not None and node.parent[0] == "site":
        segments["site"] = seg(node.parent[1])
    return segments


def _depth(ctx: PlanContext, target_id: str) -> int:
    depth, seen = 0, set()
    node = ctx.target.get("collection", target_id) or ctx.target.get("space", target_id)
    while node is not None and (parent := tree_parent(node)) and node.id not in seen:
        seen.add(node.id)
        depth += 1
        node = ctx.target.get("collection", parent)
    return depth


def _inside(ctx: PlanContext, kind: str, node: Node) -> list[tuple[str, str]]:
    """Objects that deleting this one deletes with it."""
    if kind == "collection":
        out: list[tuple[str, str]] = []
        stack = [node.id]
        while stack:
            parent = stack.pop()
            for child_kind in ("collection", "space"):
                for child in ctx.target.children(child_kind, ("collection", parent)):
                    out.append((child_kind, child.id))
                    if child_kind == "collection":
                        stack.append(child.id)
        return out
    if kind == "site":
        return [(k, n.id) for k in ("site-section", "site-section-group", "site-space") for n in ctx.target.children(k, ("site", node.id))]
    if kind == "site-section":
        site = node.parent[1] if node.parent else ""
        return [("site-space", n.id) for n in ctx.target.children("site-space", ("site", site)) if ref_id(n.data.get("section")) == node.id]
    if kind == "space":  # its site-spaces go with it
        return [("site-space", n.id) for n in ctx.target.of_kind("site-space") if ref_id(n.data.get("space")) == node.id]
    return []


__all__ = ["DELETE_ORDER", "plan_deletes"]
