"""Behaviour profiles: the emulator's answer at every point the spec leaves open.

The spec does not say where a new object lands among its siblings, how a path is derived
from a title, in what order a non-positional list comes, how large a page is, how long a
page token lives, whether answers carry fields a client does not know, or what a create
answers. `default` is one guess at each point (what the emulator always did); `divergent`
guesses differently at every one of them, so that syncd can be tested against two
implementations of the same spec and may depend on neither.

The generator never reads a profile: model helpers default to `DEFAULT`, so a seed gives
the same organizations whatever profile serves them. Handlers read the app's profile with
`profile_of(request)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from syncd.emulator.store import Record, Store

__all__ = ["DEFAULT", "DIVERGENT", "PROFILE", "PROFILES", "Profile", "get_profile", "land", "profile_of", "unordered"]


@dataclass(frozen=True)
class Profile:
    """One answer per open point of the spec (the README's "Behaviour profiles" table)."""

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
)
PROFILES: dict[str, Profile] = {p.name: p for p in (DEFAULT, DIVERGENT)}

PROFILE: web.AppKey[Profile] = web.AppKey("profile", Profile)


def get_profile(name: str) -> Profile:
    """The profile called `name`; ValueError naming the known ones otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown emulator profile {name!r} (known: {', '.join(PROFILES)})") from None


def profile_of(request: web.Request) -> Profile:
    """The profile of the app serving `request` (DEFAULT for an app built without one)."""
    return request.app.get(PROFILE, DEFAULT)


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
