"""PostgreSQL at the bottom: what the state store, the daemon's fleet and the shared request
budget need from the server named by `state_url` (issue 13), and nothing above it.

`connect` opens a connection from a `state_url`, with bounded waits and one-line errors;
`migrations` runs the named migrations each owner hands it (the store's, the daemon's, the
budget's) and keeps the ledger of every name this syncd knows; `budget` and `budget_model`
share one request budget per API token among the replicas. The SQLite state in `state_dir`
stays the embedded default: nothing here is imported unless `state_url` is set.
"""

from syncd.pg.connect import PgError, connect, display_url
from syncd.pg.migrations import LEDGER, PgMigration, applied_migrations, migrate

__all__ = ["LEDGER", "PgError", "PgMigration", "applied_migrations", "connect", "display_url", "migrate"]
