"""Route families of the emulator; each module listed in `syncd.emulator.route_table.FAMILIES`
has `routes` (aiohttp RouteTableDef), optionally `DUMP` (canonical dump kinds) and `seed` (the
generator's part for it). Modules not listed there (e.g. `site_model`) hold the model and
rendering that the listed ones share."""
