"""How a docs site is copied: the site, its section groups, its sections, its site-spaces, its
adaptive schema, and then its layout.

1. The site, each group and each site-space are adopted (same title; a site-space: same
   space in the same section), created, or patched; a create's answer is checked and what
   differs is patched.
2. A section is created with a space (the API has no empty section): `create_section` makes
   it with the space of its first site-space and maps the site-space the service made for it,
   found in the answer or, when the answer does not show it, in the listing; a section whose
   source has no site-space loses that seed again.
3. The layout is put right by one settle step per site (`settle_site`), once everything is
   made: it lists the target site's sections, groups and site-spaces and, from what it finds,
   moves sections into and out of groups, orders the navigation, the groups and each
   section's site-spaces with the fewest moves, gives sections and site-spaces the source's
   paths (through a temporary path when two swap), and sets the default section and default
   site-spaces. At the top level a section is placed relative to sections only (the
   spec's reference for a section's move; a service may refuse one naming a group) and a
   group after its predecessor, whatever that is; a move answered 400 is sent once more
   naming the same place the other way, then reported. The same functions
   (`layout_changes`) preview it at plan time from what was read, so `mirror plan` shows
   it and a copy that is already right plans nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio

from syncd.api import ApiError
from syncd.catalog import BY_NAME, list_path, write_path
from syncd.copy.context import PlanContext, seg
from syncd.copy.model import Node, Snapshot
from syncd.copy.observe import Outcome, check_answer, outcome
from syncd.copy.ops import Expect, Op, Ref, path_ref
from syncd.copy.org import created_order
from syncd.copy.rules import DEFAULT_ADAPTIVE_SCHEMA, SECTION_CREATE_TITLE_MAX, container_site_spaces, ref_id, text
from syncd.copy.site_layout import (
    SITE_CHILDREN,
    Change,
    lane,
    layout_changes,
    membership_changes,
    order_changes,
    path_and_default_changes,
    resolve_layout,
    source_layout,
)
from syncd.copy.writer import CallFailed, Unresolved, Writer, listings_side_by_side

MOVE_KEY = {"site-section": "siteSection", "site-section-group": "id", "site-space": "siteSpace"}
"""The key naming the sibling in a move's position, by the MOVED item's kind (spec, part 1)."""


def _list_path(kind: str, org: str, site: str) -> str:
    """A site's list of `kind`; `site` is a path segment already (a quoted id or a Ref)."""
    return list_path(kind, {"org": seg(org), "site": site})


# ----- planning -------------------------------------------------------------------------------


def plan_sites(ctx: PlanContext) -> None:
    for site in created_order(ctx, "site"):
        start = len(ctx.plan.ops)
        plan_site(ctx, site)
        ctx.site_ops[site.id] = [op.key for op in ctx.plan.ops[start:]]


def plan_site_settles(ctx: PlanContext) -> None:
    """After the sites and the deletes of their children (freed paths and places)."""
    for site in created_order(ctx, "site"):
        if ctx.exists("site", site.id):
            plan_site_settle(ctx, site)


def plan_site(ctx: PlanContext, site: Node) -> None:
    values = ctx.desired("site", site)
    if text(values.get("title")) is None:
        ctx.skip("site", site.id, ctx.title("site", site), "its title is missing or not text: not copied", ("missing",))
        return
    patch_path = ctx.path("site", "patch", id=path_ref("site", site.id))

    def create() -> Op:
        body = ctx.create_body("site", site, values)
        want = ctx.want("site", site, values)
        return ctx.create_op("site", site, ctx.path("site", "create"), body, Expect(ctx.list_path("site")), serial="list:site", want=want, patch_path=patch_path)

    if not ctx.ensure("site", site, lambda: ctx.target.children("site", ("organization", ctx.org)), create):
        return
    target_site = ctx.tid("site", site.id)
    if target_site is not None:
        ctx.patch_existing("site", site, target_site, ctx.path("site", "patch", id=seg(target_site)))
    else:
        ctx.report_unwritable("site", site, None)
    for group in ctx.source.children("site-section-group", ("site", site.id)):
        plan_group(ctx, site, group)
    roots = [plan_site_space(ctx, site, node, None) for node in container_site_spaces(ctx.source, site.id, None)]
    sections = ctx.source.children("site-section", ("site", site.id))
    for section in sections:
        plan_section(ctx, site, section, after=roots)
    for section in sections:
        for node in container_site_spaces(ctx.source, site.id, section.id):
            plan_site_space(ctx, site, node, section.id)
    plan_adaptive_schema(ctx, site)


