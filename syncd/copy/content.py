"""How a space's content reaches the target by an import, right at every open point the spec
leaves about imports (docs/concepts/open-points.md, rows import-existing-pages, locked-space,
import-style).

- Content first, lock last: a space that must end `locked` gets its content while `live`;
  a target space found locked is unlocked for the import and locked again (the run says so).
- Once per space and source revision: a done import is remembered in the id map
  (`space-import`: source space -> "target@revision"); the planner does not import the same
  revision into the same space again, and content is compared by what pages say
  (`meaning`), so an importer's own markdown style is no reason to import again.
- Never stack imports: the spec does not say that an import replaces what a space holds. An
  import goes into a space holding pages only where the tenant is known to replace them
  (observed once, kept per tenant: `journal.tenant_fact`). Elsewhere the content comes by a
  fresh space: create it, import into it, learn from it what the tenant does (a second
  import of the same content: same page count, it replaces; more, it adds and the fresh
  space is made again), check its page tree, move it into the old space's place, repoint the
  old space's site-spaces, map it, and only then delete the old space.
- An import is sent once (`Writer.send_once`) and is done when the space shows the revision
  it answered (row import-completion: a service may answer first); after a lost answer,
  whether it took effect is read from the space's revision, never assumed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from syncd.api import ApiError
from syncd.catalog import list_path, write_path
from syncd.copy import journal
from syncd.copy.context import seg
from syncd.copy.import_bound import ATTEMPTS
from syncd.copy.observe import Outcome, outcome
from syncd.copy.ops import Expect, Op, Ref
from syncd.copy.rules import ref_id
from syncd.copy.writer import CallFailed, Unresolved, Writer
from syncd.logging import get_logger

log = get_logger("syncd.copy")

IMPORT_FACT = "content-import"
"""Tenant fact: what an import does to the pages a space holds ("replaces" or "adds")."""
IMPORTED = "space-import"
"""Id-map kind: source space -> "target space@source revision" of the last import done."""
FRESH = "space-fresh"
"""Id-map kind: source space -> a fresh target space being filled (not yet swapped in)."""

__all__ = ["FRESH", "IMPORTED", "IMPORT_FACT", "Outline", "bring_content", "count_pages", "imported_mark", "outline", "outline_digest"]


def imported_mark(target_id: str, revision: Any) -> str:
    return f"{target_id}@{revision}"


Outline = list[Any]
"""A page tree as nested [title, children] lists: what a fresh space is checked by."""


def outline(pages: Any) -> Outline:
    """The outline of a `{pages}` answer's page list (anything malformed is left out)."""
    return [[str(p.get("title")), outline(p.get("pages"))] for p in (pages if isinstance(pages, list) else []) if isinstance(p, dict)]


def outline_digest(tree: Outline) -> str:
    """A short digest of an outline (the planner's, of the source; the runner's, as read)."""
    return hashlib.sha256(json.dumps(tree, ensure_ascii=False).encode()).hexdigest()[:16]


def count_pages(tree: Outline) -> int:
    return sum(1 + count_pages(children) for _, children in tree)


class _Space:
    """Reads of one target space (its record and its page tree) through the writer."""

    def __init__(self, writer: Writer, space_id: str) -> None:
        self.writer, self.id = writer, space_id

    async def record(self) -> dict[str, Any]:
        data = await self.writer.read("target", write_path("space", "get", {"id": seg(self.id)}))
        return data if isinstance(data, dict) else {}

    async def pages(self) -> Outline:
        data = await self.writer.read("target", f"/v1/spaces/{seg(self.id)}/content/pages")
        return outline(data.get("pages") if isinstance(data, dict) else None)

    async def set_mode(self, key: str, source_id: str | None, mode: str) -> None:
        await self.writer.call(key, "space", source_id, "PATCH", write_path("space", "patch", {"id": seg(self.id)}), {"editMode": mode})


def look_seconds(writer: Writer) -> float:
    """How long a lost import's effect is looked for before it is sent again (a service may
    answer an import before its content is in, row import-completion): four of the client's
    first retry waits, 2 s with the default `retry.initial_wait` of 0.5 s, never under 0.2 s."""
    return max(4 * writer.client("target").retry.initial_wait, 0.2)
SETTLE_SECONDS = 60.0
"""How long the revision an import answered may take to become the space's active one."""


async def _within(check: Callable[[], Awaitable[bool]], seconds: float) -> bool:
    """Whether `check` holds within `seconds`, looked at with growing pauses (0.05 s to 1 s)."""
    deadline, pause = anyio.current_time() + seconds, 0.05
    while not await check():
        if anyio.current_time() + pause > deadline:
            return False
        await anyio.sleep(pause)
        pause = min(pause * 2, 1.0)
    return True


