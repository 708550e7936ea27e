"""State shared by several syncd daemons through one PostgreSQL server (issue 13).

`connect` opens a connection from a `state_url`, with bounded waits and one-line errors;
`schema` brings the server's tables up to date with named migrations. The SQLite state in
`state_dir` stays the embedded default: nothing here is imported unless `state_url` is set.
"""

from syncd.fleet.connect import FleetError, connect, display_url
from syncd.fleet.schema import FLEET_MIGRATIONS, migrate_fleet

__all__ = ["FLEET_MIGRATIONS", "FleetError", "connect", "display_url", "migrate_fleet"]