def _site_segments(ctx: PlanContext, site: Node, kind: str | None = None, source_id: str | None = None) -> dict[str, str]:
    out = {"site": ctx.seg("site", site.id)}
    if kind is not None and source_id is not None:
        out["id"] = ctx.seg(kind, source_id)
    return out


def _children(ctx: PlanContext, site: Node, kind: str) -> list[Node]:
    target_site = ctx.tid("site", site.id)
    return ctx.target.children(kind, ("site", target_site)) if target_site else []


def plan_group(ctx: PlanContext, site: Node, node: Node) -> None:
    kind = "site-section-group"
    values = ctx.desired(kind, node)
    if text(values.get("title")) is None:
        ctx.skip(kind, node.id, ctx.title(kind, node), "its title is missing or not text: not copied", ("missing",))
        return

    def create() -> Op:
        path = ctx.path(kind, "create", **_site_segments(ctx, site))
        expect = Expect(_list_path(kind, ctx.org, ctx.seg("site", site.id)))
        patch_path = ctx.path(kind, "patch", site=ctx.seg("site", site.id), id=path_ref(kind, node.id))
        return ctx.create_op(kind, node, path, ctx.create_body(kind, node, values), expect, serial=f"site:{site.id}:{kind}",
                             want=ctx.want(kind, node, values), patch_path=patch_path)

    if ctx.ensure(kind, node, lambda: _children(ctx, site, kind), create) and (target_id := ctx.tid(kind, node.id)):
        ctx.patch_existing(kind, node, target_id, ctx.path(kind, "patch", **_site_segments(ctx, site, kind, node.id)))


def plan_section(ctx: PlanContext, site: Node, node: Node, after: list[str | None]) -> None:
    kind = "site-section"
    values = ctx.desired(kind, node)
    title = ctx.title(kind, node)
    if text(values.get("title")) is None:
        ctx.skip(kind, node.id, title, "its title is missing or not text: not copied", ("missing",))
        return

    def create() -> Op | None:
        def usable(space: str | None) -> bool:  # on the target, or made by this plan (not one being brought back)
            return ctx.exists("space", space) and space not in ctx.content.restorable

        first = next((n for n in container_site_spaces(ctx.source, site.id, node.id) if usable(ref_id(n.data.get("space")))), None)
        space = ref_id(first.data.get("space")) if first is not None else next((n.id for n in ctx.source.of_kind("space") if usable(n.id)), None)
        if space is None:
            ctx.skip(kind, node.id, title, "a section is created with a space, and no space is copied: not copied", ("missing",))
            return None
        site_seg = ctx.seg("site", site.id)
        return Op(
            key=f"create:{kind}:{node.id}", action="create", kind=kind, source_id=node.id, title=title, recipe="section",
            method="POST", path=ctx.path(kind, "create", site=site_seg),
            body={"spaceId": Ref("space", space), "title": str(values["title"])[:SECTION_CREATE_TITLE_MAX]},
            expect=Expect(_list_path(kind, ctx.org, site_seg)), serial=f"site:{site.id}:{kind}", want=ctx.want(kind, node, values) or None,
            spec={
                "org": ctx.org, "site": Ref("site", site.id), "space": Ref("space", space), "site_space": first.id if first else None,
                "patch": ctx.path(kind, "patch", site=site_seg, id=path_ref(kind, node.id)),
            },
            makes=[("site-space", first.id)] if first is not None else [],
            note="made with the space of its first site-space" if first else "made with a space whose site-space is then deleted",
        )

    if not ctx.ensure(kind, node, lambda: _children(ctx, site, kind), lambda: _after(create(), after)):
        return
    if (target_id := ctx.tid(kind, node.id)) is not None:
        ctx.patch_existing(kind, node, target_id, ctx.path(kind, "patch", **_site_segments(ctx, site, kind, node.id)))


def _after(op: Op | None, keys: list[str | None]) -> Op | None:
    if op is not None:
        op.after = [*op.after, *(k for k in keys if k)]
    return op


