"""The read side: what syncd reads from the API and from its state (crawl, sync, backup, check, export).

`sibling_names` gives siblings unique names (`notes`, `notes-2`): the export's files, and the
paths of the site the write side serves (`syncd.copy.served`), are named with it."""
