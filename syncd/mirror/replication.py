"""The write side's records in the state file: apply runs, the journal and the id map.

Why here: "save the id the moment it exists". Apply writes an intent BEFORE each write call
and, when the answer comes, marks it done and writes the id-map entries it yields in ONE
transaction. Whatever instant the process dies at, the file says either "this call may have
been sent" (an open intent: the next run looks for its effect on the target before writing
again) or "this call is done and here is the id it made" — never "done" without the id.

Journal states (`journal.state`):
    sent     written, committed, just BEFORE the call: the call may have reached the server.
             There is no separate 'planned' step: an intent that never left differs from one
             whose answer was lost only in what reconciliation finds, and one commit per call
             is cheaper than two. ('planned' rows, if another writer makes them, count as sent.)
    done     the call succeeded (or its effect was found on the target); `result_id` is set
             and the id map holds what it made, committed together.
    failed   the call certainly did not take effect (a 4xx, or reconciliation did not find
             it after a lost answer), or re-sending it is harmless (an idempotent call).
A failure whose effect is unknown (`fail(..., may_have_applied=True)`) keeps the intent
`sent`, with the error: the next apply reconciles it (`open_intents`).

An apply run is a row of `runs` with job "apply" and the target as its tenant; it holds the
state file's writer lock while open (`Mirror.start_run`), so two processes never apply into
the same file at once. Its (source, target) pair is kept in the run's `stats`, so journal
functions need only the run id.

Every function takes the Mirror's lock and writes in one `atomic()` transaction; they are
synchronous (call them through `anyio.to_thread` from async code).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from syncd.mirror.errors import MirrorError
from syncd.mirror.schema import utc_now
from syncd.mirror.store import Mirror
from syncd.replay.ops import Op, op_to_json
from syncd.replay.snapshot import IdMap, Origin

__all__ = [
    "APPLY_JOB",
    "MappingEntry",
    "begin_apply",
    "complete",
    "fail",
    "finish_apply",
    "intend",
    "journal",
    "load_idmap",
    "open_intents",
    "record_mappings",
    "resend",
    "seen_before",
]

APPLY_JOB = "apply"
_FINAL = ("complete", "partial", "failed", "cancelled")
_OPEN = ("planned", "sent")
_PAIR = ("source_tenant", "source_org", "target_tenant", "target_org")

MappingEntry = tuple[str, str, str, Origin]
"""(kind, source id, target id, origin) of one id-map entry."""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# -- the id map ----------------------------------------------------------------------------


def load_idmap(mirror: Mirror, source_tenant: str, source_org: str, target_tenant: str, target_org: str) -> IdMap:
    """The id map of one (source organization, target organization) pair."""
    idmap = IdMap()
    with mirror._lock:
        rows = mirror.db.execute(
            "SELECT kind, source_id, target_id, origin FROM idmap "
            "WHERE source_tenant = ? AND source_org = ? AND target_tenant = ? AND target_org = ?",
            [source_tenant, source_org, target_tenant, target_org],
        ).fetchall()
    for kind, source_id, target_id, origin in rows:
        idmap.put(kind, source_id, target_id, origin)
    return idmap


def _write_mappings(
    mirror: Mirror, run: int, pair: Mapping[str, str], mappings: Iterable[MappingEntry], drops: Iterable[tuple[str, str]]
) -> None:
    """Upsert and drop id-map entries (inside the caller's transaction)."""
    keys = [pair[name] for name in _PAIR]
    for kind, source_id, target_id, origin in mappings:
        mirror.db.execute(
            "INSERT INTO idmap (source_tenant, source_org, target_tenant, target_org, kind, source_id, target_id, origin, run) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (source_tenant, source_org, kind, source_id, target_tenant, target_org) DO UPDATE SET "
            "target_id = excluded.target_id, origin = excluded.origin, run = excluded.run",
            [*keys, kind, source_id, str(target_id), origin, run],
        )
    for kind, source_id in drops:
        mirror.db.execute(
            "DELETE FROM idmap WHERE source_tenant = ? AND source_org = ? AND target_tenant = ? AND target_org = ? "
            "AND kind = ? AND source_id = ?",
            [*keys, kind, source_id],
        )


def record_mappings(
    mirror: Mirror, run: int, mappings: Sequence[MappingEntry], drops: Sequence[tuple[str, str]] = ()
) -> None:
    """Write id-map entries that need no call (an `adopt` op), in one transaction."""
    with mirror._lock, mirror.db.atomic():
        _write_mappings(mirror, run, _pair_of_run(mirror, run), mappings, drops)


# -- apply runs ----------------------------------------------------------------------------


def begin_apply(mirror: Mirror, source_tenant: str, source_org: str, target_tenant: str, target_org: str) -> int:
    """Open an apply run into the target; takes the writer lock (MirrorBusyError when another
    live process writes the file) and fails the runs a dead process left `running`."""
    run = mirror.start_run(APPLY_JOB, target_tenant, f"{target_tenant}:{target_org}")
    pair = dict(zip(_PAIR, (source_tenant, source_org, target_tenant, target_org), strict=True))
    with mirror._lock:
        mirror.db.execute("UPDATE runs SET stats = ? WHERE id = ?", [_json({"pair": pair}), run])
    return run


def finish_apply(mirror: Mirror, run: int, status: str, stats: Mapping[str, Any] | None = None, reason: str = "") -> None:
    """End an apply run (complete, partial, failed or cancelled) with its statistics, and let
    the writer lock go when it was this Mirror's last open run. Nothing is merged: an apply
    run's effects are its journal and id-map rows, already committed one by one."""
    if status not in _FINAL:
        raise MirrorError(f"an apply run ends as one of {_FINAL}, not {status!r}")
    with mirror._lock:
        mirror._tenant_of(run)  # raises unless the run is open in this Mirror
        previous = mirror.run(run) or {}
        merged = {**(previous.get("stats") or {}), **(stats or {})}
        mirror.db.execute(
            "UPDATE runs SET status = ?, finished_at = ?, stats = ?, reason = ? WHERE id = ?",
            [status, utc_now(), _json(merged), reason or None, run],
        )
        mirror._end(run)


def _pair_of_run(mirror: Mirror, run: int) -> dict[str, str]:
    row = mirror.db.execute("SELECT job, stats FROM runs WHERE id = ?", [run]).fetchone()
    if row is None or row[0] != APPLY_JOB:
        raise MirrorError(f"run {run} is not an apply run")
    pair = json.loads(row[1] or "{}").get("pair")
    if not isinstance(pair, dict) or set(_PAIR) - set(pair):
        raise MirrorError(f"apply run {run} does not name its source and target")
    return pair


# -- the journal ---------------------------------------------------------------------------


_SPACE_PATH = re.compile(r"^(?:/v1)?/spaces/([^/?#]+)")


def touched_scope(path: str) -> str | None:
    """The crawl scope a write to `path` may change: `space:<id>` for anything under a space.

    Some writes inside a space (custom field values, for one) do not move the space's change
    token, so an incremental read would carry the old rows forward and never see them.
    """
    match = _SPACE_PATH.match(path)
    return f"space:{match.group(1)}" if match else None


def intend(mirror: Mirror, run: int, op: Op, body_resolved: Any, path_resolved: str) -> int:
    """Record, committed, that `op` is about to be sent as `path_resolved` with
    `body_resolved` (state 'sent'); returns the intent's seq within the run.

    Call it BEFORE the call: once it returns, a crash at any point leaves an open intent
    that the next run reconciles instead of blindly sending again. In the same transaction
    the change token of the target scope the call writes into is forgotten, so the next
    read of the target reads that space again (see `touched_scope`)."""
    with mirror._lock, mirror.db.atomic():
        mirror._tenant_of(run)
        pair = _pair_of_run(mirror, run)
        scope = touched_scope(path_resolved)
        if scope is not None and op.client == "target":
            mirror.db.execute("DELETE FROM scopes WHERE tenant = ? AND scope = ?", [pair["target_tenant"], scope])
        seq = int(mirror.db.execute("SELECT coalesce(max(seq), 0) + 1 FROM journal WHERE run = ?", [run]).fetchone()[0])
        mirror.db.execute(
            "INSERT INTO journal (run, seq, source_tenant, source_org, target_tenant, target_org, op_key, kind, "
            "source_id, method, path, body, op, state, attempts, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'sent', 1, ?)",
            [
                run, seq, *(pair[name] for name in _PAIR), op.key, op.kind, op.source_id, op.method.upper(),
                path_resolved, None if body_resolved is None else _json(body_resolved), _json(op_to_json(op)), utc_now(),
            ],
        )
        return seq


def resend(mirror: Mirror, run: int, seq: int) -> None:
    """Record that an intent is about to be sent once more (after reconciliation found no
    effect of the previous attempt): it stays 'sent', one more attempt."""
    with mirror._lock, mirror.db.atomic():
        mirror.db.execute(
            "UPDATE journal SET state = 'sent', attempts = attempts + 1, updated_at = ? WHERE run = ? AND seq = ?",
            [utc_now(), run, seq],
        )


def complete(
    mirror: Mirror,
    run: int,
    seq: int,
    result_id: str | None,
    mappings: Sequence[MappingEntry] = (),
    drops: Sequence[tuple[str, str]] = (),
) -> None:
    """Mark an intent done with the id it made, and write its id-map entries (and drop those
    a delete ended), in ONE transaction. Works on intents of earlier runs too (a reconciled
    open intent): the entries go to that intent's own (source, target) pair."""
    with mirror._lock, mirror.db.atomic():
        row = mirror.db.execute(
            "SELECT source_tenant, source_org, target_tenant, target_org FROM journal WHERE run = ? AND seq = ?",
            [run, seq],
        ).fetchone()
        if row is None:
            raise MirrorError(f"no journal intent {run}/{seq}")
        mirror.db.execute(
            "UPDATE journal SET state = 'done', result_id = ?, error = NULL, updated_at = ? WHERE run = ? AND seq = ?",
            [None if result_id is None else str(result_id), utc_now(), run, seq],
        )
        _write_mappings(mirror, run, dict(zip(_PAIR, row, strict=True)), mappings, drops)


def fail(mirror: Mirror, run: int, seq: int, error: str, may_have_applied: bool) -> None:
    """Record a failed call. When it may have taken effect the intent stays 'sent' (its
    effect is unknown: the next run reconciles it); otherwise it becomes 'failed'."""
    with mirror._lock, mirror.db.atomic():
        mirror.db.execute(
            "UPDATE journal SET state = CASE WHEN ? THEN 'sent' ELSE 'failed' END, error = ?, updated_at = ? "
            "WHERE run = ? AND seq = ?",
            [may_have_applied, error, utc_now(), run, seq],
        )


def open_intents(mirror: Mirror, target_tenant: str, target_org: str) -> list[dict[str, Any]]:
    """Intents into this target whose effect is unknown ('sent', or 'planned'), left by runs
    that are not open in this Mirror, in the order they were written; `op` is the op as
    journaled (ops.op_to_json, None for rows written before it was kept), `body` decoded."""
    with mirror._lock:
        active = set(mirror._active)
        rows = list(
            mirror.db.query(
                "SELECT run, seq, op_key, kind, source_id, source_tenant, source_org, target_tenant, target_org, "
                "method, path, body, op, state, attempts, error, updated_at FROM journal "
                f"WHERE target_tenant = ? AND target_org = ? AND state IN ({', '.join('?' * len(_OPEN))}) "
                "ORDER BY run, seq",
                [target_tenant, target_org, *_OPEN],
            )
        )
    intents = []
    for row in rows:
        if row["run"] in active:
            continue
        row["body"] = json.loads(row["body"]) if row["body"] else None
        row["op"] = json.loads(row["op"]) if row["op"] else None
        intents.append(row)
    return intents


def seen_before(mirror: Mirror, tenant: str, ids: Iterable[str], run: int) -> set[str]:
    """Those of `ids` that a crawl of `tenant` saw in a run older than `run`.

    Why: an object that existed before a call was sent is not what that call made, so a
    reconciliation never takes it (a same-titled object someone made by hand, or the
    original a duplicate was copied from)."""
    wanted = list(dict.fromkeys(str(i) for i in ids))
    seen: set[str] = set()
    with mirror._lock:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = mirror.db.execute(
                f"SELECT id FROM resources WHERE tenant = ? AND first_seen_run < ? AND id IN ({', '.join('?' * len(chunk))})",
                [tenant, run, *chunk],
            ).fetchall()
            seen.update(row[0] for row in rows)
    return seen


def journal(mirror: Mirror, run: int) -> list[dict[str, Any]]:
    """The intents of one run in order (for reports and tests), `body` and `op` decoded."""
    with mirror._lock:
        rows = list(mirror.db.query("SELECT * FROM journal WHERE run = ? ORDER BY seq", [run]))
    for row in rows:
        row["body"] = json.loads(row["body"]) if row["body"] else None
        row["op"] = json.loads(row["op"]) if row["op"] else None
    return rows
