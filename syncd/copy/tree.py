"""How collections and spaces are copied: the content tree, the spaces' custom field values
and content, and their order.

- Collections parents first, then spaces: each is adopted (same title under the same
  parent), created, or patched. A create's answer is checked and what differs is patched.
- A new space's content comes by duplicate + transfer when one token reaches both
  organizations (`copy_by_duplicate`: the duplicate made in the SOURCE is transferred, or
  deleted whatever happens), else by a content import from the source space's URL.
- Order and parents are put right by one settle step (`settle_tree`) once everything is made:
  it lists the target's collections and spaces and moves what is not where the source has
  it, from that listing, with the fewest moves.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import anyio

from syncd.api import ApiError, NotFound
from syncd.catalog import BY_NAME, list_path, write_path
from syncd.copy.content import IMPORTED, Outline, count_pages, imported_mark, outline_digest
from syncd.copy.context import PlanContext, seg
from syncd.copy.model import Node, Snapshot
from syncd.copy.observe import Outcome, check_answer, outcome
from syncd.copy.ops import Expect, Op, Ref, expect_from_json, expect_to_json, path_ref
from syncd.copy.rules import ref_id, space_content, text, tree_parent
from syncd.copy.writer import CallFailed, Unresolved, Writer, get_path, listings_side_by_side
from syncd.logging import get_logger
from syncd.ordering import Anchor, apply_move, moves_to_order, moves_waiting

log = get_logger("syncd.copy")

TREE = ("collection", "space")
SETTLE_KEY = "settle:tree:order"


def tree_key(org: str, parent: str | None) -> tuple[str, str]:
    return ("collection", parent) if parent else ("organization", org)


def serial(parent: str | None) -> str:
    """Creates under one parent take turns (`Op.serial`; side by side where their titles
    tell them apart, `syncd.copy.overlap`)."""
    return f"tree:{parent or ''}"


# ----- planning -------------------------------------------------------------------------------


def plan_tree(ctx: PlanContext) -> list[str | None]:
    """Collections (parents first), then spaces; returns the source parents in that order."""
    order: list[str | None] = [None]
    seen: set[str] = set()
    index = 0
    while index < len(order):
        parent = order[index]
        index += 1
        for node in ctx.source.children("collection", tree_key(ctx.source.org, parent)):
            if node.id not in seen:
                seen.add(node.id)
                if plan_node(ctx, "collection", node, parent):
                    order.append(node.id)
    for node in ctx.source.of_kind("collection"):
        if node.id not in seen:
            ctx.skip("collection", node.id, ctx.title("collection", node), "its parent collection is not in the source: not copied", ("missing",))
    reachable = set(order)
    for parent in order:
        for node in ctx.source.children("space", tree_key(ctx.source.org, parent)):
            plan_node(ctx, "space", node, parent)
    for node in ctx.source.of_kind("space"):
        if tree_parent(node) is not None and tree_parent(node) not in reachable:
            ctx.skip("space", node.id, ctx.title("space", node), "its parent collection is not copied", ("missing",))
    return order


def plan_node(ctx: PlanContext, kind: str, node: Node, parent: str | None) -> bool:
    """Adopt, create or patch one collection or space; whether it is (or will be) there."""
    title = ctx.title(kind, node)
    if parent is not None and not ctx.exists("collection", parent):
        ctx.skip(kind, node.id, title, "its parent collection is not copied", ("missing",))
        return False
    values = ctx.desired(kind, node)
    if text(values.get("title")) is None:
        ctx.skip(kind, node.id, title, "its title is missing or not text: not copied", ("missing",))
        return False
    target_parent = ctx.tid("collection", parent) if parent else None
    parent_ref = Ref("collection", parent) if parent else None
    listing = ctx.list_path(kind)
    expect = Expect(listing, parent_field="parent", parent=parent_ref)
    patch_path = ctx.path(kind, "patch", id=path_ref(kind, node.id))

    def create() -> Op:
        want = ctx.want(kind, node, values)
        if kind == "space" and node.id in ctx.content.restorable:
            return Op(
                key=f"create:space:{node.id}", action="create", kind="space", source_id=node.id, title=title, recipe="undelete",
                method="POST", path=ctx.path("space", "restore", id=seg(node.api_id)), want=want or None, spec={"patch": patch_path},
                note="deleted from this organization and still in the restore window: brought back, history included",
            )
        if kind == "space" and ctx.content.same_credentials:
            return duplicate_op(ctx, node, parent, parent_ref, expect, want, patch_path)
        body = ctx.create_body(kind, node, values)
        return ctx.create_op(kind, node, ctx.path(kind, "create"), body, expect, serial=serial(parent), want=want, patch_path=patch_path)

    def siblings() -> list[Node]:
        if parent is not None and target_parent is None:
            return []  # its parent is made by this plan: nothing there to adopt
        return ctx.target.children(kind, tree_key(ctx.org, target_parent))

    if not ctx.ensure(kind, node, siblings, create):
        return False
    target_id = ctx.tid(kind, node.id)
    if target_id is not None:
        ctx.patch_existing(kind, node, target_id, ctx.path(kind, "patch", id=seg(target_id)))
    elif kind == "space" and not ctx.content.same_credentials:
        ctx.report_unwritable(kind, node, None)
    return True


def duplicate_op(ctx: PlanContext, node: Node, parent: str | None, parent_ref: Ref | None, expect: Expect, want: dict[str, Any], patch_path: str) -> Op:
    """A new space as a duplicate of the source space, transferred into the target."""
    duplicate_expect = Expect(
        list_path("space", {"org": seg(ctx.source.org)}), side="source", parent_field="parent", parent=parent, exclude=(node.api_id,)
    )
    return Op(
        key=f"create:space:{node.id}", action="create", kind="space", source_id=node.id, title=ctx.title("space", node),
        recipe="duplicate-transfer", method="POST", path=write_path("space", "duplicate", {"id": seg(node.api_id)}), side="source",
        expect=expect, serial=serial(parent), want=want or None,
        spec={"duplicate": expect_to_json(duplicate_expect), "organization": ctx.org, "collection": parent_ref, "patch": patch_path},
        note="duplicated in the source and transferred (content included); the duplicate never stays in the source",
    )


def plan_values(ctx: PlanContext) -> None:
    """Custom field values of spaces (one PATCH per space, after the fields exist)."""
    known = {str(n.data.get("name")) for n in ctx.target.of_kind("custom-field")}
    fields = {str(n.data.get("name")): n.id for n in ctx.source.of_kind("custom-field")}
    known |= {name for name, source_id in fields.items() if ctx.exists("custom-field", source_id)}
    for node in ctx.source.of_kind("space"):
        if not ctx.exists("space", node.id):
            continue
        target_id = ctx.tid("space", node.id)
        desired = ctx.desired("space", node).get("customFields") or {}
        current = ((ctx.current("space", target_id) or {}).get("customFields") or {}) if target_id else {}
        values: dict[str, Any] = {}
        for name in sorted(set(desired) | set(current)):
            if desired.get(name) == current.get(name):
                continue
            if name not in known:
                ctx.skip("space", node.id, ctx.title("space", node), f"custom field {name!r} is not on the target: its value is not copied", ("customFields",))
                continue
            values[name] = {"value": desired.get(name)}
        if values:
            ctx.emit(
                Op(
                    key=f"patch:space-custom-field-value:{node.id}", action="patch", kind="space-custom-field-value", source_id=node.id,
                    target_id=target_id, title=ctx.title("space", node), method="PATCH",
                    path=write_path("space-custom-field-value", "patch", {"space": ctx.seg("space", node.id)}), body={"values": values},
                ),
                after=[ctx.producer("custom-field", fields.get(name)) for name in values],
            )


def plan_content(ctx: PlanContext) -> None:
    """Content of spaces that differ (or are new): imported from the source space's URL, or
    from the site syncd serves of it (see `ContentStrategy`); run by `content.bring_content`.
    Compared by what the pages say (`rules.space_content`); one import per source revision."""
    for node in ctx.source.of_kind("space"):
        if not ctx.exists("space", node.id):
            continue
        target_id = ctx.tid("space", node.id)
        wanted = space_content(ctx.source, node.id)
        if target_id is None and (ctx.content.same_credentials or node.id in ctx.content.restorable or wanted == ((), ())):
            continue  # a duplicate brings its content, an undeleted space has its own; an empty space needs none
        if target_id is not None and wanted == space_content(ctx.target, target_id):
            continue
        title = ctx.title("space", node)
        revision = node.data.get("revision")
        if target_id is not None and ctx.idmap_target(IMPORTED, node.id) == imported_mark(target_id, revision):
            if ctx.content.served(node) and report_unheld_files(ctx, node, title) and wanted[0] == space_content(ctx.target, target_id)[0]:
                continue  # only the files the backup does not hold are missing: announced
            ctx.skip("space", node.id, title, f"space {title!r}: its content was imported from source revision {revision} already and still "
                     "differs; not imported again (see `mirror verify`)")
            continue
        path = ctx.path("space", "import", id=ctx.seg("space", node.id))
        tree = page_outline(ctx.source, node.id)
        spec: dict[str, Any] = {
            "revision": revision, "outline": outline_digest(tree), "pages": count_pages(tree),
            "lock": ctx.desired("space", node).get("editMode") == "locked",
        }
        if ctx.content.served(node):
            op = Op(
                key=f"content:space:{node.id}", action="content", kind="space", source_id=node.id, target_id=target_id, title=title,
                recipe="import-served", method="POST", path=path, body={"url": SERVED_URL, "source": "website"}, spec=spec,
                note="imports the space as syncd serves it (pages and files as read)",
            )
            report_unheld_files(ctx, node, title)
        else:
            url = ctx.content.import_url(node)
            if url is None or not ctx.content.can_import(node):
                why = "it has no URL" if url is None else f"the source space is {node.data.get('visibility') or 'not shareable'} and the target's token cannot read it"
                state = "left with its current content" if target_id else "created empty"
                ctx.skip("space", node.id, title, f"space {title!r} {state}: its content cannot be copied ({why}); copy it by hand or use one token for both", ("pages", "files"))
                continue
            op = Op(
                key=f"content:space:{node.id}", action="content", kind="space", source_id=node.id, target_id=target_id, title=title,
                recipe="import", method="POST", path=path, body={"url": url, "source": "website"}, spec=spec,
                note="imports the source space's content from its URL",
            )
        if spec["lock"]:
            lock_last(ctx, node.id)
            op.note += "; locked once its content is in"
        ctx.emit(op, after=[f"patch:space:{node.id}"])


def lock_last(ctx: PlanContext, source_id: str) -> None:
    """Content first, lock last: the create's check and the patch of a space that gets content
    leave `editMode` to the content op, which locks the space once the import is done."""
    create = ctx.keys.get(f"create:space:{source_id}")
    if create is not None and create.want:
        create.want.pop("editMode", None)
    if create is not None and isinstance(create.body, dict):
        create.body.pop("editMode", None)
    patch = ctx.keys.get(f"patch:space:{source_id}")
    if patch is not None and isinstance(patch.body, dict) and patch.body.get("editMode") == "locked":
        del patch.body["editMode"]
        if not patch.body:
            ctx.plan.ops.remove(patch)
            del ctx.keys[patch.key]


def page_outline(view: Snapshot, space_id: str) -> Outline:
    """The source space's page tree as `content.outline` reads an answer."""

    def below(parent: tuple[str, str]) -> Outline:
        return [[str(p.data.get("title")), below(("page", p.id))] for p in view.children("page", parent)]

    return below(("space", space_id))


