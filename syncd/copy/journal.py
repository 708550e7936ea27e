"""The write side's records in the state file: apply runs, the journal of write intents and
the id map.

Why: "save the id the moment it exists". An intent is committed BEFORE each write call and,
when the answer comes, marked done together with the id-map entries it yields, in ONE
transaction. Whatever instant the process dies at, the file says either "this call may have
been sent" (an open intent: the next run looks for its effect before writing again) or "this
call is done and here is the id it made", never "done" without the id.

Journal states (`journal.state`):
    sent     committed just BEFORE the call: the call may have reached the server.
    done     the call succeeded (or its effect was found); `result_id` is set and the id map
             holds what it made, committed together.
    failed   the call certainly did not take effect, or sending it again is harmless.
A failure whose effect is unknown keeps the intent `sent`, with the error: the next run
settles it (`open_intents`).

The tables live in the state file's schema (`syncd.state.sqlite_schema`), or in the PostgreSQL
state's (`syncd.state.pg_schema`); this module writes them through the StateStore's public
transaction API, in SQL both accept (the one JSON field test comes from `mirror.dialect`). Functions are synchronous: call them through
`anyio.to_thread` from async code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from syncd.copy.model import IdMap, Origin
from syncd.pg.fencing import check_lease
from syncd.state import StateStore, StateError
from syncd.state.sqlite_schema import utc_now

__all__ = [
    "APPLY_JOB",
    "MappingEntry",
    "Pair",
    "begin",
    "complete",
    "fail",
    "finish",
    "intend",
    "intents",
    "load_idmap",
    "open_intents",
    "record_mappings",
    "recorded",
    "remember_tenant_fact",
    "resend",
    "seen_before",
    "target_writes",
    "tenant_fact",
]

APPLY_JOB = "apply"
_OPEN = ("planned", "sent")

MappingEntry = tuple[str, str, str, Origin]
"""(kind, source id, target id, origin) of one id-map entry."""


@dataclass(frozen=True)
class Pair:
    """A copy's source and target organizations: the id map and the journal are per pair."""

    source_tenant: str
    source_org: str
    target_tenant: str
    target_org: str

    def values(self) -> list[str]:
        return [self.source_tenant, self.source_org, self.target_tenant, self.target_org]

    def tenant(self, side: str) -> str:
        return self.source_tenant if side == "source" else self.target_tenant


_PAIR_WHERE = "source_tenant = ? AND source_org = ? AND target_tenant = ? AND target_org = ?"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# -- the id map ----------------------------------------------------------------------------


def load_idmap(store: StateStore, pair: Pair) -> IdMap:
    idmap = IdMap()
    with store.reading() as db:
        rows = db.execute(f"SELECT kind, source_id, target_id, origin FROM idmap WHERE {_PAIR_WHERE}", pair.values()).fetchall()
    for kind, source_id, target_id, origin in rows:
        idmap.put(kind, source_id, target_id, origin)
    return idmap


def recorded(store: StateStore, pair: Pair) -> bool:
    """Whether a copy of this pair left anything in this state: an id-map entry or a journaled
    call (what `mirror verify FILE.db` compares through; nothing means no restore ran here)."""
    with store.reading() as db:
        for table in ("idmap", "journal"):
            if db.execute(f"SELECT 1 FROM {table} WHERE {_PAIR_WHERE} LIMIT 1", pair.values()).fetchone() is not None:
                return True
    return False


def _write_mappings(db: Any, run: int, pair: Pair, mappings: Iterable[MappingEntry], drops: Iterable[tuple[str, str]]) -> None:
    for kind, source_id, target_id, origin in mappings:
        db.execute(
            "INSERT INTO idmap (source_tenant, source_org, target_tenant, target_org, kind, source_id, target_id, origin, run) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (source_tenant, source_org, kind, source_id, target_tenant, target_org) DO UPDATE SET "
            "target_id = excluded.target_id, origin = excluded.origin, run = excluded.run",
            [*pair.values(), kind, source_id, str(target_id), origin, run],
        )
    for kind, source_id in drops:
        db.execute(f"DELETE FROM idmap WHERE {_PAIR_WHERE} AND kind = ? AND source_id = ?", [*pair.values(), kind, source_id])


def record_mappings(store: StateStore, run: int, pair: Pair, mappings: Sequence[MappingEntry], drops: Sequence[tuple[str, str]] = ()) -> None:
    """Write id-map entries that need no call (adoption), in one transaction."""
    with store.transaction() as db:
        _write_mappings(db, run, pair, mappings, drops)


