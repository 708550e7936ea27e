"""Behaviour profiles: the emulator's answer at every point the spec leaves open.

The spec does not say where a new object lands among its siblings, how a path is derived
from a title, in what order a non-positional list comes, how large a page is, how long a
page token lives, whether answers carry fields a client does not know, what a create
answers, what an import does to the pages a space holds, whether an import is done when it
answers, what a lock refuses, which sibling a section's move may name, whether a deleted space
is still listed, what deleting a collection does to what it holds, what a PATCH answers,
whether a transfer keeps the id, whether a website import reads a page's markdown alternate, or
whether it keeps the heading it takes as a page's title, how many connections a website import
opens, or whether a created object bears the very title the create sent. `default` is
one guess at each point (what the emulator always did); `divergent` guesses differently at every
one of them, and `mixed:SEED` picks each row's guess from the seed, independently, so that syncd
can be tested against many implementations of the same spec and may depend on none.

`ROWS` names the open points (the table of docs/concepts/open-points.md, one row each) and the
fields that play each one.

The generator never reads a profile: model helpers default to `DEFAULT`, so a seed gives
the same organizations whatever profile serves them. Handlers read the app's profile with
`profile_of(request)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
import random
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from syncd.emulator.store import Record, Store

__all__ = [
    "DEFAULT", "DIVERGENT", "IMPORT_DELAY", "MIXED_PREFIX", "PROFILE", "PROFILES", "ROWS", "Played", "Profile", "divergent_rows", "get_profile", "land", "mixed",
    "profile_of", "unordered",
]


@dataclass(frozen=True)
class Profile:
    """One answer per open point of the spec (the table of docs/concepts/open-points.md)."""

    name: str
    duplicate_suffix: str
    """Appended to a duplicated space's title (cut so the whole fits the title limit)."""
    duplicate_first: bool
    """A duplicate goes first among its parent's children (else right after the original)."""
    new_first: bool
    """Created and transferred-in objects go first among their siblings (else last)."""
    slug_separator: str
    """What replaces runs of other characters in a path derived from a title."""
    first_duplicate_suffix: int
    """Number of the first de-duplicated path: `slug-2` (2) or `slug_1` (1)."""
    sort_unordered: bool
    """Lists whose order the spec leaves open come sorted by title/name (else creation order)."""
    page_cap: int
    """Largest page answered, whatever `limit` asks (the admin page-cap knob overrides it)."""
    page_token_ttl: float | None
    """Seconds a page token lives (None: forever); the admin page-tokens knob overrides it."""
    unknown_fields: bool
    """Objects and list envelopes carry fields a client does not know."""
    first_section_takes_root: bool
    """A site's first section takes over the site's root site-spaces."""
    minimal_create: bool
    """A create answers 200 with `{object, id}` plus the fields the request sent (else 201, whole)."""
    import_adds: bool = False
    """A content import adds its pages and files to what the space holds (else replaces them)."""
    locked_refuses_import: bool = False
    """A content import into a `locked` space is refused: 400 `The space is locked`."""
    import_restyles: bool = False
    """An import from a website writes the pages' markdown in the importer's own style."""
    strict_section_refs: bool = False
    """A section's move accepts only a section as its sibling reference (else a group too)."""
    deleted_spaces_listed: bool = False
    """Deleted spaces stay in the organization's space listing, with `deletedAt`, while they
    can be restored (else they are left out)."""
    collection_delete_refused: bool = False
    """Deleting a collection that holds spaces or collections is refused (else they go with it)."""
    minimal_patch: bool = False
    """A PATCH answers `{object, id}` plus the fields the request sent (else the whole object)."""
    transfer_new_id: bool = False
    """A transferred space or collection gets a new id (else it keeps its id)."""
    import_deferred: bool = False
    """An import answers before its content is in: the space (or change request) shows the
    imported revision `IMPORT_DELAY` seconds later (else at once, when it answers)."""
    import_reads_alternate: bool = True
    """A website import reads a page's `<link rel="alternate" type="text/markdown">` when it
    offers one (else only the HTML of its `<main>`)."""
    import_keeps_first_heading: bool = False
    """A website import that takes the first `<h1>` of `<main>` as the page's title keeps it in
    the content as a level-1 heading (else drops it)."""
    import_connections: int = 8
    """Connections a website import opens at once to the site it reads."""
    create_tidies_names: bool = False
    """A created collection or space bears the title sent with white space trimmed at both ends
    and runs of it made one space (else the title as sent)."""

    def created_title(self, title: str) -> str:
        """The title a created collection or space bears (row create-keeps-name)."""
        return " ".join(title.split()) if self.create_tidies_names else title

    def duplicate_title(self, title: str, limit: int) -> str:
        """The title of a duplicate: the original's, with the suffix kept whole within `limit`."""
        if not self.duplicate_suffix:
            return title
        return title[: max(0, limit - len(self.duplicate_suffix))] + self.duplicate_suffix