SERVED_URL = "<the space as syncd serves it>"
"""Stands for the import URL in a plan: the content source makes it when the op runs."""


def report_unheld_files(ctx: PlanContext, node: Node, title: str) -> bool:
    """Files whose bytes a backup does not hold cannot travel: announced, not hidden. Whether
    there are any."""
    held = ctx.content.files_held
    if held is None:
        return False
    missing = [n for n in ctx.source.children("file", ("space", node.id)) if n.id not in held]
    if missing:
        names = ", ".join(str(n.data.get("name")) for n in missing[:5])
        ctx.skip("space", node.id, title, f"{len(missing)} file(s) of space {title!r} are not in the backup ({names}): "
                 "not restored (back up with --with-files)", ("files",))
    return bool(missing)


def plan_tree_settle(ctx: PlanContext, parents: list[str | None]) -> None:
    """One settle step for the whole tree, when anything is new or out of place as read."""
    containers: list[dict[str, Any]] = []
    preview: list[str] = []
    moves: list[list[Any]] = []  # [kind, target id, source parent or None]: what a review shows
    depth: dict[str | None, int] = {None: 0}
    for parent in parents:
        if parent is not None and not ctx.exists("collection", parent):
            continue
        node = ctx.source.get("collection", parent)
        depth[parent] = depth.get(tree_parent(node), 0) + 1 if node is not None else 0
        target_parent = ctx.tid("collection", parent) if parent else None
        entry: dict[str, Any] = {"parent": Ref("collection", parent) if parent else None, "depth": depth[parent]}
        for kind in TREE:
            desired = [n.id for n in ctx.source.children(kind, tree_key(ctx.source.org, parent)) if ctx.exists(kind, n.id)]
            entry[kind] = [Ref(kind, source_id) for source_id in desired]
            new = [s for s in desired if ctx.tid(kind, s) is None]
            if new:
                preview.append(f"place {len(new)} new {kind}(s) under {_where(ctx, parent)}")
            if parent is not None and target_parent is None:
                continue
            live = [n.id for n in ctx.target.children(kind, tree_key(ctx.org, target_parent))]
            mapped = [t for s in desired if (t := ctx.tid(kind, s)) is not None]
            for item, _ in moves_to_order(mapped, live):
                preview.append(f"move {kind} {ctx.title(kind, ctx.target.get(kind, item) or Node(kind, item, None, None, {}))!r} under {_where(ctx, parent)}")
                moves.append([kind, item, parent])
        containers.append(entry)
    if not preview:
        return
    ctx.emit(
        Op(key=SETTLE_KEY, action="settle", kind="tree", source_id=None, title="order of collections and spaces", recipe="settle-tree",
           spec={"org": ctx.org, "containers": containers, "moves": moves}, preview=preview),
        after=[op.key for op in ctx.plan.ops if op.kind in TREE and op.action == "create"],
    )