# -- apply runs ----------------------------------------------------------------------------


def begin(store: StateStore, pair: Pair, on_wait: Callable[[], object] | None = None) -> int:
    """Open an apply run into the target: takes the writer lock (the state file's, or the target
    tenant's on PostgreSQL, waited for: see `StateStore.start_run`, whose `on_wait` this is;
    StateBusyError when another live process writes it); the pair is kept in the run's statistics."""
    run = store.start_run(APPLY_JOB, pair.target_tenant, f"{pair.target_tenant}:{pair.target_org}", on_wait=on_wait)
    store.set_run_stats(run, {"pair": asdict(pair)})
    return run


def target_writes(store: StateStore, pair: Pair) -> int:
    """How many apply runs into the pair's target organization have ended. A plan made from a
    read taken while this was N is stale once it is more: another run (a replica's job, an
    operator's copy) wrote the target meanwhile, and applying the plan would make again what
    that run made."""
    with store.reading() as db:
        row = db.execute(
            "SELECT count(*) FROM runs WHERE tenant = ? AND job = ? AND scope_ref = ? AND status <> 'running'",
            [pair.target_tenant, APPLY_JOB, f"{pair.target_tenant}:{pair.target_org}"],
        ).fetchone()
    return int(row[0])


def finish(store: StateStore, run: int, status: str, stats: Mapping[str, Any] | None = None, reason: str = "") -> None:
    """End an apply run (complete, partial, failed or cancelled): its effects are its journal
    and id-map rows, already committed one by one."""
    store.close_run(run, status, stats, reason)


# -- the journal ---------------------------------------------------------------------------

_SPACE_PATH = re.compile(r"^(?:/v1)?/spaces/([^/?#]+)")


def touched_scope(path: str) -> str | None:
    """The crawl scope a write to `path` may change: `space:<id>` for anything under a space.

    Some writes inside a space (custom field values) do not move the space's change token,
    so an incremental read would carry the old rows forward and never see them."""
    match = _SPACE_PATH.match(path)
    return f"space:{match.group(1)}" if match else None


def intend(
    store: StateStore, run: int, pair: Pair, *, key: str, kind: str, source_id: str | None, side: str,
    method: str, path: str, body: Any, intent: Mapping[str, Any],
) -> int:
    """Commit that a call is about to be sent (state 'sent'); returns its seq in the run.

    `intent` is what a later run needs to settle it if its answer is lost (what it makes and
    where that shows up). In the same transaction the target scope the call writes into is
    forgotten, so the next read of the target reads that space again (`touched_scope`)."""
    with store.transaction() as db:
        store.require_open(run)
        check_lease(db, store.dialect)  # a fleet run's lease, or LeaseLost: nothing journaled, nothing sent
        scope = touched_scope(path)
        if scope is not None and side == "target":
            db.execute("DELETE FROM scopes WHERE tenant = ? AND scope = ?", [pair.target_tenant, scope])
        seq = int(db.execute("SELECT coalesce(max(seq), 0) + 1 FROM journal WHERE run = ?", [run]).fetchone()[0])
        db.execute(
            "INSERT INTO journal (run, seq, source_tenant, source_org, target_tenant, target_org, op_key, kind, "
            "source_id, method, path, body, op, state, attempts, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'sent', 1, ?)",
            [
                run, seq, *pair.values(), key, kind, source_id, method.upper(), path,
                None if body is None else _json(body), _json({"side": side, **intent}), utc_now(),
            ],
        )
        return seq


def resend(store: StateStore, run: int, seq: int) -> None:
    """An intent is about to be sent once more (nothing of the previous attempt was found)."""
    with store.transaction() as db:
        check_lease(db, store.dialect)
        db.execute("UPDATE journal SET state = 'sent', attempts = attempts + 1, updated_at = ? WHERE run = ? AND seq = ?", [utc_now(), run, seq])


def complete(
    store: StateStore, run: int, seq: int, result_id: str | None,
    mappings: Sequence[MappingEntry] = (), drops: Sequence[tuple[str, str]] = (),
) -> None:
    """Mark an intent done with the id it made, and write its id-map entries (and drop those a
    delete ended), in ONE transaction. Works on intents of earlier runs too (a settled one):
    the entries go to that intent's own pair."""
    with store.transaction() as db:
        row = db.execute("SELECT source_tenant, source_org, target_tenant, target_org FROM journal WHERE run = ? AND seq = ?", [run, seq]).fetchone()
        if row is None:
            raise StateError(f"no journal intent {run}/{seq}")
        db.execute(
            "UPDATE journal SET state = 'done', result_id = ?, error = NULL, updated_at = ? WHERE run = ? AND seq = ?",
            [None if result_id is None else str(result_id), utc_now(), run, seq],
        )
        _write_mappings(db, run, Pair(*row), mappings, drops)


