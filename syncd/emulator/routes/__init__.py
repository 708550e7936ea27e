"""Route families of the emulator. `syncd.emulator.route_table.FAMILIES` lists each family's
`routes` (aiohttp RouteTableDef; a large family spreads them over several modules), `seed`
(the generator's part for it) and `DUMP` (canonical dump kinds). The `*_model` modules hold
the records and rendering that a family's routes and other families share."""