DEFAULT = Profile(
    name="default",
    duplicate_suffix="",
    duplicate_first=False,
    new_first=False,
    slug_separator="-",
    first_duplicate_suffix=2,
    sort_unordered=False,
    page_cap=1000,
    page_token_ttl=None,
    unknown_fields=False,
    first_section_takes_root=True,
    minimal_create=False,
)
DIVERGENT = Profile(
    name="divergent",
    duplicate_suffix=" (copy)",
    duplicate_first=True,
    new_first=True,
    slug_separator="_",
    first_duplicate_suffix=1,
    sort_unordered=True,
    page_cap=100,
    page_token_ttl=30.0,
    unknown_fields=True,
    first_section_takes_root=False,
    minimal_create=True,
    import_adds=True,
    locked_refuses_import=True,
    import_restyles=True,
    strict_section_refs=True,
    deleted_spaces_listed=True,
    collection_delete_refused=True,
    minimal_patch=True,
    transfer_new_id=True,
    import_deferred=True,
    import_reads_alternate=False,
    import_keeps_first_heading=True,
    import_connections=32,
    create_tidies_names=True,
)
PROFILES: dict[str, Profile] = {p.name: p for p in (DEFAULT, DIVERGENT)}

ROWS: dict[str, tuple[str, ...]] = {
    "duplicate": ("duplicate_suffix", "duplicate_first"),
    "new-object-place": ("new_first",),
    "derived-paths": ("slug_separator", "first_duplicate_suffix"),
    "list-order": ("sort_unordered",),
    "paging": ("page_cap", "page_token_ttl"),
    "unknown-fields": ("unknown_fields",),
    "first-section": ("first_section_takes_root",),
    "create-answer": ("minimal_create",),
    "import-existing-pages": ("import_adds",),
    "locked-space": ("locked_refuses_import",),
    "import-style": ("import_restyles",),
    "section-move-reference": ("strict_section_refs",),
    "deleted-space-listed": ("deleted_spaces_listed",),
    "collection-delete": ("collection_delete_refused",),
    "patch-answer": ("minimal_patch",),
    "transfer-id": ("transfer_new_id",),
    "import-completion": ("import_deferred",),
    "import-reads-markdown-alternate": ("import_reads_alternate",),
    "import-first-heading": ("import_keeps_first_heading",),
    "importer-connections": ("import_connections",),
    "create-keeps-name": ("create_tidies_names",),
}
"""Open point -> the Profile fields that play it (one row each of the table in
docs/concepts/open-points.md, in its order)."""

MIXED_PREFIX = "mixed:"

IMPORT_DELAY = 0.05
"""Seconds after its answer that a deferred import's revision becomes the active one."""


def mixed(seed: int) -> Profile:
    """A profile whose every row is `default`'s or `divergent`'s, drawn from `seed` alone
    (the same seed, the same profile); named `mixed:SEED` so that a failure replays."""
    rng = random.Random(f"syncd-emulator-mixed:{seed}")
    fields: dict[str, Any] = {}
    for names in ROWS.values():
        chosen = DIVERGENT if rng.random() < 0.5 else DEFAULT
        fields.update({name: getattr(chosen, name) for name in names})
    return replace(DEFAULT, name=f"{MIXED_PREFIX}{seed}", **fields)


def divergent_rows(profile: Profile) -> list[str]:
    """The rows where `profile` plays `divergent`'s behaviour (for reports and test ids)."""
    return [row for row, names in ROWS.items() if all(getattr(profile, n) == getattr(DIVERGENT, n) for n in names)]

@dataclass
class Played:
    """The profile an app plays: changeable while it runs (`PUT /_emulator/profile`), since an
    app's own state is frozen once it starts."""

    profile: Profile


PROFILE: web.AppKey[Played] = web.AppKey("profile", Played)


def get_profile(name: str) -> Profile:
    """The profile called `name` (`default`, `divergent` or `mixed:SEED` with SEED a whole
    number of at most 18 digits); ValueError naming the known ones otherwise."""
    seed = name[len(MIXED_PREFIX):] if name.startswith(MIXED_PREFIX) else ""
    if seed.isascii() and seed.isdigit() and len(seed) <= 18:
        return mixed(int(seed))
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown emulator profile {name!r} (known: {', '.join(PROFILES)}, {MIXED_PREFIX}SEED)") from None


def profile_of(request: web.Request) -> Profile:
    """The profile of the app serving `request` (DEFAULT for an app built without one)."""
    played = request.app.get(PROFILE)
    return played.profile if played is not None else DEFAULT


def land(store: Store, profile: Profile, key: tuple[str, ...], item_id: str) -> None:
    """Put an item that just arrived in the sibling list `key` where the profile lands new
    objects: model helpers append it, so only "first" has anything to do."""
    if not profile.new_first:
        return
    first = next((i for i in store.orders.get(key, ()) if i != item_id), None)
    if first is not None:
        store.place(key, item_id, before=first)


def unordered(profile: Profile, records: Iterable[Record], label: Callable[[Record], Any]) -> list[Record]:
    """Records of a list whose order the spec leaves open, in the profile's order: as given
    (creation order) or by `label` casefolded, then id."""
    items = list(records)
    if profile.sort_unordered:
        items.sort(key=lambda r: (str(label(r) or "").casefold(), str(r.get("id", ""))))
    return items
