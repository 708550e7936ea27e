"""What a crawl reads reaches the mirror in batches, one transaction each, written by one task.

Why: a transaction per page and per listing cost a crawl a commit every few rows. The workers
now only append to a batch (rows, listings read, scopes read or carried, in the order they
happened); a full batch goes to one writer task, which writes it in ONE transaction
(`StateStore.write_staged`). At most `ahead` full batches wait for the writer: a mirror slower
than the API holds the workers back instead of filling memory.

Where the writer writes: a PostgreSQL state's batch waits on the network, so it is written in a
worker thread while the workers read on; an SQLite file's batch is CPU work that holds the GIL
(binding, encoding, the B-tree), so a thread only adds GIL handoffs between it and the event
loop: it is written on the loop, between two pages (measured with `bench/crawl.py --objects`:
1.05-1.31 ms of CPU a request on the loop, 1.32-1.75 ms in a thread).

What it keeps of the store's contract: the order of everything a run stages is the order it
was added, so a listing is recorded `ok` only after its rows, and a scope read after its
listings. Nothing reads staged rows before `drain` returns (the crawler drains before a scoped
crawl's selection and before the merge). A writer's failure (a full disk, a damaged file) ends
the crawl with it; cancelled, the batch being written commits or not as a whole, and the run is
abandoned (its staged rows dropped) as before.
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio
import anyio.lowlevel

from syncd.state import Row, StateStore
from syncd.state.staging import Listed, ScopeCarried, ScopeRead, StagedOp, StagedRow

__all__ = ["StagingQueue"]

BATCH_ROWS = 2000
"""Rows (and other ops) in one transaction: large enough that a commit is a small part of
its cost."""
BATCH_BYTES = 2 << 20
"""...or this much encoded JSON, whichever comes first: a batch of large pages stays a few MB."""
AHEAD = 1
"""Full batches that may wait for the writer before the workers wait for it."""


class StagingQueue:
    """The staging of one run: `add_*` from the event loop, `run` as a task, `drain` at the end."""

    def __init__(
        self, store: StateStore, run: int, *, batch: int = BATCH_ROWS, batch_bytes: int = BATCH_BYTES, ahead: int = AHEAD
    ) -> None:
        self.store = store
        self.run_id = run
        self.batch = batch
        self.batch_bytes = batch_bytes
        self._ops: list[StagedOp] = []
        self._bytes = 0
        self._send, self._receive = anyio.create_memory_object_stream[list[StagedOp]](ahead)
        self._done = anyio.Event()
        self.batches = 0
        """Transactions written (for the benchmark and the tests)."""

    def rows(self, rows: Iterable[Row]) -> None:
        """Rows as read; encoded now, so that the batch holds text, not the decoded objects
        (which go when the crawler is done with their page)."""
        for row in rows:
            staged = StagedRow.of(row)
            self._bytes += len(staged.data)
            self._ops.append(staged)

    def listed(self, listing: str, ok: bool, error: str | None = None) -> None:
        self._ops.append(Listed(listing, ok, error))

    def scope_read(self, scope: str, token: str) -> None:
        self._ops.append(ScopeRead(scope, token))

    def scope_carried(self, scope: str, rows: bool = True) -> None:
        self._ops.append(ScopeCarried(scope, rows))

    async def pace(self) -> None:
        """Hand a full batch to the writer; waits while `ahead` batches are waiting already."""
        if len(self._ops) >= self.batch or self._bytes >= self.batch_bytes:
            ops, self._ops, self._bytes = self._ops, [], 0
            await self._send.send(ops)

    async def run(self) -> None:
        """The writer task: each batch in one transaction, in order (where: module docstring)."""
        try:
            async with self._receive:
                async for ops in self._receive:
                    if self.store.dialect.sqlite:
                        self.store.write_staged(self.run_id, ops)
                        await anyio.lowlevel.checkpoint()
                    else:
                        await anyio.to_thread.run_sync(self.store.write_staged, self.run_id, ops)
                    self.batches += 1
        finally:
            self._done.set()

    async def drain(self) -> None:
        """Write what is left and wait until everything added is in the mirror."""
        async with self._send:
            if self._ops:
                ops, self._ops, self._bytes = self._ops, [], 0
                await self._send.send(ops)
        await self._done.wait()
