"""The per-kind zstd dictionaries of a SQLite file: when one is trained, from what, and how it
is kept (`dictionaries`, migration 0006; packing itself is `syncd.state.packing`).

When: as a run is merged, a kind that has no dictionary yet and `MIN_OBJECTS` or more staged
rows in the run gets one (`for_run`); migration 0006 trains them from the file's own objects
(`for_file`) before it packs them. Kinds below that are packed without a dictionary, or kept as
text when that is not shorter (their few objects weigh little).

From what: at most `SAMPLES` objects of the kind, at positions drawn by a generator seeded with
the kind's name among its objects in id order: spread over the kind as a random sample is, and
the same for the same objects whatever order they were read in, so a file is made the same way
twice. Their ids are read from the primary key's index alone, then only the sampled objects.
Training takes fastcover with fixed parameters (`TRAINING`): letting zstd search for them took
five times the CPU (0.7 s for the 20 dictionaries of the 110k-object benchmark, against 0.15 s)
for 0.7% smaller objects, and 1,000 objects train a dictionary as good as 2,000 do (97.6 against
97.5 bytes an object) in two thirds of the time.

Never retrained, never rewritten: a row is written once and packed values name its id, so a
dictionary is read as it was written for as long as any value names it. Why not retrain when a
kind grew: on that mirror a dictionary trained from 100 objects packed the whole kind within 2%
of one trained from 2,000 (99.2 against 97.5 bytes an object): the keys and shapes of a kind,
which is what a dictionary holds, are there in its first hundred objects. A kind whose training
fails (objects too few or too small for zstd) gets none this time and is tried again at the next
merge that stages enough of it.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable
from typing import Any

import zstandard

from syncd.state.packing import PackedDataError, Packer

__all__ = ["MIN_OBJECTS", "SAMPLES", "SIZE", "TRAINING", "for_file", "for_run", "newest"]

MIN_OBJECTS = 100
"""Objects of a kind a merge stages before the kind gets a dictionary."""
SAMPLES = 1000
"""The most objects a dictionary is trained from (module docstring)."""
SIZE = 16 * 1024
"""A dictionary's size: 8 KB packed the benchmark's objects 2% larger, 32 KB 2% smaller."""
TRAINING = {"k": 2048, "d": 8, "f": 18}
"""fastcover's segment size, d-mer size and frequency table bits (module docstring)."""


def newest(conn: sqlite3.Connection) -> dict[str, int]:
    """kind -> the id of its dictionary (the newest, should a kind have several)."""
    return dict(conn.execute("SELECT kind, max(id) FROM dictionaries GROUP BY kind").fetchall())


def for_run(conn: sqlite3.Connection, packer: Packer, run: int, tenant: str) -> list[str]:
    """Train the dictionaries `run`'s staged rows call for, in the caller's transaction, and
    let `packer` pack with each kind's; returns the kinds that got one."""
    have = newest(conn)
    counts = conn.execute("SELECT kind, count(*) FROM staged WHERE run = ? GROUP BY kind", [run]).fetchall()
    trained = []
    for kind, count in sorted(counts):
        if count < MIN_OBJECTS or kind in have:
            continue
        keys = conn.execute("SELECT id FROM staged WHERE run = ? AND tenant = ? AND kind = ? ORDER BY id", [run, tenant, kind])
        value = "SELECT data FROM staged WHERE run = ? AND tenant = ? AND kind = ? AND id = ?"
        samples = [conn.execute(value, [run, tenant, kind, key]).fetchone()[0] for (key,) in _sampled(keys, kind, count)]
        if _train(conn, packer, kind, samples):
            trained.append(kind)
    packer.use(newest(conn))
    return trained


def for_file(conn: sqlite3.Connection, packer: Packer) -> list[str]:
    """Train a dictionary for each kind of `MIN_OBJECTS` or more rows in `resources` (migration
    0006, before it packs them), and let `packer` pack with them; returns those kinds."""
    have = newest(conn)
    counts = conn.execute("SELECT kind, count(*) FROM resources GROUP BY kind").fetchall()
    tenants = [tenant for (tenant,) in conn.execute("SELECT DISTINCT tenant FROM resources").fetchall()]
    marks = ", ".join("?" * len(tenants))
    trained = []
    for kind, count in sorted(counts):
        if count < MIN_OBJECTS or kind in have:
            continue
        keys = conn.execute(f"SELECT tenant, id FROM resources WHERE tenant IN ({marks}) AND kind = ? ORDER BY tenant, id", [*tenants, kind])
        value = "SELECT data FROM resources WHERE tenant = ? AND kind = ? AND id = ?"
        samples = [conn.execute(value, [key[0], kind, key[1]]).fetchone()[0] for key in _sampled(keys, kind, count)]
        if _train(conn, packer, kind, samples):
            trained.append(kind)
    packer.use(newest(conn))
    return trained


def _sampled(keys: Iterable[tuple[Any, ...]], kind: str, count: int) -> list[tuple[Any, ...]]:
    """The keys at `SAMPLES` positions of `count`, drawn by a generator seeded with `kind`."""
    if count <= SAMPLES:
        return list(keys)
    chosen = set(random.Random(f"syncd dictionary {kind}").sample(range(count), SAMPLES))
    return [key for position, key in enumerate(keys) if position in chosen]


def _train(conn: sqlite3.Connection, packer: Packer, kind: str, values: Iterable[object]) -> bool:
    """Train `kind`'s dictionary from the stored `values` and write it; False when zstd cannot."""
    samples = [raw for value in values if (raw := _raw(packer, value))]
    try:
        dictionary = zstandard.train_dictionary(SIZE, samples, **TRAINING)
    except zstandard.ZstdError:
        return False
    raw = dictionary.as_bytes()
    cursor = conn.execute(  # (the time as `sqlite_schema.utc_now` writes it, from SQLite's clock: no import back up)
        "INSERT INTO dictionaries (kind, dict, trained_at, objects) VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), ?)",
        [kind, raw, len(samples)],
    )
    packer.add(int(cursor.lastrowid or 0), raw)
    return True


def _raw(packer: Packer, value: object) -> bytes | None:
    """A stored value as JSON bytes (a carried row may already be packed); None if unusable."""
    if isinstance(value, str):
        return value.encode()
    try:
        return packer.unpack(value) if isinstance(value, bytes) else None
    except PackedDataError:
        return None
