"""The write calls of one apply run: journaled, never sent blindly twice, and settled by what
the service shows, not by what we expected it to do.

Two kinds of calls:

- `call`: idempotent in effect (a patch, a move, a delete, a content import, a section's
  group membership). The intent is committed, the client retries transient failures itself,
  and a DELETE answered 404 counts as done.
- `create`: makes an object. The intent is committed with where its object shows up
  (`Expect`). The client never retries it after a possible effect. When the answer is lost
  (dropped after sending, timeout, 5xx, unreadable 2xx, no id in it), the listing is read
  and what APPEARED there since the intent was written is the object: an id that no read of
  this tenant saw before the run, mapped to no other source object, under the expected
  parent, and not one the expectation excludes (the original of a duplicate). Found: it is
  mapped ('created') and the intent is done. Nothing: the call is sent once more, then
  looked for again; still nothing: the op fails. The target cannot be listed: the intent
  stays open for the next run.

Creates into one listing take turns (`Op.serial`): one at a time, so that what appeared is
one object, unless the siblings being created are told apart by the names they send
(`syncd.copy.overlap`). A create sent beside others is journaled with those names and takes
only the new object bearing its own name; a new object bearing none of the group's names is
not explained, and the create is left open rather than sent again (`Unexplained`). Field
values are used only to tell apart several new objects, and only values this run SENT (never
a name the service may have derived, like "Title (copy)").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
from anyio import to_thread

from syncd.api import ApiError, NotFound, TenantClient, paginate
from syncd.catalog import BY_NAME, deleted, segment
from syncd.copy import journal
from syncd.copy.import_bound import ImportBound
from syncd.copy.journal import MappingEntry, Pair
from syncd.copy.model import IdMap
from syncd.copy.ops import PATH_REF, Expect, Ref, Side, expect_to_json
from syncd.copy.overlap import Names, names_to_json
from syncd.copy.placement import Placement, Turnstile
from syncd.copy.rules import ref_id
from syncd.errors import SyncdError
from syncd.state import StateStore

if TYPE_CHECKING:
    from syncd.copy.served import Publisher

__all__ = ["SERIAL", "CallFailed", "Serial", "Unexplained", "Unresolved", "WriteCounts", "Writer", "get_path", "listings_side_by_side"]


class Unresolved(LookupError):
    """A Ref names a source object the id map does not hold (not on the target yet)."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        super().__init__(f"{ref.kind} {ref.source_id} is not on the target (not in the id map)")


class CallFailed(SyncdError):
    """A write did not take effect, or its effect could not be established (`open`: the
    intent stays open for the next run to settle)."""

    def __init__(self, message: str, *, open: bool = False) -> None:
        super().__init__(message)
        self.open = open


class Unexplained(CallFailed):
    """A create sent beside its siblings found no new object of its name, but one that bears
    none of theirs either: it may be its own object under a name the service changed, so it
    is not sent again (left open: settled when nothing else is in flight, `recover`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, open=True)


@dataclass
class WriteCounts:
    """What the run's calls cost and found."""

    writes: int = 0
    """Write calls sent (each re-send counts; the client's own retries do not)."""
    reads: int = 0
    """List pages and objects read to settle lost answers and to settle order, paths and
    defaults."""
    reconciled: list[str] = field(default_factory=list)
    """Keys of calls whose lost answer was settled by what appeared."""
    notes: list[str] = field(default_factory=list)


class Serial:
    """The turn of one op among the ops that create into the same listing (`Turnstile`). Held
    only while it creates: the checks after a create (patches) do not keep the next create
    waiting. `names`: how its object is told apart from its siblings' (None: it cannot be,
    and it goes alone); `beside`: it holds the turn beside others, so after a lost answer
    only its name says which new object is its own."""

    def __init__(self, turnstile: Turnstile, index: int, kind: str, names: Names | None = None) -> None:
        self.turnstile, self.index, self.kind, self.names = turnstile, index, kind, names
        self.held = self.beside = False

    async def acquire(self) -> None:
        self.beside = await self.turnstile.acquire(self.index, self.kind, self.names is not None)
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.turnstile.release(self.index)


SERIAL: ContextVar[Serial | None] = ContextVar("syncd_copy_serial", default=None)
"""The running op's turn (set by the executor in the op's task)."""


def get_path(data: Any, dotted: str) -> Any:
    """The value at `a.b.0.c` in a JSON value, or None when any step is missing."""
    for part in dotted.split(".") if dotted else []:
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def under_parent(expect: Expect, item: Any) -> bool:
    """Whether a listed item is under the parent `expect` names (any item, without one)."""
    return expect.parent_field is None or ref_id(get_path(item, expect.parent_field)) == expect.parent


