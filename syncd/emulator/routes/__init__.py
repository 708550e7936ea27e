"""Route families of the emulator; each module in FAMILIES has `routes` (aiohttp RouteTableDef),
optionally `DUMP` (canonical dump kinds) and `seed` (the generator's part for it).
`site_model` is no family: it holds the model and rendering of the `sites` family."""

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