def _where(ctx: PlanContext, parent: str | None) -> str:
    node = ctx.source.get("collection", parent)
    return f"collection {ctx.title('collection', node)!r}" if node is not None else "the root"


# ----- running ----------------------------------------------------------------------------------


async def copy_by_duplicate(op: Op, writer: Writer) -> Outcome:
    """Duplicate the source space (in the source), transfer the duplicate into the target,
    check it. Whatever happens, the duplicate does not stay in the source."""
    assert op.source_id is not None and op.spec is not None and op.expect is not None
    mapped = writer.idmap.target("space", op.source_id)
    if mapped is not None and mapped != op.target_id:
        return outcome(op, "already-done", f"space {op.source_id} is already mapped to {mapped}", mapped)
    try:
        duplicate_expect = writer.resolve_expect(expect_from_json(op.spec["duplicate"]))
        body = {"organization": op.spec["organization"]}
        if op.spec.get("collection") is not None:
            body["collection"] = writer.resolve(op.spec["collection"])
        target_expect = writer.resolve_expect(op.expect)
    except Unresolved as exc:
        return outcome(op, "failed", f"cannot send: {exc}")
    try:
        duplicate, _ = await writer.create(f"{op.key}:duplicate", ("space-duplicate", op.source_id), "POST", op.path, None, duplicate_expect, side="source")
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", f"duplicate: {exc}")
    transferred: str | None = None
    try:
        path = write_path("space", "transfer", {"id": seg(duplicate)})
        transferred, answer = await writer.create(op.key, ("space", op.source_id), "POST", path, body, target_expect)
        writer.done_creating()
        await writer.record([], drops=[("space-duplicate", op.source_id)])
        fixes = await check_answer(op, writer, answer, op.spec.get("patch"))
        return outcome(op, "done", result_id=transferred, fixes=fixes)
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", f"transfer: {exc}")
    finally:
        writer.done_creating()
        if transferred is None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await settle_duplicate(writer, op.source_id, duplicate, moved=target_expect)


