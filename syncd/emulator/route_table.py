"""The one table of the emulator's route families: the app registers their routes from it, the
generator calls their seeds and the canonical dump walks their dump kinds, all in its order.
No route module imports it, so the families stay below everything that serves or walks them."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.routes import (
    change_requests,
    comments,
    content,
    integrations,
    members,
    orgs,
    settings,
    site_navigation,
    sites,
    spaces,
)
from syncd.emulator.store import Store

Seed = Callable[[Store, str, random.Random, dict[str, int]], None]
"""A family's part of the generator: (store, organization id, its own random stream, spec)."""


@dataclass(frozen=True)
class Family:
    """One route family: its routes (from one module or, for a large family, several, in
    registration order), its part of the generator, and its kinds in the canonical dump."""

    name: str
    routes: Sequence[web.AbstractRouteDef]
    seed: Seed | None = None
    dump: Sequence[DumpKind] = ()


# Order matters for the generator and the canonical dump: what others reference comes first.
# Each family with a seed draws one random stream from the generator's, in this order.
FAMILIES = [
    Family("orgs", orgs.routes, dump=orgs.DUMP),
    Family("members", members.routes, members.seed, members.DUMP),
    Family("spaces", spaces.routes, spaces.seed, spaces.DUMP),
    Family("content", content.routes, content.seed, content.DUMP),
    Family("change_requests", change_requests.routes, change_requests.seed, change_requests.DUMP),
    Family("comments", comments.routes, comments.seed, comments.DUMP),
    Family("settings", settings.routes, settings.seed, settings.DUMP),
    Family("sites", [*sites.routes, *site_navigation.routes], sites.seed, sites.DUMP),
    Family("integrations", integrations.routes, integrations.seed, integrations.DUMP),
]