def plan_site_space(ctx: PlanContext, site: Node, node: Node, section: str | None) -> str | None:
    """Adopt, create or patch one site-space; the key of its create, if any."""
    kind = "site-space"
    title = ctx.title(kind, node)
    space = ref_id(node.data.get("space"))
    if space in ctx.content.restorable and ctx.tid("space", space) is None and ctx.tid(kind, node.id) is None:
        # A space brought back brings its site-spaces back with it: they are read, and
        # adopted, by the next round rather than made a second time now.
        ctx.plan.warnings.append(f"site-space {title!r} waits for its space to be brought back, then the next read")
        return None
    if not ctx.exists("space", space):
        ctx.skip(kind, node.id, title, f"its space is not copied ({space})", ("missing",))
        return None
    if section is not None and not ctx.exists("site-section", section):
        ctx.skip(kind, node.id, title, "its section is not copied", ("missing",))
        return None
    values = ctx.desired(kind, node)
    site_seg = ctx.seg("site", site.id)
    if ctx.producer(kind, node.id) is not None:  # the site-space its section's creation makes
        if values.get("condition") is not None:
            ctx.emit(Op(
                key=f"patch:{kind}:{node.id}", action="patch", kind=kind, source_id=node.id, title=title, method="PATCH",
                path=ctx.path(kind, "patch", site=site_seg, id=path_ref(kind, node.id)), body={"condition": values["condition"]},
            ))
        return None
    mapped = ctx.tid(kind, node.id)
    wanted_section = ctx.tid("site-section", section) if section else None
    stale: str | None = None
    if mapped is not None:
        live = ctx.target.get(kind, mapped)
        in_place = live is not None and ref_id(live.data.get("section")) == wanted_section and (section is None or wanted_section is not None)
        if in_place:
            ctx.patch_existing(kind, node, mapped, ctx.path(kind, "patch", site=site_seg, id=seg(mapped)))
            return None
        if ctx.idmap.origin(kind, node.id) != "created":
            ctx.skip(kind, node.id, title, "it is in another section on the target, and a site-space cannot move between sections", ("section", "position"))
            return None
        stale = mapped  # syncd made it in the wrong place: made again where it belongs, then deleted
    target_site = ctx.tid("site", site.id)
    if section is None and stale is None and mapped is None and target_site is not None and _children(ctx, site, "site-section"):
        ctx.skip(kind, node.id, title, "the target site has sections, so a site-space cannot be added at its root", ("missing",))
        return None
    body: dict[str, Any] = {"spaceId": Ref("space", space)}
    if section is not None:
        body["sectionId"] = Ref("site-section", section)
    op = ctx.create_op(
        kind, node, ctx.path(kind, "create", site=site_seg), body,
        Expect(_list_path(kind, ctx.org, site_seg), parent_field="section", parent=Ref("site-section", section) if section else None),
        serial=f"site:{site.id}:{kind}", want=ctx.want(kind, node, values), patch_path=ctx.path(kind, "patch", site=site_seg, id=path_ref(kind, node.id)),
    )
    if stale is not None:
        op.target_id = stale
        op.spec = {**(op.spec or {}), "replaces": stale, "replaces_path": ctx.path(kind, "delete", site=site_seg, id=seg(stale))}
        op.note = f"replaces {stale}, which syncd made in another section (a site-space cannot move between sections)"
        ctx.emit(op)
        return op.key
    if ctx.ensure(kind, node, lambda: _children(ctx, site, kind), lambda: op):
        return ctx.producer(kind, node.id)
    return None


def plan_adaptive_schema(ctx: PlanContext, site: Node) -> None:
    kind = "site-adaptive-schema"
    node = ctx.source.get(kind, f"{site.id}/{kind}")
    if node is None:
        return
    desired = ctx.desired(kind, node)["jsonSchema"]
    target_site = ctx.tid("site", site.id)
    current = (ctx.current(kind, f"{target_site}/{kind}") or {}).get("jsonSchema") if target_site else None
    if desired == (current if current is not None else DEFAULT_ADAPTIVE_SCHEMA):
        return
    ctx.emit(Op(
        key=f"patch:{kind}:{node.id}", action="patch", kind=kind, source_id=node.id, target_id=target_site,
        title=f"adaptive schema of {ctx.title('site', site)}", method="PUT",
        path=ctx.path(kind, "patch", site=ctx.seg("site", site.id)), body={"jsonSchema": desired},
    ))