async def _import(writer: Writer, key: str, source_id: str | None, space: _Space, body: dict[str, Any], before: Any = None) -> None:
    """One import into `space`, sent once, and done only when the space shows it: the spec
    does not say that an import is done when it answers, so the revision it answered is waited
    for; after a lost answer, a new revision appearing within `look_seconds` is its effect.
    `before`: the space's revision as just read (read here when not given)."""
    bound = writer.imports
    for attempt in range(1, ATTEMPTS + 1):
        async with bound.limiter:
            refused_before = bound.refusals()
            try:
                await _import_one(writer, key, source_id, space, body, before)
            except ApiError:
                # Refused (an answer came): sent again only when the content source shed
                # connections meanwhile, once fewer imports are at once (`import_bound`).
                if not bound.learn(source_id, refused_before) or attempt == ATTEMPTS:
                    raise
                bound.resent += 1
                log.info("content.import_resent", space=source_id, attempt=attempt + 1, at_once=bound.width, per_import=bound.per_import)
                before = None
                continue
            bound.learn(source_id, None)
            return


async def _import_one(writer: Writer, key: str, source_id: str | None, space: _Space, body: dict[str, Any], before: Any) -> None:
    if before is None:
        before = (await space.record()).get("revision")

    async def moved() -> bool:
        return (await space.record()).get("revision") != before

    async def applied() -> bool:
        return await _within(moved, look_seconds(writer))

    path = f"/v1/spaces/{seg(space.id)}/content/import"
    answer = await writer.send_once(key, "space", source_id, "POST", path, body, applied, journal_body=_stored(writer, body))
    wanted = answer.get("revision") if isinstance(answer, dict) else None

    async def active() -> bool:
        return (await space.record()).get("revision") == wanted if isinstance(wanted, str) else await moved()

    if not await _within(active, SETTLE_SECONDS):
        raise CallFailed(f"the import answered revision {str(wanted)[:80]!r}, and the space did not show it within {SETTLE_SECONDS:g} s")


def _stored(writer: Writer, body: dict[str, Any]) -> dict[str, Any]:
    """The import's body as the journal keeps it: a capability URL is a secret while it lives
    (anyone holding it reads the space), so it is stored without it, and without a password."""
    if writer.publisher is None or not isinstance(body.get("url"), str):
        return body
    return {**body, "url": writer.publisher.shown(body["url"])}


async def _import_url(op: Op, writer: Writer) -> str:
    if op.recipe == "import-served":
        if writer.publisher is None:
            raise CallFailed("this run has no content source to serve the space from")
        assert op.source_id is not None
        return await writer.publisher.publish(op.source_id)
    return str((op.body or {}).get("url"))


async def bring_content(op: Op, writer: Writer) -> Outcome:
    """Import the source space's content into its target space (see the module docstring)."""
    assert op.source_id is not None
    try:
        return await _bring_content(op, writer)
    finally:
        if op.recipe == "import-served" and writer.publisher is not None:
            writer.publisher.withdraw(op.source_id)


async def _bring_content(op: Op, writer: Writer) -> Outcome:
    assert op.source_id is not None
    spec = op.spec or {}
    try:
        target_id = writer.resolve(Ref("space", op.source_id))
        url = await _import_url(op, writer)
    except Unresolved as exc:
        return outcome(op, "failed", f"cannot send: {exc}")
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", _shown(writer, str(exc)))
    body = {**(op.body or {}), "url": url}
    revision = spec.get("revision")
    notes: list[str] = []
    try:
        space = _Space(writer, target_id)
        record = await space.record()
        current = await space.pages()
        behaviour = await writer.db(journal.tenant_fact, writer.pair.target_tenant, IMPORT_FACT)
        if current and behaviour != "replaces":
            target_id = await _by_fresh_space(op, writer, space, record, body, notes)
        else:
            await _in_place(op, writer, space, record, body, bool(current), notes)
            target_id = space.id
        await writer.record([(IMPORTED, op.source_id, imported_mark(target_id, revision), "created")])
        if spec.get("lock"):
            await _Space(writer, target_id).set_mode(f"{op.key}:lock", op.source_id, "locked")
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", "; ".join([*notes, _shown(writer, str(exc))]))
    finally:
        writer.counts.notes.extend(f"space {op.title!r}: {note}" for note in notes)
    _log_served(op, writer)
    return outcome(op, "done", result_id=target_id, fixes=len(notes))


