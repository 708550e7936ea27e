"""Compare a source and a target organization through the id map, the way a plan sees them.

Pure: two snapshots and the id map in, a `Verification` out. Like `rclone check
--combined`, every object of a copied kind lands in one bucket: identical, missing on the
target (only in the source), extra on the target (a target object no source object maps
to), different (with the fields that differ, references mapped through the id map), or an
error (an id map that cannot be right). Order counts: an object not where the source has it
among its mapped siblings is different in `position`; a space whose pages (titles,
markdown, order) or files (by name) differ is different in `pages` / `files`.

Compared fields are those a copy writes (rules.py): fields the API does not let a client
write (a space's visibility, a site's hostname) are reported by the plan as skips, not here.
A difference the plan announced as a skip (a space whose content cannot be copied) is
`excused` (`excuse`): a copy is equal apart from those. `residue` checks the other side:
nothing a copy made in the SOURCE (a duplicate for a transfer) may still be there.

Extra objects are what copy mode keeps by design (it never deletes): `leave_extras` moves
them to `left` ("left on the target"), which does not make a copy unequal; in mirror mode
(which deletes what syncd made) they stay `extra`, a difference.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from syncd.ordering import moved_items
from syncd.safe_text import clean
from syncd.copy.model import BOOKKEEPING, IdMap, Node, Snapshot
from syncd.copy.ops import Leftover, Skip, wholly_excused
from syncd.copy.review import object_path
from syncd.copy.rules import (
    COPIED_KINDS,
    RULES,
    canonical,
    comparable,
    container_site_spaces,
    content_difference,
    page_tree,
    site_of,
    space_content,
    title_of,
    tree_parent,
    unmapped,
)


@dataclass(frozen=True)
class Entry:
    """One object in one bucket; `fields` maps a differing field to (source, target)."""

    kind: str
    source_id: str | None
    target_id: str | None
    title: str
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    note: str = ""
    path: str = ""
    """Where it is, by titles (`review.object_path`): given for objects only on the target."""


@dataclass
class Verification:
    identical: list[Entry] = field(default_factory=list)
    missing: list[Entry] = field(default_factory=list)
    extra: list[Entry] = field(default_factory=list)
    different: list[Entry] = field(default_factory=list)
    errors: list[Entry] = field(default_factory=list)
    excused: list[Entry] = field(default_factory=list)
    """Differences the plan announced as skips (moved here by `excuse`)."""
    formatting: list[Entry] = field(default_factory=list)
    """Spaces counted identical whose pages say the same in markdown written differently
    (an importer's own style): a count, not a difference."""
    restructured: list[Entry] = field(default_factory=list)
    """Spaces counted identical whose pages say the same but whose blocks lost structure in
    the import (a hint read back as a quote, tabs as titled paragraphs, a page's emoji not
    carried...; docs/concepts/content.md): a count, not a difference."""
    left: list[Entry] = field(default_factory=list)
    """Objects only on the target that copy mode keeps (moved here by `leave_extras`): not a difference."""

    @property
    def equal(self) -> bool:
        """Nothing missing, extra or different (errors are reported, and also make it unequal);
        objects `left` on the target by copy mode are not a difference."""
        return not (self.missing or self.extra or self.different or self.errors)

    def counts(self) -> dict[str, int]:
        return {
            "identical": len(self.identical),
            "missing": len(self.missing),
            "extra": len(self.extra),
            "different": len(self.different),
            "errors": len(self.errors),
            "excused": len(self.excused),
            "formatting": len(self.formatting),
            "restructured": len(self.restructured),
            "left_on_target": len(self.left),
        }


def compare(source: Snapshot, target: Snapshot, idmap: IdMap, kinds: Iterable[str] = COPIED_KINDS) -> Verification:
    """Source and target, object by object, through the id map (see the module docstring)."""
    return _Comparer(source, target, idmap).run(tuple(kinds))


def leave_extras(verification: Verification) -> Verification:
    """The verification as copy mode reads it: what is only on the target (the source dropped
    it, or the target had it of its own) is left there by design, not a difference."""
    return replace(verification, extra=[], left=[*verification.left, *verification.extra])


def leftovers(verification: Verification) -> list[Leftover]:
    """What a copy left on the target, as a run record and a plan list it (kind, title, path)."""
    return [Leftover(e.kind, e.target_id or "", e.title, e.path or e.title) for e in verification.left]


def unmatched(kind: str, source: Snapshot, target: Snapshot, mapped: dict[str, str]) -> list[tuple[Node, str | None]]:
    """Target objects of `kind` no source object maps to (any more), each with the source id
    it was mapped from when that source object is gone (`mapped`: target id -> source id)."""
    out = []
    for other in target.of_kind(kind):
        source_id = mapped.get(other.id)
        if source_id is None or source.get(kind, source_id) is None:
            out.append((other, source_id))
    return out


def excuse(verification: Verification, skips: Iterable[Skip]) -> Verification:
    """The verification with the differences the plan announced (skips with `excuses`)
    moved to `excused`: a missing object whose skip excuses `missing`, an extra one whose
    skip excuses `extra`, the fields of a different one that its skips excuse; any difference
    of an object of a kind a skip excuses whole (`kind:KIND`)."""
    allowed: dict[tuple[str, str], set[str]] = defaultdict(set)
    skips = list(skips)
    whole = wholly_excused(skips)
    for skip in skips:
        if skip.source_id is not None:
            allowed[(skip.kind, skip.source_id)].update(skip.excuses)
    out = Verification(
        identical=list(verification.identical), errors=list(verification.errors), formatting=list(verification.formatting),
        restructured=list(verification.restructured), left=list(verification.left),
    )
    for bucket in ("missing", "extra"):
        for entry in getattr(verification, bucket):
            excused = entry.kind in whole or (entry.source_id is not None and bucket in allowed.get((entry.kind, entry.source_id), set()))
            (out.excused if excused else getattr(out, bucket)).append(entry)
    for entry in verification.different:
        if entry.kind in whole:
            out.excused.append(entry)
            continue
        names = allowed.get((entry.kind, entry.source_id or ""), set())
        left = {name: values for name, values in entry.fields.items() if name not in names}
        if not left:
            out.excused.append(entry)
        elif len(left) < len(entry.fields):
            out.excused.append(Entry(entry.kind, entry.source_id, entry.target_id, entry.title, {k: v for k, v in entry.fields.items() if k in names}))
            out.different.append(Entry(entry.kind, entry.source_id, entry.target_id, entry.title, left, entry.note))
        else:
            out.different.append(entry)
    return out


def residue(source_now: Snapshot, made_in_source: Iterable[str]) -> list[Entry]:
    """Objects a copy made in the source (duplicates for a transfer) that are still there:
    the source must come out of a copy as it went in."""
    made = set(made_in_source)
    return [
        Entry(node.kind, node.id, None, title_of(node.kind, node), note="made in the SOURCE by a copy and still there")
        for node in source_now.of_kind("space")
        if node.id in made
    ]


SYMBOLS = {"identical": "=", "missing": "+", "extra": "-", "different": "*", "errors": "!", "excused": "~", "left": "-"}
"""rclone check --combined: `+` only in the source, `-` only in the target."""


def render(verification: Verification, *, identical: bool = False, limit: int | None = None) -> list[str]:
    """Text lines: one per object (identical ones only when asked), the differing fields
    under each different one, then a summary line. Safe for a terminal: titles and values are
    repr()s, other text from the organizations is cleaned of control characters
    (`syncd.safe_text`); print the lines with markup off."""
    lines: list[str] = []
    for bucket in ("missing", "extra", "different", "errors", "excused", "left", "identical"):
        if bucket == "identical" and not identical:
            continue
        entries: list[Entry] = getattr(verification, bucket)
        shown = entries if limit is None else entries[:limit]
        for entry in shown:
            label = f"{SYMBOLS[bucket]} {clean(entry.kind)} {entry.title!r}"
            ids = clean(entry.source_id) if entry.source_id else ""
            if entry.target_id:
                ids += f" -> {clean(entry.target_id)}" if ids else clean(entry.target_id)
            line = f"{label} ({ids})" if ids else label
            if bucket == "missing":
                line += ": missing on the target"
            elif bucket == "extra":
                line += ": only on the target"
            elif bucket == "excused":
                line += ": announced by the plan"
            elif bucket == "left":
                line += f": left on the target (copy mode keeps it){_at(entry)}"
            if entry.note:
                line += f": {clean(entry.note)}"
            lines.append(line)
            for name, (src, tgt) in entry.fields.items():
                lines.append(f"    {clean(name)}: source {_short(src)}, target {_short(tgt)}")
        if limit is not None and len(entries) > limit:
            lines.append(f"  ... and {len(entries) - limit} more {bucket}")
    c = verification.counts()
    lines.append(
        f"{c['identical']} identical, {c['missing']} missing on target, {c['extra']} extra on target, "
        f"{c['different']} different, {c['errors']} errors"
        + (f", {c['excused']} announced by the plan" if c["excused"] else "")
        + (f", {c['formatting']} spaces whose pages differ in formatting only" if c["formatting"] else "")
        + (f", {c['restructured']} spaces whose blocks lost structure in the import" if c["restructured"] else "")
        + (f", {c['left_on_target']} left on target (the source does not have them; copy mode keeps them)" if c["left_on_target"] else "")
        + (": equal" if verification.equal else "")
    )
    return lines


def _at(entry: Entry) -> str:
    return f", at {clean(entry.path)}" if entry.path and entry.path != entry.title else ""


def _short(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


class _Comparer:
    def __init__(self, source: Snapshot, target: Snapshot, idmap: IdMap) -> None:
        self.source, self.target, self.idmap = source, target, idmap
        self.src, self.tgt = source, target
        self.result = Verification()
        self.rev: dict[str, dict[str, str]] = defaultdict(dict)
        self.duplicates = {m.target_id for (kind, _), m in idmap.entries.items() if kind == "space-duplicate"}
        for (kind, source_id), entry in idmap.entries.items():
            if kind in BOOKKEEPING:
                continue
            other = self.rev[kind].get(entry.target_id)
            if other is not None:
                self.result.errors.append(
                    Entry(kind, source_id, entry.target_id, source_id, note=f"the id map gives this target object to {other} too")
                )
            self.rev[kind][entry.target_id] = source_id
        self.out_of_order: dict[tuple[str, str], tuple[int, int]] = {}

    def tid(self, kind: str, source_id: str | None) -> str | None:
        if source_id is None:
            return None
        if kind == "organization":
            return self.target.org if source_id == self.source.org else None
        return self.idmap.target(kind, source_id)

    def to_source(self, kind: str, target_id: str) -> str:
        if kind == "organization" and target_id == self.target.org:
            return self.source.org
        return self.rev.get(kind, {}).get(target_id) or unmapped(kind, target_id)

    def comparable(self, kind: str, node: Node, view: Snapshot, side: str) -> dict[str, Any]:
        canon = canonical(kind, node, view)
        return comparable(kind, canon, (lambda k, i: i) if side == "source" else self.to_source)

    def run(self, kinds: tuple[str, ...]) -> Verification:
        self.orders()
        for kind in kinds:
            if kind not in RULES:
                continue
            if kind == "organization":
                self.organization()
            elif kind == "site-adaptive-schema":
                self.schemas()
            else:
                self.kind(kind)
        return self.result

    def organization(self) -> None:
        node, other = self.src.get("organization", self.source.org), self.tgt.get("organization", self.target.org)
        if node is None:
            return
        if other is None:
            self.result.missing.append(Entry("organization", node.id, None, title_of("organization", node)))
            return
        self.judge("organization", node, other)

    def schemas(self) -> None:
        for node in self.src.of_kind("site-adaptive-schema"):
            site = site_of(node)
            target_site = self.tid("site", site)
            if target_site is None:
                continue  # its site is reported missing
            other = self.tgt.get("site-adaptive-schema", f"{target_site}/site-adaptive-schema")
            title = f"adaptive schema of {title_of('site', self.src.get('site', site))}"
            if other is None:
                self.result.missing.append(Entry("site-adaptive-schema", node.id, None, title))
            else:
                self.judge("site-adaptive-schema", node, other, title=title)

    def kind(self, kind: str) -> None:
        for node in self.src.of_kind(kind):
            if kind == "space" and node.id in self.duplicates:
                continue
            target_id = self.tid(kind, node.id)
            other = self.tgt.get(kind, target_id)
            if other is None:
                note = f"the id map names {target_id}, which is not there" if target_id else ""
                self.result.missing.append(Entry(kind, node.id, target_id, title_of(kind, node), note=note))
                continue
            self.judge(kind, node, other)
        for other, source_id in unmatched(kind, self.src, self.tgt, self.rev.get(kind, {})):
            note = f"its source {source_id} is gone" if source_id else ""
            path = object_path(kind, other, self.tgt)
            self.result.extra.append(Entry(kind, source_id, other.id, title_of(kind, other), note=note, path=path))

    def judge(self, kind: str, node: Node, other: Node, title: str | None = None) -> None:
        want = self.comparable(kind, node, self.src, "source")
        have = self.comparable(kind, other, self.tgt, "target")
        fields = {name: (want.get(name), have.get(name)) for name in RULES[kind].fields if want.get(name) != have.get(name)}
        if "default" in fields and self.without_default(kind, node):
            del fields["default"]  # no API call clears a default: only a source default is copied
        if (kind, node.id) in self.out_of_order:
            fields["position"] = self.out_of_order[(kind, node.id)]
        entry_title = title or title_of(kind, node)
        if kind == "space":
            content = content_difference(space_content(self.src, node.id), space_content(self.tgt, other.id))
            fields.update(content)
            if not content:
                self.count_form(Entry(kind, node.id, other.id, entry_title))
        entry = Entry(kind, node.id, other.id, entry_title, fields)
        (self.result.different if fields else self.result.identical).append(entry)

    def count_form(self, entry: Entry) -> None:
        """A space that says the same on both sides: `restructured` when its blocks (or an
        emoji) did not survive the import as written, else `formatting` when its markdown is
        written differently."""
        source, target = entry.source_id or "", entry.target_id or ""
        if page_tree(self.src, source, exact=True) == page_tree(self.tgt, target, exact=True):
            return  # the same bytes: the same form too (the common case, and the cheap one)
        if page_tree(self.src, source, structure=True) != page_tree(self.tgt, target, structure=True):
            self.result.restructured.append(entry)
        else:
            self.result.formatting.append(entry)

    def without_default(self, kind: str, node: Node) -> bool:
        """Whether the source container of a section or site-space shows no default (the
        service leaves none while the default's space is deleted)."""
        site = site_of(node)
        if site is None:
            return False
        if kind == "site-section":
            siblings = self.src.children("site-section", ("site", site))
        else:
            siblings = container_site_spaces(self.src, site, canonical(kind, node, self.src).get("section"))
        return not any(n.data.get("default") for n in siblings)

    # ----- order --------------------------------------------------------------------------

    def orders(self) -> None:
        """(kind, source id) -> (position in the source, position in the target) of objects
        that are not where the source has them among their mapped siblings."""
        for kind in ("collection", "space"):
            parents: dict[str | None, list[Node]] = defaultdict(list)
            for node in self.src.of_kind(kind):
                parents[tree_parent(node)].append(node)
            targets: dict[str | None, list[Node]] = defaultdict(list)
            for node in self.tgt.of_kind(kind):
                targets[tree_parent(node)].append(node)
            for parent, nodes in parents.items():
                target_parent = self.tid("collection", parent) if parent else None
                if parent and target_parent is None:
                    continue
                self.check_order(kind, [n.id for n in nodes], [n.id for n in targets.get(target_parent, [])])
        for site in self.src.of_kind("site"):
            target_site = self.tid("site", site.id)
            if target_site is None:
                continue
            for kind in ("site-section", "site-section-group"):
                self.check_order(kind, [n.id for n in self.src.children(kind, ("site", site.id))], [n.id for n in self.tgt.children(kind, ("site", target_site))])
            for section in [None, *self.src.children("site-section", ("site", site.id))]:
                section_id = section.id if section else None
                target_section = self.tid("site-section", section_id) if section_id else None
                if section_id and target_section is None:
                    continue
                self.check_order(
                    "site-space",
                    [n.id for n in container_site_spaces(self.src, site.id, section_id)],
                    [n.id for n in container_site_spaces(self.tgt, target_site, target_section)],
                )

    def check_order(self, kind: str, source_ids: list[str], target_ids: list[str]) -> None:
        mapped = self.rev.get(kind, {})
        in_target = [mapped[t] for t in target_ids if t in mapped]
        position = {source_id: float(index) for index, source_id in enumerate(in_target)}
        common = [s for s in source_ids if s in position]
        for source_id in moved_items(common, position):
            self.out_of_order[(kind, source_id)] = (source_ids.index(source_id), int(position[source_id]))


__all__ = ["SYMBOLS", "Entry", "Verification", "compare", "excuse", "leave_extras", "leftovers", "render", "residue", "unmatched"]