def plan_site_settle(ctx: PlanContext, site: Node) -> None:
    """One settle step for the site when anything in it is made, or out of place as read."""
    spec = source_layout(ctx.source, site.id)
    target_site = ctx.tid("site", site.id)
    made = [key for key in ctx.site_ops.get(site.id, []) if ctx.keys[key].action == "create" and ctx.keys[key].kind in SITE_CHILDREN]
    preview: list[str] = [f"place {len(made)} new object(s), then check the layout"] if made else []
    moves: list[list[str]] = []  # [kind, target id] moved in the site's navigation: what a review shows
    if target_site is not None:
        layout = resolve_layout(spec, lambda ref: ctx.tid(ref.kind, ref.source_id))
        changes, blocked = layout_changes(layout, ctx.target, target_site)
        preview += [_describe(ctx, change) for change in changes]
        moves += [[change.kind, change.item] for change in changes if change.what == "move"]
        for item in blocked:
            source_id = ctx.to_source("site-space", item) if ctx.target.get("site-space", item) else ctx.to_source("site-section", item)
            ctx.skip("site-space" if ctx.target.get("site-space", item) else "site-section", source_id, item, "its path is used by another object of the target site (not syncd's): left as it is", ("path",))
    if not preview:
        return
    deletes = [op.key for op in ctx.plan.ops if op.action == "delete" and op.kind in SITE_CHILDREN and target_site and f"/sites/{seg(target_site)}/" in op.path]
    ctx.emit(
        Op(key=f"settle:site:{site.id}", action="settle", kind="site", source_id=site.id, target_id=target_site, title=ctx.title("site", site),
           recipe="settle-site", spec={"org": ctx.org, "site": Ref("site", site.id), **spec, "moves": moves}, preview=preview),
        after=[*made, *deletes, ctx.producer("site", site.id)],
    )


def _describe(ctx: PlanContext, change: Change) -> str:
    node = ctx.target.get(change.kind, change.item)
    name = ctx.title(change.kind, node) if node is not None else change.item
    if change.what == "move":
        return f"move {change.kind} {name!r}"
    if change.what in ("add", "remove"):
        return f"{change.what} section {name!r} {'to' if change.what == 'add' else 'from'} a group"
    if change.what == "path":
        return f"path of {change.kind} {name!r} -> {change.value!r}"
    return f"make {change.kind} {name!r} the default"


# ----- running ----------------------------------------------------------------------------------


async def create_section(op: Op, writer: Writer) -> Outcome:
    """Create a section with a space, map the site-space the service made for that space in
    it (from the answer, else from the listing), or delete it when the source section has
    none; then check the section against the source."""
    assert op.spec is not None and op.expect is not None and op.source_id is not None
    mapped = writer.idmap.target(op.kind, op.source_id)
    if mapped is not None and mapped != op.target_id:
        return outcome(op, "already-done", f"{op.kind} {op.source_id} is already mapped to {mapped}", mapped)
    try:
        site, space = writer.resolve(op.spec["site"]), writer.resolve(op.spec["space"])
        new_id, answer = await writer.create(op.key, (op.kind, op.source_id), op.method, writer.resolve_path(op.path), writer.resolve(op.body), writer.resolve_expect(op.expect))
    except Unresolved as exc:
        return outcome(op, "failed", f"cannot send: {exc}")
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", str(exc))
    writer.done_creating()
    fixes = 0
    try:
        made = _made_site_space(answer, new_id, space)
        if made is None:
            items = await writer.listing("target", _list_path("site-space", op.spec["org"], seg(site)))
            made = _made_site_space({"siteSpaces": items}, new_id, space)
        source_site_space = op.spec.get("site_space")
        if made is None:
            writer.counts.notes.append(f"section {op.title!r}: the site-space made with it was not found; the next round looks again")
        elif made in writer.idmap.sources_of("site-space"):
            pass  # a site-space copied already (moved into the site's first section by the service)
        elif source_site_space:
            await writer.record([("site-space", source_site_space, made, "created")])
        else:
            path = write_path("site-space", "delete", {"org": seg(op.spec["org"]), "site": seg(site), "id": seg(made)})
            await writer.call(f"{op.key}:seed", "site-space", None, "DELETE", path)
            fixes += 1
        fixes += await check_answer(op, writer, answer, op.spec.get("patch"))
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", f"made ({new_id}), then: {exc}", new_id, fixes)
    return outcome(op, "done", result_id=new_id, fixes=fixes)


