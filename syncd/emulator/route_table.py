"""The one table of the emulator's route modules: the app registers their `routes` from it, the
generator calls their `seed` and the canonical dump walks their `DUMP` kinds, all in its order.
No route module imports it, so the families stay below everything that serves or walks them."""

from syncd.emulator.routes import (
    change_requests,
    comments,
    content,
    integrations,
    members,
    orgs,
    settings,
    sites,
    spaces,
)

# Order matters for the generator and the canonical dump: what others reference comes first.
FAMILIES = [orgs, members, spaces, content, change_requests, comments, settings, sites, integrations]