async def _in_place(op: Op, writer: Writer, space: _Space, record: dict[str, Any], body: dict[str, Any], held: bool, notes: list[str]) -> None:
    """Import into the space itself: it is empty, or the tenant replaces what is there."""
    locked = record.get("editMode") == "locked"
    if locked:
        await space.set_mode(f"{op.key}:unlock", op.source_id, "live")
        notes.append("was locked: unlocked for its content import")
    await _import(writer, op.key, op.source_id, space, body, None if locked else record.get("revision"))
    if held:
        after = await space.pages()
        expected = (op.spec or {}).get("pages")
        if isinstance(expected, int) and count_pages(after) > expected:
            await writer.db(journal.remember_tenant_fact, writer.run, writer.pair.target_tenant, IMPORT_FACT, "adds")
            raise CallFailed(f"the import added to the {count_pages(after) - expected} pages already there: the next round replaces the space")
    if locked:
        notes.append("locked again after its import" if (op.spec or {}).get("lock") else "left live, as in the source")


async def _fresh(op: Op, writer: Writer, record: dict[str, Any], parent: str | None) -> _Space:
    """A new empty space beside the old one (a fresh space left by an earlier run goes first)."""
    assert op.source_id is not None
    left = writer.idmap.target(FRESH, op.source_id)
    if left is not None:
        await writer.call(f"{op.key}:fresh-leftover", FRESH, op.source_id, "DELETE", write_path("space", "delete", {"id": seg(left)}), drops=[(FRESH, op.source_id)])
    org = writer.pair.target_org
    title = str(record.get("title") or op.title)[:50]
    create: dict[str, Any] = {"title": title}
    if parent:
        create["parent"] = parent
    path = list_path("space", {"org": seg(org)})
    expect = Expect(path, parent_field="parent", parent=parent)
    new_id, _ = await writer.create(f"{op.key}:fresh", (FRESH, op.source_id), "POST", path, create, expect)
    writer.done_creating()
    return _Space(writer, new_id)


async def _by_fresh_space(op: Op, writer: Writer, old: _Space, record: dict[str, Any], body: dict[str, Any], notes: list[str]) -> str:
    """New content by a fresh space that takes the old one's place (see the module docstring)."""
    assert op.source_id is not None
    parent = ref_id(record.get("parent"))
    listed = await _site_spaces_of(writer, old.id)
    fresh = await _fresh(op, writer, record, parent)
    await _import(writer, f"{op.key}:fresh-import", op.source_id, fresh, body)
    pages = await fresh.pages()
    behaviour = await writer.db(journal.tenant_fact, writer.pair.target_tenant, IMPORT_FACT)
    if behaviour is None and pages:
        await _import(writer, f"{op.key}:probe", op.source_id, fresh, body)
        again = await fresh.pages()
        behaviour = "replaces" if count_pages(again) == count_pages(pages) else "adds"
        await writer.db(journal.remember_tenant_fact, writer.run, writer.pair.target_tenant, IMPORT_FACT, behaviour)
        notes.append(f"the service {'replaces' if behaviour == 'replaces' else 'adds to'} a space's pages on import (observed, remembered for this tenant)")
        if behaviour == "adds":
            await writer.call(f"{op.key}:fresh-probe-delete", FRESH, op.source_id, "DELETE", write_path("space", "delete", {"id": seg(fresh.id)}), drops=[(FRESH, op.source_id)])
            fresh = await _fresh(op, writer, record, parent)
            await _import(writer, f"{op.key}:fresh-import-2", op.source_id, fresh, body)
            pages = await fresh.pages()
    expected = (op.spec or {}).get("outline")
    if expected is not None and outline_digest(pages) != expected:
        raise CallFailed(f"the fresh space {fresh.id} does not hold the source's pages after its import: the old space is kept")
    await _swap(op, writer, old, fresh, record, parent, listed)
    notes.append(f"its content came by a fresh space ({fresh.id}) that took the place of {old.id}")
    return fresh.id