def _made_site_space(answer: Any, section: str, space: str) -> str | None:
    """The site-space of `space` in a new section, from the section's answer or a listing
    (an item of the section's own answer may leave its section out)."""
    items = answer.get("siteSpaces") if isinstance(answer, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or ref_id(item.get("space")) != space:
            continue
        if ref_id(item.get("section")) == section or ("section" not in item and answer.get("id") == section):
            return str(item["id"])
    return None


async def read_site(writer: Writer, org: str, site: str) -> Snapshot:
    """The target site's sections, groups and site-spaces as listed now (positions as the
    listings give them); the three listings are read side by side (a round trip, not three)."""
    listed = await listings_side_by_side(writer, [_list_path(kind, org, seg(site)) for kind in SITE_CHILDREN])
    nodes: list[Node] = []
    for kind, items in zip(SITE_CHILDREN, listed, strict=True):
        for position, item in enumerate(items):
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                nodes.append(Node(kind, item["id"], ("site", site), position, item))
    return Snapshot("target", org, nodes)


async def settle_site(op: Op, writer: Writer) -> Outcome:
    """Put the target site's layout right, from what its listings show now."""
    assert op.spec is not None
    org = op.spec["org"]
    try:
        site = writer.resolve(op.spec["site"])
    except Unresolved as exc:
        return outcome(op, "failed", f"cannot settle: {exc}")
    layout = resolve_layout(op.spec, lambda ref: writer.idmap.target(ref.kind, ref.source_id))
    done, problems = 0, []

    async def send(change: Change) -> None:
        nonlocal done
        try:
            await _send(writer, op, org, site, change)
            done += 1
        except ApiError as exc:
            if change.what == "move" and exc.status == 400 and change.fallback is not None:
                # Read as "this reference is not accepted here": the same place, named the other way, once.
                other = replace(change, anchor=change.fallback[0], fallback=None)
                try:
                    await _send(writer, op, org, site, other, key_suffix=":other-way")
                    done += 1
                    return
                except ApiError as again:
                    exc = again
            problems.append(f"{change.what} {change.kind} {change.item}: {exc}")

    async def send_in_lanes(changes: list[Change]) -> None:
        """Each lane's changes one after another, the lanes side by side (`lane`)."""
        lanes: dict[tuple[str, ...], list[Change]] = {}
        for change in changes:
            lanes.setdefault(lane(change), []).append(change)

        async def one_lane(queue: list[Change]) -> None:
            for change in queue:
                await send(change)

        async with anyio.create_task_group() as tg:
            for queue in lanes.values():
                tg.start_soon(one_lane, queue)

    try:
        live = await read_site(writer, org, site)
        membership = membership_changes(layout, live, site)
        for change in membership:
            await send(change)
        if membership:  # where a section lands when it joins or leaves a group is the service's choice
            live = await read_site(writer, org, site)
        await send_in_lanes(order_changes(layout, live, site))
        changes, blocked = path_and_default_changes(layout, live, site)
        await send_in_lanes(changes)
        problems += [f"path of {item}: held by another object of the target site" for item in blocked]
    except ApiError as exc:
        problems.append(f"the target site could not be listed: {exc}")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return outcome(op, "failed", "; ".join(problems[:3]) + more, fixes=done)
    return outcome(op, "done", fixes=done)


async def _send(writer: Writer, op: Op, org: str, site: str, change: Change, key_suffix: str = "") -> None:
    segments = {"org": seg(org), "site": seg(site), "id": seg(change.item)}
    key = f"{op.key}:{change.what}:{change.item}{key_suffix}"
    source = writer.idmap.sources_of(change.kind).get(change.item)
    if change.what == "move":
        ref_type = (BY_NAME[change.kind].writes.move_ref or ("site-section", ""))[0]  # type: ignore[union-attr]
        body = {"position": {change.anchor[0]: {"type": ref_type, MOVE_KEY[change.kind]: change.anchor[1]}}} if change.anchor else {}
        await writer.call(key, change.kind, source, "POST", write_path(change.kind, "move", segments), body)
    elif change.what == "remove":
        path = write_path("site-section-group", "remove-section", {**segments, "id": seg(str(change.value)), "section": seg(change.item)})
        await writer.call(key, change.kind, source, "DELETE", path)
    elif change.what == "add":
        path = write_path("site-section-group", "add-section", {**segments, "id": seg(str(change.value))})
        await writer.call(key, change.kind, source, "POST", path, {"sectionId": change.item})
    elif change.what == "path":
        await writer.call(key, change.kind, source, "PATCH", write_path(change.kind, "patch", segments), {"path": change.value})
    elif change.what == "default-section":
        await writer.call(key, "site", None, "PATCH", write_path("site", "patch", {**segments, "id": seg(site)}), {"defaultSiteSection": change.item})
    elif change.container is None:
        await writer.call(key, "site", None, "PATCH", write_path("site", "patch", {**segments, "id": seg(site)}), {"defaultSiteSpace": change.item})
    else:
        path = write_path("site-section", "patch", {**segments, "id": seg(change.container)})
        await writer.call(key, "site-section", None, "PATCH", path, {"defaultSiteSpace": change.item})


__all__ = ["Layout", "create_section", "layout_changes", "plan_site_settles", "plan_sites", "resolve_layout", "settle_site", "source_layout"]
