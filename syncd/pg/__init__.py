"""PostgreSQL at the bottom: what the state store, the daemon's fleet and the shared request
budget need from the server named by `state_url` (issue 13), and nothing above it.

`connect` opens a connection from a `state_url`, with bounded waits and one-line errors;
`migrations` runs the named migrations each owner hands it (the store's, the daemon's, the
budget's) and keeps the ledger of every name this syncd knows; `budget` and `budget_model`
share one request budget per API token among the replicas; `fencing` stops the writes of a
replica that lost its fleet run's lease (the API client, the copy's journal and the writer
lock look at it before each write).

The SQLite state in `state_dir` stays the embedded default: psycopg is loaded only when
`state_url` is set. So this face hands on no names: `fencing` (no psycopg import, read by every
API client) is imported without `connect` and `migrations`.
"""