async def undelete(op: Op, writer: Writer) -> Outcome:
    """Bring back a space deleted from its own organization (the same id, its history and
    comments): then it stands for itself in the id map, as a space syncd did not make."""
    assert op.source_id is not None
    path = writer.resolve_path(op.path)
    try:
        answer = await writer.call(op.key, "space", op.source_id, op.method, path)
    except ApiError as exc:
        try:  # after a lost answer the space may be back already
            answer = await writer.read("target", write_path("space", "get", {"id": seg(op.source_id)}))
        except ApiError:
            return outcome(op, "failed", str(exc))
        if not isinstance(answer, dict) or answer.get("deletedAt"):
            return outcome(op, "failed", str(exc))
    space_id = answer.get("id") if isinstance(answer, dict) and isinstance(answer.get("id"), str) else op.source_id
    await writer.record([("space", op.source_id, space_id, "adopted")])
    try:
        fixes = await check_answer(op, writer, answer, (op.spec or {}).get("patch"))
    except ApiError as exc:
        return outcome(op, "failed", f"brought back, then: {exc}", space_id)
    return outcome(op, "done", result_id=space_id, fixes=fixes)


async def settle_duplicate(writer: Writer, source_id: str, duplicate: str, moved: Expect | None = None) -> str | None:
    """Where a duplicate made for a transfer is now: in the target (its transfer went
    through: it is mapped), or in the source (it is deleted there). Returns the target id, or
    None. Errors are noted, the duplicate entry stays for the next run to settle.

    The service may give a transferred space a new id: then the duplicate's id is unknown
    (404) once the transfer went through, and the space is what appeared in the target's
    listing (`moved`, the transfer's expectation, looked at when given; otherwise the
    transfer's own intent, left open, is settled that way by `recover`). Only an id the
    service answered or listed is mapped."""
    pair = writer.pair
    try:
        found = await writer.read("source", write_path("space", "get", {"id": seg(duplicate)}))
    except NotFound:
        found = None
    except ApiError as exc:
        writer.counts.notes.append(f"duplicate {duplicate} of space {source_id}: could not be checked ({exc}); left for the next run")
        return None
    org = found.get("organization") if isinstance(found, dict) else None
    try:
        if found is None and moved is not None and writer.idmap.target("space", source_id) is None:
            item = await writer.find_made(moved, ("space", source_id), writer.run)
            new_id = get_path(item, moved.id_field) if item is not None else None
            if isinstance(new_id, str) and new_id:
                await writer.record([("space", source_id, new_id, "created")], drops=[("space-duplicate", source_id)])
                writer.counts.notes.append(f"duplicate {duplicate} of space {source_id}: transferred as {new_id}")
                return new_id
        if found is None or found.get("deletedAt"):
            await writer.record([], drops=[("space-duplicate", source_id)])
            return None
        if org == pair.target_org:
            await writer.record([("space", source_id, duplicate, "created")], drops=[("space-duplicate", source_id)])
            return duplicate
        await writer.call(f"cleanup:space-duplicate:{source_id}", "space-duplicate", source_id, "DELETE",
                          write_path("space", "delete", {"id": seg(duplicate)}), side="source", drops=[("space-duplicate", source_id)])
        writer.counts.notes.append(f"duplicate {duplicate} of space {source_id} deleted from the source")
    except (ApiError, CallFailed) as exc:
        writer.counts.notes.append(f"duplicate {duplicate} of space {source_id}: could not be removed from the source ({exc}); left for the next run")
    return None


