"""The read side: what syncd reads from the API and from its state (crawl, sync, backup, check, export)."""