def own_by_name(fresh: Sequence[Any], names: Names, expect: Expect) -> Any | None:
    """Of the new objects of a listing, the one a create sent beside its siblings made: the
    only one of its name; None when none is and each bears a sibling's name (see `find_made`)."""
    own = [item for item in fresh if names.of(item) == names.mine]
    if len(own) == 1:
        return own[0]
    ids = ", ".join(str(get_path(item, expect.id_field)) for item in (own or fresh)[:5])
    if own:
        raise CallFailed(f"{len(own)} new objects named {names.mine!r} appeared in {expect.path} ({ids}): cannot tell which one this call made")
    strangers = [item for item in fresh if not names.theirs(names.of(item))]
    if strangers:
        ids = ", ".join(str(get_path(item, expect.id_field)) for item in strangers[:5])
        raise Unexplained(f"no new object named {names.mine!r} in {expect.path}, but {len(strangers)} named as none of its siblings ({ids}): not sent again")
    return None


class Writer:
    """Sends the calls of one apply run (see the module docstring). Shared by the op tasks
    of one event loop; state-file calls run in a worker thread and are never cut in half."""

    def __init__(
        self,
        *,
        store: StateStore,
        pair: Pair,
        run: int,
        idmap: IdMap,
        target: TenantClient,
        source: TenantClient | None,
        counts: WriteCounts | None = None,
        publisher: Publisher | None = None,
        imports: ImportBound | None = None,
    ) -> None:
        self.store, self.pair, self.run, self.idmap = store, pair, run, idmap
        self.clients: dict[str, TenantClient | None] = {"target": target, "source": source}
        self.counts = counts or WriteCounts()
        self.publisher = publisher
        """The run's content source, when content is served (`syncd.copy.served`)."""
        self.placement = Placement()
        """Where new objects landed, per kind (`syncd.copy.placement`)."""
        self.imports = imports or ImportBound(128)
        """The run's content imports in flight (`syncd.copy.import_bound`), each held until the
        space shows it."""

    @staticmethod
    def done_creating() -> None:
        """The running op has made what it makes: the next create into its listing may go."""
        serial = SERIAL.get()
        if serial is not None:
            serial.release()

    # -- references --------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        """`value` with every Ref replaced by its target id. Strings are left as they are:
        a title that reads `{ref:space:x}` is a title (paths go through `resolve_path`)."""
        if isinstance(value, Ref):
            found = self.idmap.target(value.kind, value.source_id)
            if found is None:
                raise Unresolved(value)
            return found
        if isinstance(value, Mapping):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.resolve(v) for v in value]
        return value

    def resolve_path(self, path: str) -> str:
        """An op's path with every `{ref:KIND:SOURCE_ID}` replaced by the target id, as one
        path segment (an id holding `/` or reading `..` stays one segment)."""
        return PATH_REF.sub(lambda m: segment(self.resolve(Ref(m.group(1), m.group(2)))), path)

    def resolve_expect(self, expect: Expect) -> Expect:
        return replace(
            expect, path=self.resolve_path(expect.path), parent=self.resolve(expect.parent), exclude=tuple(self.resolve(list(expect.exclude)))
        )

    def client(self, side: Side) -> TenantClient:
        client = self.clients.get(side)
        if client is None:
            raise CallFailed(f"no client for the {side} side: this copy cannot write there")
        return client

    # -- the state file ----------------------------------------------------------------

    async def db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a journal function on the state file in a worker thread; a cancellation waits
        for it, so a transaction is never cut in half."""
        with anyio.CancelScope(shield=True):
            return await to_thread.run_sync(lambda: fn(self.store, *args, **kwargs))

    async def record(self, mappings: Sequence[MappingEntry], drops: Sequence[tuple[str, str]] = ()) -> None:
        """Id-map entries that need no call (an adoption, a site-space a section made)."""
        await self.db(journal.record_mappings, self.run, self.pair, mappings, drops)
        for kind, source_id, target_id, origin in mappings:
            self.idmap.put(kind, source_id, target_id, origin)
        for kind, source_id in drops:
            self.idmap.drop(kind, source_id)

    # -- idempotent calls --------------------------------------------------------------

    async def call(
        self, key: str, kind: str, source_id: str | None, method: str, path: str, body: Any = None, *,
        side: Side = "target", drops: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """Send a call whose repetition is harmless; returns the answer's JSON (None for 204).
        Raises ApiError when it failed (the intent is closed as failed)."""
        client = self.client(side)
        seq = await self.db(
            journal.intend, self.run, self.pair, key=key, kind=kind, source_id=source_id, side=side,
            method=method, path=path, body=body, intent={},
        )
        self.counts.writes += 1
        try:
            response = await client.request(method, path, json=body, idempotent=True)
        except NotFound as exc:
            if method.upper() != "DELETE":
                await self.db(journal.fail, self.run, seq, str(exc), False)
                raise
            await self.db(journal.complete, self.run, seq, None, (), drops)
            self._drop(drops)
            return None
        except ApiError as exc:
            await self.db(journal.fail, self.run, seq, str(exc), False)
            raise
        await self.db(journal.complete, self.run, seq, None, (), drops)
        self._drop(drops)
        return response.data

    async def send_once(
        self, key: str, kind: str, source_id: str | None, method: str, path: str, body: Any, applied: Callable[[], Awaitable[bool]],
        *, journal_body: Any = None,
    ) -> Any:
        """Send a target write that must not be repeated blindly (an import into a service that
        may add what it imports to what is there): when its answer is lost, `applied()` looks
        at the target to tell whether it took effect (`_once_or_found`). Returns the answer's
        JSON (None when the effect was found instead). `journal_body`: what the journal keeps
        of the body when it must not keep it all (a capability URL), else the body."""
        seq = await self.db(
            journal.intend, self.run, self.pair, key=key, kind=kind, source_id=source_id, side="target",
            method=method, path=path, body=body if journal_body is None else journal_body, intent={},
        )

        async def took() -> bool | None:
            return True if await applied() else None

        data, found = await self._once_or_found(
            seq, "target", method, path, body, lambda data: (data, None), took,
            unable="whether it took effect could not be looked at", nothing="it took no effect",
        )
        await self.db(journal.complete, self.run, seq, None, (), ())
        if found:
            self.counts.reconciled.append(key)
            return None
        return data

    async def _once_or_found(
        self, seq: int, side: Side, method: str, path: str, body: Any,
        answered: Callable[[Any], tuple[Any, str | None]], find: Callable[[], Awaitable[Any | None]], *, unable: str, nothing: str,
    ) -> tuple[Any, bool]:
        """The protocol of a write that must not be repeated blindly (a create, an import),
        its intent `seq` already written: sent without the client's retries; after a lost
        answer, or one `answered` cannot use (it gives the result, or why not), `find` looks at
        the tenant for the write's effect, and only when there is none is it sent once more.
        Returns (the result or what was found, whether it was found). Closes the intent as
        failed and raises ApiError for a refusal, CallFailed when nothing took effect after two
        attempts, CallFailed(open) when the effect could not be looked for."""
        client = self.client(side)
        for attempt in (1, 2):
            self.counts.writes += 1
            try:
                response = await client.request(method, path, json=body, idempotent=False)
            except ApiError as exc:
                if not exc.may_have_applied:
                    await self.db(journal.fail, self.run, seq, str(exc), False)
                    raise
                lost = str(exc)
            else:
                result, why = answered(response.data)
                if why is None:
                    return result, False
                lost = why
            try:
                found = await find()
            except (ApiError, CallFailed) as exc:
                reason = f"{lost}; {unable} ({exc}): left open for the next run"
                await self.db(journal.fail, self.run, seq, reason, True)
                raise CallFailed(reason, open=True) from None
            if found is not None:
                return found, True
            if attempt == 1:
                await self.db(journal.resend, self.run, seq)
        reason = f"{lost}; {nothing} after 2 attempts"
        await self.db(journal.fail, self.run, seq, reason, False)
        raise CallFailed(reason)

    def _drop(self, drops: Sequence[tuple[str, str]]) -> None:
        for kind, source_id in drops:
            self.idmap.drop(kind, source_id)

    # -- creates -----------------------------------------------------------------------

    async def create(
        self, key: str, made: tuple[str, str], method: str, path: str, body: Any, expect: Expect, *, side: Side = "target",
    ) -> tuple[str, Any]:
        """Send a call that makes an object; (its id, the answer or the item found). The id
        is mapped as `made` ('created') in the transaction that closes the intent. Raises
        CallFailed when nothing was made (or it cannot be told), ApiError for a refusal."""
        serial = SERIAL.get()
        names = serial.names if serial is not None and serial.held and serial.beside and made == (serial.kind, made[1]) else None
        intent: dict[str, Any] = {"made": list(made), "expect": expect_to_json(expect)}
        if names is not None:
            intent["names"] = names_to_json(names)
        seq = await self.db(
            journal.intend, self.run, self.pair, key=key, kind=made[0], source_id=made[1], side=side,
            method=method, path=path, body=body, intent=intent,
        )

        def answered(data: Any) -> tuple[Any, str | None]:
            new_id = get_path(data, expect.id_field)
            if isinstance(new_id, str) and new_id:
                return (new_id, data), None
            return None, f"the answer holds no {expect.id_field!r}"

        async def appeared() -> Any | None:
            item = await self.find_made(expect, made, self.run, body, names)
            return None if item is None else (str(get_path(item, expect.id_field)), item)

        (new_id, data), found = await self._once_or_found(
            seq, side, method, path, body, answered, appeared, unable="then what it made could not be looked for", nothing="nothing appeared",
        )
        await self._made(seq, made, new_id)
        if found:
            self.counts.reconciled.append(key)
        if side == "target" and expect.side == "target":
            await self._look(made[0], new_id, expect)
        return new_id, data

    async def _look(self, kind: str, new_id: str, expect: Expect) -> None:
        """After the second create of a positional `kind` into one listing, while the turn is
        still held: where the newer object landed (`syncd.copy.placement`); a read failing
        tells nothing."""
        serial = SERIAL.get()
        positional = kind in BY_NAME and BY_NAME[kind].ordered  # (where a team lands is no one's concern)
        if serial is None or not serial.held or not positional:
            return
        older = serial.turnstile.last_made.get(kind)
        serial.turnstile.last_made[kind] = new_id
        if older is None or not self.placement.wanted(kind):
            return
        try:
            items = await self.listing(expect.side, expect.path)
        except ApiError:
            return
        siblings = [str(get_path(item, expect.id_field)) for item in items if under_parent(expect, item)]
        self.placement.look(kind, older, new_id, siblings)

    async def _made(self, seq: int, made: tuple[str, str], new_id: str) -> None:
        entry: MappingEntry = (made[0], made[1], new_id, "created")
        await self.db(journal.complete, self.run, seq, new_id, [entry], ())
        self.idmap.put(*entry)

    async def find_made(
        self, expect: Expect, made: tuple[str, str], since_run: int, sent: Any = None, names: Names | None = None
    ) -> Any | None:
        """The item a create made, by what appeared in `expect`'s listing since `since_run`
        (see the module docstring); None when nothing did. CallFailed when several objects
        appeared and the values this run sent cannot tell them apart. With `names` (a create
        sent beside its siblings), only a new object of its own name is its own, even alone;
        Unexplained when none is but one bears none of the siblings' names either."""
        items = await self.listing(expect.side, expect.path)
        taken = self.idmap.sources_of(made[0])
        excluded = {str(value) for value in expect.exclude}
        candidates: dict[str, Any] = {}
        for item in items:
            item_id = get_path(item, expect.id_field)
            if not isinstance(item_id, str) or item_id in excluded:
                continue
            if not under_parent(expect, item):
                continue
            if taken.get(item_id, made[1]) != made[1]:
                continue  # the object of another source object
            candidates[item_id] = item
        if not candidates:
            return None
        older = await self.db(journal.seen_before, self.pair.tenant(expect.side), list(candidates), since_run)
        fresh = [item for item_id, item in candidates.items() if item_id not in older]
        if names is not None:
            return own_by_name(fresh, names, expect)
        if len(fresh) <= 1:
            return fresh[0] if fresh else None
        sent_values = {k: v for k, v in sent.items() if isinstance(v, str)} if isinstance(sent, Mapping) else {}
        matching = [item for item in fresh if sent_values and all(get_path(item, k) in (v, None) for k, v in sent_values.items())]
        if len(matching) == 1:
            return matching[0]
        ids = ", ".join(str(get_path(item, expect.id_field)) for item in fresh[:5])
        raise CallFailed(f"{len(fresh)} new objects appeared in {expect.path} ({ids}): cannot tell which one this call made")

    # -- reads -------------------------------------------------------------------------

    async def listing(self, side: Side, path: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Every item of a list of the `side` tenant (pages counted as reads), without the
        items marked deleted (`catalog.deleted`: a service may still list a deleted space):
        a deleted object is never what a create made, nor one to move or to adopt."""
        items: list[Any] = []
        async for page in paginate(self.client(side), path, params, on_restart=items.clear):
            self.counts.reads += 1
            items.extend(item for item in page if not deleted(item))
        return items

    async def read(self, side: Side, path: str) -> Any:
        """One object (a GET), counted as a read; NotFound when it is not there."""
        self.counts.reads += 1
        return await self.client(side).get_json(path)


async def listings_side_by_side(writer: Writer, paths: Sequence[str]) -> list[list[Any]]:
    """The target's listings at `paths`, read at once (a settle step's reads are independent:
    one round trip, not one per listing); the first ApiError is raised."""
    listed: list[list[Any]] = [[] for _ in paths]
    errors: list[ApiError] = []

    async def one(index: int, path: str) -> None:
        try:
            listed[index] = await writer.listing("target", path)
        except ApiError as exc:  # raised as itself below, not inside an exception group
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for index, path in enumerate(paths):
            tg.start_soon(one, index, path)
    if errors:
        raise errors[0]
    return listed