def _placed(listed: list[list[Any]]) -> tuple[dict[tuple[str, str], str | None], dict[tuple[str, str | None], list[str]]]:
    """(per (kind, id), its parent; per (kind, parent), its items' ids in order) of the
    org-wide listings of `TREE`. Only ids are kept: the listings' whole objects (every space of
    the organization) are dropped before the moves, not held through them."""
    parent_of: dict[tuple[str, str], str | None] = {}
    order: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for kind, items in zip(TREE, listed, strict=True):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                parent = parent_of[(kind, item["id"])] = ref_id(item.get("parent"))
                order[(kind, parent)].append(item["id"])
    return parent_of, order


async def settle_tree(op: Op, writer: Writer) -> Outcome:
    """Put collections and spaces where the source has them, from the target's listings."""
    assert op.spec is not None
    org = seg(op.spec["org"])
    try:
        parent_of, order = _placed(await listings_side_by_side(writer, [list_path(kind, {"org": org}) for kind in TREE]))
    except ApiError as exc:
        return outcome(op, "failed", f"the target could not be listed: {exc}")
    sources = {kind: writer.idmap.sources_of(kind) for kind in TREE}
    moves, problems = 0, []

    async def settle(entry: dict[str, Any]) -> None:
        """One container: its collections, then its spaces, each with the fewest moves."""
        nonlocal moves
        try:
            parent = writer.resolve(entry["parent"])
        except Unresolved:
            return
        for kind in TREE:
            desired = [t for ref in entry[kind] if (t := writer.idmap.target(ref.kind, ref.source_id)) and (kind, t) in parent_of]
            planned = moves_to_order(desired, order[(kind, parent)])
            done = [anyio.Event() for _ in planned]

            async def move(position: int, item: str, anchor: Anchor | None, waits: int | None, kind: str = kind) -> None:
                """One move, once the sibling it names is in place (`moves_waiting`)."""
                nonlocal moves
                try:
                    if waits is not None:
                        await done[waits].wait()
                    body: dict[str, Any] = {}
                    if parent_of[(kind, item)] != parent:
                        body["parent"] = parent
                    if anchor is not None:
                        ref_type, key = BY_NAME[kind].writes.move_ref or ("space", "space")  # type: ignore[union-attr]
                        body["position"] = {anchor[0]: {"type": ref_type, key: anchor[1]}}
                    try:
                        await writer.call(f"{op.key}:{kind}:{item}", kind, sources[kind].get(item), "POST", write_path(kind, "move", {"id": seg(item)}), body)
                    except ApiError as exc:
                        problems.append(f"move {kind} {item}: {exc}")
                        return
                    moves += 1
                    order[(kind, parent_of[(kind, item)])].remove(item)
                    parent_of[(kind, item)] = parent
                    apply_move(order[(kind, parent)], item, anchor)
                finally:
                    done[position].set()

            async with anyio.create_task_group() as tg:  # moves anchored on siblings that stay put go side by side
                for position, ((item, anchor), waits) in enumerate(zip(planned, moves_waiting(planned), strict=True)):
                    tg.start_soon(move, position, item, anchor, waits)

    # Containers of one depth side by side, depths in order: an item changes parent in the
    # container of its new parent, whose own ancestors were all put in place one depth before,
    # so no move ever puts a collection under one of its own descendants.
    levels: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for entry in op.spec["containers"]:
        levels[int(entry.get("depth", 0))].append(entry)
    for level in sorted(levels):
        async with anyio.create_task_group() as tg:
            for entry in levels[level]:
                tg.start_soon(settle, entry)
    if problems:
        return outcome(op, "failed", "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""), fixes=moves)
    return outcome(op, "done", fixes=moves)


__all__ = [
    "SERVED_URL",
    "copy_by_duplicate",
    "plan_content",
    "plan_tree",
    "plan_tree_settle",
    "plan_values",
    "settle_duplicate",
    "settle_tree",
    "undelete",
]