async def _swap(op: Op, writer: Writer, old: _Space, fresh: _Space, record: dict[str, Any], parent: str | None, listed: list[_Listed]) -> None:
    """The fresh space where the old one is, with its settings and site-spaces; then mapped,
    and the old one deleted."""
    assert op.source_id is not None
    move: dict[str, Any] = {"parent": parent, "position": {"before": {"type": "space", "space": old.id}}}
    await writer.call(f"{op.key}:fresh-move", FRESH, op.source_id, "POST", write_path("space", "move", {"id": seg(fresh.id)}), move)
    settings = {k: record[k] for k in ("emoji", "defaultLevel") if isinstance(record.get(k), str) and record.get(k)}
    if settings:
        await writer.call(f"{op.key}:fresh-settings", FRESH, op.source_id, "PATCH", write_path("space", "patch", {"id": seg(fresh.id)}), settings)
    await _repoint_site_spaces(op, writer, listed, fresh.id)
    await writer.record([("space", op.source_id, fresh.id, "created")], drops=[(FRESH, op.source_id)])
    if record.get("editMode") == "locked":
        await old.set_mode(f"{op.key}:old-unlock", None, "live")
    await writer.call(f"{op.key}:old-delete", "space", None, "DELETE", write_path("space", "delete", {"id": seg(old.id)}))


@dataclass(frozen=True)
class _Listed:
    """A site-space of the old space, as its site's listing showed it."""

    site: str
    item: dict[str, Any]
    source_id: str


def _site_path(kind: str, org: str, site: str) -> str:
    return list_path(kind, {"org": seg(org), "site": seg(site)})


async def _site_spaces_of(writer: Writer, old: str) -> list[_Listed]:
    """The old space's site-spaces that syncd maps (others go with the old space, and the next
    round plans what the source has). CallFailed when one cannot have a twin in its place: a
    site-space at the root of a site that has sections (one made without `sectionId` goes to
    the default section, spec part 4): then the old space is kept, before anything is made."""
    org = writer.pair.target_org
    sources = writer.idmap.sources_of("site-space")
    found: list[_Listed] = []
    for site in await writer.listing("target", list_path("site", {"org": seg(org)})):
        site_id = site.get("id") if isinstance(site, dict) else None
        if not isinstance(site_id, str):
            continue
        mine = [
            _Listed(site_id, item, sources[item["id"]]) for item in await writer.listing("target", _site_path("site-space", org, site_id))
            if isinstance(item, dict) and ref_id(item.get("space")) == old and isinstance(item.get("id"), str) and item["id"] in sources
        ]
        if any(ref_id(listed.item.get("section")) is None for listed in mine) and await writer.listing("target", _site_path("site-section", org, site_id)):
            raise CallFailed(f"the space is at the root of site {site_id[:80]!r}, which has sections: a new space cannot be put there, so its "
                             "content is not replaced (import it by hand, or move the site-space into a section)")
        found += mine
    return found


async def _repoint_site_spaces(op: Op, writer: Writer, listed: list[_Listed], fresh: str) -> None:
    """Every listed site-space of the old space gets a twin of the fresh one in the same
    section and place, with its path and condition; the old one goes, and the id map follows."""
    org = writer.pair.target_org
    for entry in listed:
        old_ss, item, base = entry.item["id"], entry.item, _site_path("site-space", org, entry.site)
        add: dict[str, Any] = {"spaceId": fresh}
        if ref_id(item.get("section")):
            add["sectionId"] = ref_id(item.get("section"))
        new_ss, _ = await writer.create(f"{op.key}:site-space:{old_ss}", ("site-space", entry.source_id), "POST", base, add,
                                        Expect(base, parent_field="space", parent=fresh))
        writer.done_creating()
        one = {"org": seg(org), "site": seg(entry.site)}
        await writer.call(f"{op.key}:site-space-move:{old_ss}", "site-space", None, "POST",
                          write_path("site-space", "move", {**one, "id": seg(new_ss)}), {"position": {"before": {"type": "site-space", "siteSpace": old_ss}}})
        await writer.call(f"{op.key}:site-space-delete:{old_ss}", "site-space", None, "DELETE", write_path("site-space", "delete", {**one, "id": seg(old_ss)}))
        fields = {k: item[k] for k in ("path", "condition") if isinstance(item.get(k), str) and item.get(k)}
        if fields:
            await writer.call(f"{op.key}:site-space-patch:{old_ss}", "site-space", None, "PATCH", write_path("site-space", "patch", {**one, "id": seg(new_ss)}), fields)


def _shown(writer: Writer, text: str) -> str:
    """An error as reported: the service may quote the URL it imported from."""
    return writer.publisher.shown(text) if writer.publisher is not None else text


def _log_served(op: Op, writer: Writer) -> None:
    if op.recipe != "import-served" or writer.publisher is None:
        return
    requests, size = writer.publisher.source.served.get(op.source_id, [0, 0])
    log.info("content.imported", space=op.source_id, title=op.title, requests=requests, bytes=size)
    missing = writer.publisher.missing.get(op.source_id) or []
    if missing:
        writer.counts.notes.append(f"space {op.title!r}: {len(missing)} file(s) not held, not imported: {', '.join(missing[:5])}")