def fail(store: StateStore, run: int, seq: int, error: str, may_have_applied: bool) -> None:
    """A failed call: when it may have taken effect the intent stays 'sent' (the next run
    settles it); otherwise it becomes 'failed'."""
    with store.transaction() as db:
        db.execute(
            "UPDATE journal SET state = CASE WHEN ? THEN 'sent' ELSE 'failed' END, error = ?, updated_at = ? WHERE run = ? AND seq = ?",
            [may_have_applied, error, utc_now(), run, seq],
        )


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    row["body"] = json.loads(row["body"]) if row["body"] else None
    row["intent"] = json.loads(row.pop("op")) if row.get("op") else {}
    return row


def open_intents(store: StateStore, pair: Pair) -> list[dict[str, Any]]:
    """Intents of this pair whose effect is unknown ('sent'), left by runs that are not open
    in this StateStore, in the order they were written; `body` and `intent` decoded."""
    active = store.open_runs()
    with store.reading() as db:
        rows = list(
            db.query(
                "SELECT run, seq, op_key, kind, source_id, method, path, body, op, state, attempts, error FROM journal "
                f"WHERE {_PAIR_WHERE} AND state IN ({', '.join('?' * len(_OPEN))}) ORDER BY run, seq",
                [*pair.values(), *_OPEN],
            )
        )
    return [_decoded(row) for row in rows if row["run"] not in active]


def seen_before(store: StateStore, tenant: str, ids: Iterable[str], run: int) -> set[str]:
    """Those of `ids` that a read of `tenant` saw in a run older than `run`: an object that
    existed before a call was sent is not what that call made."""
    wanted = list(dict.fromkeys(str(i) for i in ids))
    seen: set[str] = set()
    with store.reading() as db:
        kinds = store.kinds(tenant) or [""]  # (by the primary key: by id alone it walked the tenant)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = db.execute(
                f"SELECT id FROM resources WHERE tenant = ? AND kind IN ({', '.join('?' * len(kinds))}) "
                f"AND id IN ({', '.join('?' * len(chunk))}) AND first_seen_run < ?",
                [tenant, *kinds, *chunk, run],
            ).fetchall()
            seen.update(row[0] for row in rows)
    return seen


def intents(store: StateStore, run: int) -> list[dict[str, Any]]:
    """The intents of one run in order (reports and tests), `body` and `intent` decoded."""
    with store.reading() as db:
        rows = list(db.query("SELECT * FROM journal WHERE run = ? ORDER BY seq", [run]))
    return [_decoded(row) for row in rows]


def made_in_source(store: StateStore, pair: Pair) -> list[str]:
    """Ids of every object this pair's copies made in the SOURCE (duplicates for a
    transfer), done or settled: each must have left the source (transferred or deleted)."""
    side, made = store.dialect.json_text("op", "side"), store.dialect.json_text("op", "made")
    with store.reading() as db:
        rows = db.execute(
            f"SELECT DISTINCT result_id FROM journal WHERE {_PAIR_WHERE} AND result_id IS NOT NULL "
            f"AND {side} = 'source' AND {made} IS NOT NULL",
            pair.values(),
        ).fetchall()
    return [row[0] for row in rows]


# -- what syncd learned about a tenant -------------------------------------------------------

_FACT_KIND = "tenant-fact"
"""Facts about a target tenant's service, observed once and kept: rows of the id map whose
source side is empty (no pair's id map loads them: `load_idmap` reads one pair), so both
backends keep them with no table of their own and `state migrate` carries them along."""


def tenant_fact(store: StateStore, tenant: str, name: str) -> str | None:
    """What was observed of `tenant` for `name` (e.g. "content-import": "replaces"/"adds")."""
    with store.reading() as db:
        row = db.execute(
            f"SELECT target_id FROM idmap WHERE {_PAIR_WHERE} AND kind = ? AND source_id = ?", ["", "", tenant, "", _FACT_KIND, name]
        ).fetchone()
    return str(row[0]) if row else None


def remember_tenant_fact(store: StateStore, run: int, tenant: str, name: str, value: str) -> None:
    with store.transaction() as db:
        _write_mappings(db, run, Pair("", "", tenant, ""), [(_FACT_KIND, name, value, "adopted")], ())
