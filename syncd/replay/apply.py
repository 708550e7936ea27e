"""Apply: execute a Plan against the API so that no object is ever created twice or lost.

The rules, in the order they act:

1. Order. An op runs after the ops named in its `after` AND after the ops that make the
   objects its Refs name (`{ref:...}` in its path, Refs in its params, body or match): a Ref
   is resolved through the id map when the op runs. Independent ops run concurrently (at most
   `concurrency` at once); an op whose dependency failed or was skipped is skipped, with the
   root cause as its reason. A plan with a cycle or a repeated key is refused before anything
   is sent (ValueError); `after` keys not in the plan are ignored (noted).
2. Already done. A create (or an adopt) whose source object is already in the id map sends
   nothing: it is reported "already done". So applying a plan twice creates nothing twice.
   Except a create whose `target_id` is that very mapping: the planner found the mapped
   object gone from the target, and the new object replaces the entry.
3. Journal. Before each call the intent is committed ('sent'); after it, the result id and the
   id-map entries are committed in one transaction (`syncd.mirror.replication`). Killed at
   any instant, the state file says "may have been sent" or "done, with its id".
4. Lost answers. A call that creates an object (a create, or a content op with a `match` such
   as a duplicate) is never retried blindly: the client is told it is not idempotent. When it
   fails with `may_have_applied` (dropped after sending, timeout, 5xx, unreadable 2xx) — or a
   2xx lacks the new id — apply lists `match.path` and looks for what the call would have made
   (`match.field == match.value`, `parent_field == parent`, not already mapped to another
   source object, not the object it copies from, not seen by any crawl before the call was
   sent; the last such item in listing order, as new objects come last). Found: it
   is recorded as 'created' and the intent is done. Not found: the call is sent once more,
   then looked for again; still nothing: the op fails. When the target cannot be listed the
   intent stays open for the next run. Patch, move, delete and other content calls are
   idempotent: the client retries them itself; any DELETE answered 404 counts as done.
5. Restart. Before running the plan, intents of earlier runs of the same (source, target)
   pair left 'sent' are reconciled the same way (with the op as journaled): found -> mapped;
   not found -> closed as not applied, and the plan's op sends it again; cannot tell -> the
   plan's op with that key fails instead of risking a duplicate. Idempotent intents are closed
   (sending them again is harmless). `reconcile_intents` does this step alone: call it BEFORE
   planning, so the plan sees what the lost calls made (e.g. a duplicate left in the source,
   which a plan made first would take for a source space).
6. Ops whose `match` is equal (same list, field, value and parent: e.g. two "Untitled" spaces
   under one collection) run one at a time, so a reconciliation never takes the object of a
   concurrent twin.

`dry_run=True` resolves each op and lists what would be sent (`ApplyResult.would_send`,
and `echo` when given); it sends no write, opens no run and journals nothing. Objects the
dry run would create appear in later ops as `<new KIND SOURCE_ID>`.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlencode

import anyio
from anyio import to_thread

from syncd.api import ApiError, NotFound, TenantClient
from syncd.errors import SyncdError
from syncd.logging import get_logger
from syncd.mirror import Mirror
from syncd.mirror import replication as journal
from syncd.mirror.replication import MappingEntry
from syncd.replay.ops import (
    PATH_REF,
    Match,
    Op,
    Plan,
    Ref,
    Target,
    op_from_json,
    path_refs,
    refs_in,
)
from syncd.replay.snapshot import IdMap

__all__ = [
    "ApplyProgress",
    "ApplyRefused",
    "ApplyResult",
    "Outcome",
    "apply_plan",
    "creates_object",
    "dependencies",
    "reconcile_intents",
    "resolve",
    "resolve_path",
]

log = get_logger("syncd.apply")

Status = Literal["done", "already-done", "adopted", "reconciled", "failed", "skipped", "dry-run"]
_NOT_OK = ("failed", "skipped")


class ApplyRefused(SyncdError):
    """The plan says it must not be applied (e.g. more deletes than --max-delete)."""

    exit_code = 2


class Unresolved(LookupError):
    """A Ref names a source object the id map does not hold (not created on the target yet)."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        super().__init__(f"{ref.kind} {ref.source_id} is not on the target (not in the id map)")


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What became of one op; `reason` says why for anything but a plain success."""

    key: str
    kind: str
    title: str
    status: Status
    reason: str = ""
    result_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status not in _NOT_OK


@dataclass(frozen=True)
class ApplyProgress:
    """Counts handed to `on_progress` after each op."""

    done: int
    total: int
    writes: int
    failures: int
    reads: int


@dataclass
class ApplyResult:
    """The run's report: every op's outcome, the calls made, what was reconciled."""

    run: int | None
    total: int
    dry_run: bool = False
    writes: int = 0
    """Write calls sent by apply (each re-send counts; the client's own retries do not)."""
    reads: int = 0
    """List pages read to reconcile lost answers."""
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    reconciled: list[str] = field(default_factory=list)
    """Keys of ops (this run's, or intents of earlier runs) whose lost answer was found."""
    would_send: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def of(self, *statuses: Status) -> list[Outcome]:
        return [o for o in self.outcomes.values() if o.status in statuses]

    @property
    def failed(self) -> list[Outcome]:
        return self.of("failed")

    @property
    def skipped(self) -> list[Outcome]:
        return self.of("skipped")

    @property
    def adopted(self) -> list[Outcome]:
        return self.of("adopted")

    @property
    def already_done(self) -> list[Outcome]:
        return self.of("already-done")

    @property
    def ok(self) -> bool:
        return not self.failed and not self.skipped and len(self.outcomes) == self.total

    def stats(self) -> dict[str, Any]:
        counts = Counter(o.status for o in self.outcomes.values())
        return {"ops": self.total, "writes": self.writes, "reads": self.reads, "reconciled": len(self.reconciled), **counts}

    def summary(self, limit: int = 20) -> str:
        """Totals, then (a dry run) every call it would send, then failures and skips with
        their reasons (at most `limit`) and notes."""
        counts = Counter(o.status for o in self.outcomes.values())
        if self.dry_run:
            head = f"dry run: {len(self.would_send)} calls would be sent for {self.total} operations"
        else:
            head = f"applied {self.total} operations: {counts['done']} done"
        parts = [
            f"{counts[s]} {label}"
            for s, label in (("adopted", "adopted"), ("already-done", "already done"), ("failed", "failed"), ("skipped", "skipped"))
            if counts[s]
        ]
        if self.reconciled:
            parts.append(f"{len(self.reconciled)} found on the target after a lost answer")
        lines = [", ".join([head, *parts]) + f" ({self.writes} write calls, {self.reads} reads)"]
        lines += [f"  {line}" for line in self.would_send]  # a dry run shows every call
        problems = self.failed + self.skipped
        lines += [f"  {o.status} {o.kind} {o.title or o.key}: {o.reason}" for o in problems[:limit]]
        if len(problems) > limit:
            lines.append(f"  ... and {len(problems) - limit} more")
        lines += [f"  note: {note}" for note in self.notes[:limit]]
        return "\n".join(lines)


# -- pure helpers --------------------------------------------------------------------------


def creates_object(op: Op) -> bool:
    """Whether the call makes a new object: not idempotent, reconciled after a lost answer,
    and recorded in the id map as (op.kind, op.source_id) -> the answer's result id."""
    if op.action == "create":
        return True
    return op.action == "content" and (op.match is not None or op.path.rstrip("/").endswith("/duplicate"))


def _consumed(op: Op) -> list[Ref]:
    refs = [*path_refs(op.path), *refs_in(op.params), *refs_in(op.body)]
    if op.match is not None:
        m = op.match
        refs += [*path_refs(m.path), *refs_in(m.params), *refs_in(m.value), *refs_in(m.parent)]
    return refs


def _produced(op: Op) -> list[tuple[str, str]]:
    made = [(op.kind, op.source_id)] if op.source_id and (op.action == "adopt" or creates_object(op)) else []
    return made + [(kind, source_id) for kind, source_id, _ in op.produces]


def dependencies(plan: Plan) -> tuple[dict[str, list[str]], list[str]]:
    """op key -> keys it waits for (its `after` plus the producers of the Refs it uses), and
    notes. Raises ValueError for a repeated key or a cycle: such a plan cannot be applied."""
    keys: set[str] = set()
    for op in plan.ops:
        if op.key in keys:
            raise ValueError(f"the plan holds two ops with the key {op.key!r}")
        keys.add(op.key)
    producers: dict[tuple[str, str], str] = {}
    for op in plan.ops:
        for made in _produced(op):
            producers.setdefault(made, op.key)
    deps: dict[str, list[str]] = {}
    notes: list[str] = []
    for op in plan.ops:
        wanted: list[str] = []
        for key in op.after:
            if key in keys:
                wanted.append(key)
            else:
                notes.append(f"{op.key} waits for {key}, which is not in the plan: ignored")
        wanted += [p for ref in _consumed(op) if (p := producers.get((ref.kind, ref.source_id))) is not None]
        deps[op.key] = [k for k in dict.fromkeys(wanted) if k != op.key]
    _check_acyclic(deps)
    return deps, notes


def _check_acyclic(deps: Mapping[str, list[str]]) -> None:
    waiting = {key: len(before) for key, before in deps.items()}
    followers: dict[str, list[str]] = {key: [] for key in deps}
    for key, before in deps.items():
        for dep in before:
            followers[dep].append(key)
    ready = [key for key, n in waiting.items() if n == 0]
    while ready:
        for follower in followers[ready.pop()]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                ready.append(follower)
    stuck = sorted(key for key, n in waiting.items() if n)
    if stuck:
        raise ValueError(f"the plan's ops wait for each other in a cycle: {', '.join(stuck[:5])}")


def resolve(value: Any, idmap: IdMap) -> Any:
    """`value` with every Ref replaced by its target id and every Target by its id."""
    if isinstance(value, Ref):
        target = idmap.target(value.kind, value.source_id)
        if target is None:
            raise Unresolved(value)
        return target
    if isinstance(value, Target):
        return value.target_id
    if isinstance(value, Mapping):
        return {k: resolve(v, idmap) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [resolve(v, idmap) for v in value]
    return value


def resolve_path(path: str, idmap: IdMap) -> str:
    """`path` with each `{ref:KIND:SOURCE_ID}` replaced by that object's target id."""
    return PATH_REF.sub(lambda m: str(resolve(Ref(m.group(1), m.group(2)), idmap)), path)


def _resolve_match(match: Match, idmap: IdMap) -> Match:
    return replace(
        match,
        path=resolve_path(match.path, idmap),
        params=resolve(match.params, idmap),
        value=resolve(match.value, idmap),
        parent=resolve(match.parent, idmap),
    )


def get_path(data: Any, dotted: str) -> Any:
    """The value at `a.b.0.c` in a JSON value, or None when any step is missing."""
    for part in dotted.split(".") if dotted else []:
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and part.lstrip("-").isdigit() and -len(data) <= int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _shown(path: str, params: Mapping[str, Any]) -> str:
    return f"{path}?{urlencode(params, doseq=True)}" if params else path


def _match_key(op: Op, match: Match) -> str:
    return json.dumps([op.client, match.path, match.params, match.field, match.value, match.parent_field, match.parent], sort_keys=True, default=str)


# -- the runner ----------------------------------------------------------------------------


class _CannotCheck(Exception):
    """An op that cannot be sent or checked here (no match rule, no source client)."""


class _Runner:
    """One application of one plan: shared state of the op tasks (one event loop)."""

    def __init__(
        self,
        plan: Plan,
        *,
        target: TenantClient,
        source: TenantClient | None,
        mirror: Mirror,
        pair: tuple[str, str],
        target_tenant: str,
        idmap: IdMap,
        run: int | None,
        concurrency: int,
        on_progress: Callable[[ApplyProgress], Any] | None,
        echo: Callable[[str], Any] | None,
    ) -> None:
        self.plan, self.target, self.source, self.mirror = plan, target, source, mirror
        self.pair, self.idmap, self.run = pair, idmap, run
        self.tenants = (pair[0], target_tenant)
        self.dry_run = run is None
        self.deps, notes = dependencies(plan)
        self.events = {op.key: anyio.Event() for op in plan.ops}
        self.limiter = anyio.CapacityLimiter(max(1, concurrency))
        self.match_locks: dict[str, anyio.Lock] = {}
        self.blocked: dict[str, str] = {}
        self.on_progress, self.echo = on_progress, echo
        self.result = ApplyResult(run=run, total=len(plan.ops), dry_run=self.dry_run, notes=notes)

    # -- state-file calls: short transactions in a worker thread, never cut in half --------

    async def _db(self, fn: Callable[..., Any], *args: Any) -> Any:
        with anyio.CancelScope(shield=True):
            return await to_thread.run_sync(fn, self.mirror, *args)

    async def _complete(self, run: int, seq: int, result_id: str | None, mappings: list[MappingEntry], drops: list[tuple[str, str]]) -> None:
        with anyio.CancelScope(shield=True):
            await to_thread.run_sync(journal.complete, self.mirror, run, seq, result_id, mappings, drops)
            for kind, source_id, target_id, origin in mappings:
                self.idmap.put(kind, source_id, target_id, origin)
            for kind, source_id in drops:
                self.idmap.drop(kind, source_id)

    # -- helpers ---------------------------------------------------------------------------

    def _client(self, op: Op) -> TenantClient:
        if op.client == "source":
            if self.source is None:
                raise _CannotCheck("this op is sent with the source's credentials, and no source client was given")
            return self.source
        return self.target

    def _outcome(self, op: Op, status: Status, reason: str = "", result_id: str | None = None) -> Outcome:
        if status in _NOT_OK:
            log.warning("apply.op_" + status, op=op.key, reason=reason)
        return Outcome(op.key, op.kind, op.title, status, reason, result_id)

    def _made_already(self, op: Op) -> str | None:
        """The target id a creating op's object is mapped to, unless the op replaces that very
        entry (the planner puts a mapped object that vanished from the target in `target_id`)."""
        mapped = self.idmap.target(op.kind, op.source_id) if op.source_id else None
        return None if mapped is None or mapped == op.target_id else mapped

    def _mappings(self, op: Op, data: Any) -> tuple[str | None, list[MappingEntry]]:
        """(result id, id-map entries) that an answer (or a found item) yields for `op`."""
        result_id = None
        entries: list[MappingEntry] = []
        if creates_object(op):
            found = get_path(data, op.result_id_field)
            result_id = None if found is None else str(found)
            if result_id is not None and op.source_id:
                entries.append((op.kind, op.source_id, result_id, "created"))
        for kind, source_id, dotted in op.produces:
            value = get_path(data, dotted)
            if value is None:
                self.result.notes.append(f"{op.key}: the answer holds no {dotted!r}, so {kind} {source_id} is not mapped")
            else:
                entries.append((kind, source_id, str(value), "created"))
        return result_id, entries

    async def _find(self, op: Op, match: Match, since_run: int, cache: dict[str, list[Any]] | None = None) -> Any:
        """The item of `match.path` that the op, sent in run `since_run`, would have made: it
        matches, is mapped to no other source object, is not the object copied from, and no
        crawl saw it before that run. The last such item in listing order, or None."""
        client = self._client(op)
        key = json.dumps([op.client, match.path, match.params], sort_keys=True, default=str)
        items = cache.get(key) if cache is not None else None
        if items is None:
            items = []
            async for page in client.paginate(match.path, match.params or None):
                self.result.reads += 1
                items.extend(page)
            if cache is not None:
                cache[key] = items
        taken = self.idmap.sources_of(op.kind)
        candidates: dict[str, Any] = {}
        for item in items:
            if get_path(item, match.field) != match.value:
                continue
            if match.parent_field is not None and get_path(item, match.parent_field) != match.parent:
                continue
            item_id = get_path(item, op.result_id_field)
            if item_id is None or str(item_id) == op.source_id or taken.get(str(item_id), op.source_id) != op.source_id:
                continue  # a call never makes the object it copies, nor one mapped to another
            candidates[str(item_id)] = item
        tenant = self.tenants[1] if op.client == "target" else self.tenants[0]
        older = await self._db(journal.seen_before, tenant, list(candidates), since_run) if candidates else set()
        fresh = [item for item_id, item in candidates.items() if item_id not in older]
        return fresh[-1] if fresh else None

    # -- earlier runs' intents -------------------------------------------------------------

    async def reconcile_open(self, intents: Iterable[Mapping[str, Any]]) -> None:
        """Settle the intents earlier runs left 'sent', before anything new is written."""
        by_key = {op.key: op for op in self.plan.ops}
        cache: dict[str, list[Any]] = {}
        for intent in intents:
            run, seq, key = intent["run"], intent["seq"], intent["op_key"]
            where = f"intent {run}/{seq} ({key})"
            if (intent["source_tenant"], intent["source_org"]) != self.pair:
                self.result.notes.append(f"{where} copies from {intent['source_tenant']}:{intent['source_org']}: left for that copy")
                continue
            op = op_from_json(intent["op"]) if intent["op"] else by_key.get(key)
            if op is None:
                self.result.notes.append(f"{where}: its effect is unknown and its op is not known: left open")
                continue
            if not creates_object(op):
                await self._db(journal.fail, run, seq, f"its run ended with its effect unknown; closed by run {self.run}: safe to send again", False)
                continue
            mapped = self._made_already(op)
            if mapped is not None:
                await self._complete(run, seq, mapped, [], [])
                self.result.notes.append(f"{where}: {op.kind} {op.source_id} was mapped since (to {mapped})")
                continue
            try:
                if op.match is None:
                    raise _CannotCheck("the op has no match rule to look for what it made")
                item = await self._find(op, _resolve_match(op.match, self.idmap), run, cache)
            except (ApiError, Unresolved, _CannotCheck) as exc:
                self.blocked[key] = f"an earlier attempt (run {run}) may have made it, and that could not be checked: {exc}"
                self.result.notes.append(f"{where}: left open: {exc}")
                continue
            if item is None:
                await self._db(journal.fail, run, seq, f"not applied: nothing matching was on the target (checked by run {self.run})", False)
                continue
            result_id, entries = self._mappings(op, item)
            await self._complete(run, seq, result_id, entries, [])
            self.result.reconciled.append(key)

    # -- the plan --------------------------------------------------------------------------

    async def run_all(self) -> None:
        async with anyio.create_task_group() as tg:
            for op in self.plan.ops:
                tg.start_soon(self._run_op, op)

    async def _run_op(self, op: Op) -> None:
        outcome: Outcome | None = None
        try:
            for dep in self.deps[op.key]:
                await self.events[dep].wait()
            blocker = next((self.result.outcomes[d] for d in self.deps[op.key] if not self.result.outcomes[d].ok), None)
            if blocker is not None:
                reason = blocker.reason if blocker.status == "skipped" else f"{blocker.key} failed: {blocker.reason}"
                outcome = self._outcome(op, "skipped", reason)
            else:
                async with self.limiter:
                    outcome = await self._execute(op)
        finally:
            self.result.outcomes[op.key] = outcome or self._outcome(op, "failed", "interrupted")
            self.events[op.key].set()
            if self.on_progress is not None:
                failures = sum(1 for o in self.result.outcomes.values() if not o.ok)
                self.on_progress(ApplyProgress(len(self.result.outcomes), self.result.total, self.result.writes, failures, self.result.reads))

    async def _execute(self, op: Op) -> Outcome:
        if op.key in self.blocked:
            return self._outcome(op, "failed", self.blocked[op.key])
        if op.action == "adopt":
            return await self._adopt(op)
        creating = creates_object(op)
        if creating and (mapped := self._made_already(op)) is not None:
            return self._outcome(op, "already-done", f"{op.kind} {op.source_id} is already mapped to {mapped}", mapped)
        try:
            client = self._client(op)
            path = resolve_path(op.path, self.idmap)
            params = resolve(op.params, self.idmap)
            body = resolve(op.body, self.idmap)
            match = _resolve_match(op.match, self.idmap) if creating and op.match is not None else None
        except (Unresolved, _CannotCheck) as exc:
            return self._outcome(op, "failed", f"cannot send: {exc}")
        if self.dry_run:
            return self._pretend(op, path, params, body, creating)
        lock = self.match_locks.setdefault(_match_key(op, match), anyio.Lock()) if match is not None else None
        async with lock if lock is not None else contextlib.nullcontext():
            assert self.run is not None
            seq = await self._db(journal.intend, self.run, op, body, _shown(path, params))
            return await self._send(op, client, seq, path, params, body, match, creating)

    async def _send(
        self, op: Op, client: TenantClient, seq: int, path: str, params: dict[str, Any], body: Any, match: Match | None, creating: bool
    ) -> Outcome:
        assert self.run is not None
        drops = [(op.kind, op.source_id)] if op.action == "delete" and op.source_id else []
        attempt = 1
        while True:
            self.result.writes += 1
            try:
                response = await client.request(op.method, path, params=params or None, json=body, idempotent=not creating)
            except ApiError as exc:
                # A DELETE (an object's, or a membership's) that finds nothing left is done:
                # it is what a retry after a lost answer sees.
                if op.method == "DELETE" and isinstance(exc, NotFound):
                    await self._complete(self.run, seq, None, [], drops)
                    return self._outcome(op, "done", "already gone (404)")
                if not (creating and exc.may_have_applied):
                    await self._db(journal.fail, self.run, seq, str(exc), False)
                    return self._outcome(op, "failed", str(exc))
                lost = str(exc)
            else:
                result_id, entries = self._mappings(op, response.data)
                if not creating or result_id is not None:
                    await self._complete(self.run, seq, result_id, entries, drops)
                    return self._outcome(op, "done", result_id=result_id)
                lost = f"the answer holds no {op.result_id_field!r}"
            # The call may have made the object: look for it before sending anything again.
            if match is None:
                reason = f"{lost}; the op has no match rule to look for what it made: left open for a check"
                await self._db(journal.fail, self.run, seq, reason, True)
                return self._outcome(op, "failed", reason)
            try:
                item = await self._find(op, match, self.run)
            except ApiError as exc:
                reason = f"{lost}; then the target could not be listed to check ({exc}): left open for the next run"
                await self._db(journal.fail, self.run, seq, reason, True)
                return self._outcome(op, "failed", reason)
            if item is not None:
                result_id, entries = self._mappings(op, item)
                await self._complete(self.run, seq, result_id, entries, drops)
                self.result.reconciled.append(op.key)
                return self._outcome(op, "reconciled", f"answer lost ({lost}); found on the target", result_id)
            if attempt >= 2:
                reason = f"{lost}; not made after {attempt} attempts (checked on the target)"
                await self._db(journal.fail, self.run, seq, reason, False)
                return self._outcome(op, "failed", reason)
            attempt += 1
            await self._db(journal.resend, self.run, seq)

    async def _adopt(self, op: Op) -> Outcome:
        if not op.source_id or not op.target_id:
            return self._outcome(op, "failed", "an adopt op needs a source id and a target id")
        mapped = self.idmap.target(op.kind, op.source_id)
        if mapped is not None:
            note = "" if mapped == op.target_id else f"; kept instead of {op.target_id}"
            return self._outcome(op, "already-done", f"{op.kind} {op.source_id} is already mapped to {mapped}{note}", mapped)
        entry: MappingEntry = (op.kind, op.source_id, op.target_id, "adopted")
        if self.dry_run:
            self._say(f"adopt {op.kind} {op.title or op.source_id}: {op.source_id} -> {op.target_id}")
        else:
            assert self.run is not None
            await self._db(journal.record_mappings, self.run, [entry])
        self.idmap.put(*entry)
        return self._outcome(op, "adopted", result_id=op.target_id)

    def _pretend(self, op: Op, path: str, params: dict[str, Any], body: Any, creating: bool) -> Outcome:
        text = f"{op.method.upper()} {_shown(path, params)}"
        if body is not None:
            text += " " + json.dumps(body, ensure_ascii=False, sort_keys=True, default=str)
        self._say(text)
        if creating and op.source_id:
            self.idmap.put(op.kind, op.source_id, f"<new {op.kind} {op.source_id}>", "created")
        for kind, source_id, _ in op.produces:
            self.idmap.put(kind, source_id, f"<new {kind} {source_id}>", "created")
        if op.action == "delete" and op.source_id:
            self.idmap.drop(op.kind, op.source_id)
        return self._outcome(op, "dry-run")

    def _say(self, line: str) -> None:
        self.result.would_send.append(line)
        if self.echo is not None:
            self.echo(line)


# -- entry point ---------------------------------------------------------------------------


async def apply_plan(
    plan: Plan,
    *,
    target: TenantClient,
    source: TenantClient | None,
    mirror: Mirror,
    source_tenant: str,
    source_org: str,
    target_tenant: str,
    target_org: str,
    concurrency: int = 8,
    dry_run: bool = False,
    on_progress: Callable[[ApplyProgress], Any] | None = None,
    echo: Callable[[str], Any] | None = None,
) -> ApplyResult:
    """Execute `plan` into target_tenant:target_org (see the module docstring).

    Raises ApplyRefused for a refused plan, ValueError for a plan that cannot be ordered,
    MirrorBusyError when another process is writing the state file; API failures of single
    ops are reported in the result, never raised."""
    if plan.refused:
        raise ApplyRefused(f"the plan must not be applied: {plan.refused}")
    dependencies(plan)  # a broken plan is refused before anything is written
    pair = (source_tenant, source_org)
    idmap = await to_thread.run_sync(journal.load_idmap, mirror, source_tenant, source_org, target_tenant, target_org)
    if dry_run:
        runner = _Runner(plan, target=target, source=source, mirror=mirror, pair=pair, target_tenant=target_tenant, idmap=idmap.copy(), run=None,
                         concurrency=concurrency, on_progress=on_progress, echo=echo)
        pending = await to_thread.run_sync(journal.open_intents, mirror, target_tenant, target_org)
        if pending:
            runner.result.notes.append(f"{len(pending)} calls of earlier runs have an unknown effect: a real apply checks them first")
        await runner.run_all()
        return runner.result
    run = await to_thread.run_sync(journal.begin_apply, mirror, source_tenant, source_org, target_tenant, target_org)
    status, reason = "failed", "apply stopped on an error"
    runner = None
    try:
        runner = _Runner(plan, target=target, source=source, mirror=mirror, pair=pair, target_tenant=target_tenant, idmap=idmap, run=run,
                         concurrency=concurrency, on_progress=on_progress, echo=echo)
        intents = await to_thread.run_sync(journal.open_intents, mirror, target_tenant, target_org)
        await runner.reconcile_open(intents)
        await runner.run_all()
        status, reason = ("complete", "") if runner.result.ok else ("partial", "some operations failed or were skipped")
        return runner.result
    except anyio.get_cancelled_exc_class():
        status, reason = "cancelled", "apply was interrupted"
        raise
    except KeyboardInterrupt:
        status, reason = "cancelled", "apply was interrupted"
        raise
    except Exception as exc:
        reason = f"apply stopped: {exc}"
        raise
    finally:
        # Synchronous on purpose: it must run even while the task is being cancelled.
        stats = {"apply": runner.result.stats()} if runner is not None else {}
        journal.finish_apply(mirror, run, status, stats, reason)


async def reconcile_intents(
    *,
    target: TenantClient,
    source: TenantClient | None,
    mirror: Mirror,
    source_tenant: str,
    source_org: str,
    target_tenant: str,
    target_org: str,
) -> ApplyResult | None:
    """Settle the calls earlier applies of this pair left with an unknown effect (rule 5),
    in a run of their own; None when there are none (no run is opened)."""
    if not await to_thread.run_sync(journal.open_intents, mirror, target_tenant, target_org):
        return None
    return await apply_plan(
        Plan(), target=target, source=source, mirror=mirror, source_tenant=source_tenant, source_org=source_org,
        target_tenant=target_tenant, target_org=target_org,
    )
