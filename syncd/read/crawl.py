"""The crawler: walks the catalog graph through the API client into the mirror.

Workers in an anyio task group take listing jobs from a queue. Organization-level kinds are
independent jobs; everything inside one space (its content, links, comments, change
requests and their content) is one *scope job*, read in catalog order by one worker, so
that a space whose change token is unchanged since the last run is skipped as a whole and
carried forward. Pages stream to the mirror as they arrive: memory holds one page of rows
per worker and the queue of small jobs, never the organization.

A listing that fails (after the client's retries) is recorded as failed: the mirror then
keeps its previous rows ("unknown, never deleted"), the run ends `partial`, and the scope
it belongs to is read again by the next run whatever its change token says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from syncd import catalog
from syncd.api import ApiError, TenantClient
from syncd.catalog import Kind
from syncd.errors import SyncdError, first_failure
from syncd.logging import get_logger
from syncd.read.crawl_rows import RowMaker
from syncd.read.crawl_scope import CrawlScope
from syncd.read.crawl_stats import CrawlResult, CrawlStats
from syncd.read.lists_schedule import ALWAYS_READ, ListsSchedule
from syncd.read.staging_queue import StagingQueue
from syncd.read.orgs import ORGS_LISTING, UnknownOrganization, resolve_org  # noqa: F401 - UnknownOrganization re-exported
from syncd.scope import EVERYTHING, Scope
from syncd.state import StateStore, Row
from syncd.state.rows import canonical_json
from syncd.state.sqlite_schema import utc_now

log = get_logger("syncd.crawl")

LINK_MARK = "]("
"""Markdown link syntax: a change-request page without it has no links to read."""


@dataclass
class _Job:
    """List `kind` under a parent row; `context` carries the ids bound so far; `lists_of`:
    the organization whose lists without a change token this listing is one of."""

    kind: Kind
    context: dict[str, str]
    parent: tuple[str, str] | None
    parent_data: Mapping[str, Any] | None = None
    lists_of: str | None = None


@dataclass
class _TokenScopeRead:
    """State of one scope job (a space, or a change request inside it)."""

    name: str
    linked_pages: set[str] = field(default_factory=set)
    page_docs: dict[str, str | None] = field(default_factory=dict)
    pages_with_links: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)


@dataclass
class _Listing:
    """What the crawler accumulates while reading one listing, and how a restart of the
    listing from its first page forgets it (see `syncd.api.paging`)."""

    kind: str
    stats: CrawlStats
    positions: Counter[tuple[str, str] | None] = field(default_factory=Counter)
    malformed: list[str] = field(default_factory=list)
    yielded: set[str] = field(default_factory=set)
    """Ids of rows handed to the consumer (over every pass)."""
    counted: int = 0
    """Rows of this pass counted in `stats.objects`."""

    def fresh(self, rows: list[Row]) -> list[Row]:
        """The rows of a page the consumer has not had yet; counts the page's rows."""
        self.counted += len(rows)
        new = [row for row in rows if row.id not in self.yielded]
        self.yielded.update(row.id for row in new)
        return new

    def restart(self) -> None:
        """The listing starts over: positions from zero, malformed items and counts forgotten."""
        self.positions.clear()
        self.malformed.clear()
        self.stats.objects[self.kind] -= self.counted
        self.counted = 0


BULKY_LISTINGS = 4
"""Listings of whole space objects read at once (`Kind.bulky`): a large organization's members'
spaces, eight of them side by side at 1,000 spaces a page, were most of a crawl's peak memory
(7,200 spaces: 113-116 MB; four at once 96 MB in the same wall time, two 92 MB but a slower
start: the server answers such pages slowly, and other listings wait behind them)."""


WORKERS_PER_REQUEST = 2
"""Jobs a crawl works on at once, per request the tenant's `concurrency` lets fly at once. A job
(a listing, or all of a space's listings, one after another) sends one request at a time, so
the in-flight limit fills only while more jobs run than it admits: with as many jobs as requests,
the last spaces of a crawl 300 ms away read alone, each a chain of round trips (a 60-space
crawl at R = 100: 1.11 x requests / R with one job a request, 1.07 x with two). A job waiting
for its turn costs a task and the listing page it holds, within the answer budget."""


def crawl_workers(concurrency: int) -> int:
    """The crawl's jobs at once for a tenant's `concurrency` (see WORKERS_PER_REQUEST)."""
    return max(1, concurrency) * WORKERS_PER_REQUEST


def scope_name(kind_scope: str, context: Mapping[str, str]) -> str:
    if kind_scope == "space":
        return f"space:{context['space']}"
    return f"change-request:{context['change_request']}"


def change_token(kind: Kind, data: Mapping[str, Any]) -> str:
    return canonical_json([data.get(name) for name in kind.change_token])


class Crawler:
    """One crawl of a tenant (all its organizations, or one) into the mirror."""

    def __init__(
        self,
        client: TenantClient,
        store: StateStore,
        tenant: str,
        *,
        workers: int = 16,
        full: bool = False,
        on_progress: Callable[[CrawlStats], None] | None = None,
        scope: Scope = EVERYTHING,
        lists_every: float | None = None,
    ) -> None:
        self.client = client
        self.scoping = CrawlScope(scope)
        self.store = store
        self.tenant = tenant
        self.workers = max(1, workers)
        self.full = full
        self.on_progress = on_progress
        self.stats = CrawlStats()
        self._rows = RowMaker(tenant, self.stats.objects)
        self._run = 0
        self._pending = 0
        self._send: Any = None
        self._tokens: dict[str, str] = {}
        self._staging: StagingQueue | None = None
        self._bulky = anyio.CapacityLimiter(BULKY_LISTINGS)
        self.lists_every = lists_every
        """Seconds an organization's lists without a change token are trusted after they were
        all read (`syncd.read.lists_schedule`); None: read on every run (a copy reads what it plans from)."""
        self._lists = ListsSchedule(None, {})
        self._started_at = ""

    # ----- entry point ------------------------------------------------------------------

    async def crawl(self, org: str | None = None, job: str = "sync") -> CrawlResult:
        """Crawl and merge; cancellation abandons the run and keeps the previous snapshot."""
        self._started_at = utc_now()
        org, orgs = await self._organizations(org)  # one addressed by its title: its id from here on
        scope_ref = self.scoping.ref(f"{self.tenant}:{org}" if org else self.tenant)
        # Off the event loop: on PostgreSQL, another replica's run of this tenant is waited for
        # (bounded, `StateStore.lock_wait`); cancelling this task ends the wait within a second.
        self._run = await anyio.to_thread.run_sync(
            lambda: self.store.start_run(job, self.tenant, scope_ref, on_wait=anyio.from_thread.check_cancelled)
        )
        finished = False
        try:
            self._load_previous()  # once the tenant is ours: what a run just before us merged counts
            self._lists = ListsSchedule(
                self.lists_every, self._tokens, always=self.full or self.scoping.active,
                record=not self.scoping.active, not_read=self.stats.lists_not_read,
            )  # fmt: skip
            self._staging = StagingQueue(self.store, self._run)
            try:
                async with anyio.create_task_group() as writer:
                    writer.start_soon(self._staging.run)
                    await self._walk(orgs, org)
                    for scope, token in self._lists.tokens(self._started_at):
                        self._staged().scope_read(scope, token)
                    await self._staging.drain()  # everything read is staged before it is selected or merged
            except BaseExceptionGroup as group:  # the mirror failed (or a worker): its error, as is
                raise first_failure(group) from None
            status = "partial" if self.stats.failed_listings else "complete"
            stats = self.stats.as_dict() | {"requests": self.client.stats.requests}
            if self.scoping.active:
                org_ids = [str(data["id"]) for _, data in orgs if isinstance(data, dict) and isinstance(data.get("id"), (str, int))]
                await anyio.to_thread.run_sync(lambda: self.scoping.finish(self.store, self._run, self.tenant, org_ids))
                stats |= {"scope": self.scoping.scope.to_json(), "left_out": self.scoping.left_out,
                          "dependencies": [d.to_json() for d in self.scoping.dependencies[:200]]}  # fmt: skip
            # Merging a large run takes seconds of SQLite work: off the event loop, so a
            # daemon's control API keeps answering (the StateStore is thread-safe). Not abandoned on
            # cancellation: the merge completes, or never started.
            summary = await anyio.to_thread.run_sync(
                lambda: self.store.finish_run(self._run, status, stats, quiet_kinds=catalog.DERIVED, volatile=catalog.HASH_IGNORES)
            )
            finished = True
            return CrawlResult(self._run, status, summary, self.stats, self.scoping, org)
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
            why = "interrupted: the previous snapshot stays current"
            raise
        except BaseException:
            why = "the crawl failed: the previous snapshot stays current"
            raise
        finally:
            if not finished:  # synchronous: nothing here can be cancelled half-way
                self.store.abandon_run(self._run, "cancelled", why)

    async def _organizations(self, org: str | None) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
        """The organization to crawl by id (None: all), and (listing, organization) of each;
        `org` is an id or an exact title (`syncd.read.orgs.resolve_org`)."""
        if org is not None:
            org_id, data = await resolve_org(self.client, self.tenant, org)
            return org_id, [(catalog.fill(catalog.BY_NAME["organization"].path, {"org": org_id}), data)]
        found: list[tuple[str, dict[str, Any]]] = []
        async for page in self.client.paginate(ORGS_LISTING, on_restart=found.clear):
            found.extend((ORGS_LISTING, item) for item in page)
        return None, found

    def _load_previous(self) -> None:
        """Change tokens of the scopes the last merged snapshot read completely.

        A scope whose reading failed has no token, so it is read again whatever its space
        says; `--full` ignores every token."""
        if not self.full:
            self._tokens = self.store.scope_tokens(self.tenant)

    # ----- the worker pool ------------------------------------------------------------------

    async def _walk(self, orgs: list[tuple[str, dict[str, Any]]], only_org: str | None) -> None:
        send, receive = anyio.create_memory_object_stream[Any](math.inf)
        self._send = send
        org_kind = catalog.BY_NAME["organization"]
        rows, malformed = [], []
        for listing, data in orgs:
            org_id = data.get("id") if isinstance(data, dict) else None
            row = self._rows.row(org_kind, data, {"org": str(org_id)}, None, listing, None, malformed)
            if row is not None:
                rows.append(row)
        self._stage(rows)
        listing = catalog.fill(org_kind.path, {"org": only_org}) if only_org else ORGS_LISTING
        known = sum(1 for _ in self.store.current(self.tenant, kind="organization"))
        if malformed:
            self._listed(listing, ok=False, scope=None, error=f"{len(malformed)} malformed organization(s) skipped")
        elif not rows and known:
            # A token that suddenly sees nothing is far likelier revoked than the tenant empty.
            self._listed(listing, ok=False, scope=None, error=f"the token sees no organization (the mirror has {known}); kept them")
        else:
            self._listed(listing, ok=True, scope=None)
        for row in rows:
            await self._read_first(row)
            lists_of = row.id if self._lists.due(row.id) else None
            self._enqueue_children(org_kind, row.data, {"org": row.id}, ("organization", row.id), lists_of=lists_of, lists=lists_of is not None)
        if self._pending == 0:
            send.close()
        async with anyio.create_task_group() as tg:
            for _ in range(self.workers):
                tg.start_soon(self._worker, receive.clone())
        receive.close()

    async def _read_first(self, org_row: Row) -> None:
        """A scoped crawl reads an organization's collections before the rest: the paths of
        its spaces are then known when their rows arrive (`syncd.read.crawl_scope`)."""
        first = self.scoping.read_first()
        if first is not None:
            failed = self.stats.failed_listings
            await self._list_job(_Job(catalog.BY_NAME[first], {"org": org_row.id}, ("organization", org_row.id), org_row.data))
            self.scoping.collections_read(org_row.id, ok=self.stats.failed_listings == failed)

    def _submit(self, item: Any) -> None:
        self._pending += 1
        self._send.send_nowait(item)

    async def _worker(self, receive: Any) -> None:
        async with receive:
            async for item in receive:
                try:
                    if isinstance(item, _Job):
                        await self._list_job(item)
                    else:
                        await self._scope_job(*item)
                finally:
                    self._pending -= 1
                    if self._pending == 0:
                        self._send.close()
                    self._progress()

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.stats)

    def _enqueue_children(
        self, kind: Kind, data: Mapping[str, Any], context: dict[str, str], parent: tuple[str, str],
        lists_of: str | None = None, lists: bool = True,
    ) -> None:  # fmt: skip
        """Jobs of a row's child listings; `lists=False` leaves out an organization's lists
        without a change token (`ALWAYS_READ`), `lists_of` marks the ones read."""
        for child in catalog.children(kind.name):
            if child.scope is None and (child.when is None or child.when(data)) and self.scoping.reads(child, kind.name):
                always = kind.name == "organization" and child.name in ALWAYS_READ
                if not lists and kind.name == "organization" and not always:
                    continue
                self._submit(_Job(child, context, parent, data, None if always else lists_of))

    # ----- listing -------------------------------------------------------------------------

    async def _items(
        self, kind: Kind, path: str, query: dict[str, str], on_restart: Callable[[], None] | None = None
    ) -> AsyncIterator[list[Any]]:
        """The listing's items, a page at a time, whatever the shape of the answer;
        `on_restart` runs when a paged listing starts over from its first page."""
        if kind.shape == "envelope":
            async for page in self.client.paginate(path, query, on_restart=on_restart):
                yield page
            return
        data = await self.client.get_json(path, query or None)
        if kind.shape == "items":
            items = data.get("items") if isinstance(data, dict) else None
        elif kind.shape == "array":
            items = data
        elif kind.shape == "tree":
            items = data.get("pages") if isinstance(data, dict) else None
        else:
            items = [data]
        if not isinstance(items, list):
            raise MalformedAnswer(f"GET {path}: expected {kind.shape} answer")
        yield items

    async def _read(self, job: _Job, scope: str | None) -> AsyncIterator[tuple[str, list[Row]]]:
        """Rows of every listing of a job; a failed listing is recorded, not raised.

        A listing that starts over (its page token was refused) counts positions from zero
        again and stages every row again (staging keeps the last version); rows already
        yielded are not yielded twice, so their children are not read twice."""
        kind, context = job.kind, job.context
        for path, query in kind.list_paths(context):
            key = catalog.listing_key(path, query)
            state = _Listing(kind.name, self.stats)
            positions, malformed = state.positions, state.malformed
            try:
                async for page in self._items(kind, path, query, on_restart=state.restart):
                    page = catalog.present(kind, page)  # a listed deleted space is not there
                    if kind.name in catalog.PAGE_BODY_PATH:
                        page = await self._with_bodies(kind, page, context)
                    rows = self._rows.rows(kind, page, context, job.parent, key, positions, malformed, scope)
                    self._stage(rows)
                    await self._staged().pace()
                    yield key, state.fresh(rows)
            except (ApiError, MalformedAnswer) as exc:
                self._listed(key, ok=False, scope=scope, error=str(exc))
                self._lists_incomplete(job)
                continue
            if malformed:
                self._lists_incomplete(job)
                # Rows that cannot be identified may be any of the previous ones: delete none.
                self._listed(key, ok=False, scope=scope, error=f"{len(malformed)} malformed item(s) skipped: {malformed[0]}")
            else:
                self._listed(key, ok=True, scope=scope)

    def _lists_incomplete(self, job: _Job) -> None:
        if job.lists_of is not None:
            self._lists.failed(job.lists_of)

    async def _list_job(self, job: _Job) -> None:
        async with self._bulky if job.kind.bulky else contextlib.nullcontext():
            await self._list_rows(job)

    async def _list_rows(self, job: _Job) -> None:
        kind = job.kind
        async for _, rows in self._read(job, None):
            if kind.name == "collection":
                self.scoping.note(job.context["org"], rows)
            for row in rows:
                if not self.scoping.descends(row):
                    continue  # out of scope: its row is decided at the end, its content not read
                context = self._bind(kind, row, job.context)
                if kind.name == "space":
                    self._schedule_space(row, context)
                else:
                    self._enqueue_children(kind, row.data, context, (kind.name, row.id), lists_of=job.lists_of)

    async def _with_bodies(self, kind: Kind, pages: list[Any], context: Mapping[str, str]) -> list[Any]:
        """The page tree with every document page's markdown: read one by one only for pages
        the tree answered without a body (the spec does not promise bodies in the tree)."""
        out = []
        for page in pages:
            if not isinstance(page, dict):
                out.append(page)
                continue
            page = dict(page)
            if isinstance(page.get("pages"), list):
                page["pages"] = await self._with_bodies(kind, page["pages"], context)
            if page.get("type", "document") == "document" and "markdown" not in page and isinstance(page.get("id"), str):
                path = catalog.fill(catalog.PAGE_BODY_PATH[kind.name], dict(context, page=page["id"]))
                body = await self.client.get_json(path, {"format": "markdown"})
                if isinstance(body, dict) and isinstance(body.get("markdown"), str):
                    page["markdown"] = body["markdown"]
                    page.pop("document", None)
            out.append(page)
        return out

    # ----- scopes (a space, a change request) ------------------------------------------------

    def _schedule_space(self, row: Row, context: dict[str, str]) -> None:
        kind = catalog.BY_NAME["space"]
        scope, token = f"space:{row.id}", change_token(kind, row.data)
        if self._unchanged(scope, token):
            self._carry(scope)
            for cr_id in self._previous_children("change-request", row.id):
                self._carry(f"change-request:{cr_id}")
            return
        # Waiting spaces are held as little as they need: a tenant's spaces are all listed long
        # before the workers reach them (7,000 objects of a few KB, at a million objects).
        needed = row.data if any(child.when is not None for child in catalog.children(kind.name)) else {}
        self._submit((kind, dataclasses.replace(row, data=needed), context, None, token))

    def _unchanged(self, scope: str, token: str) -> bool:
        previous = self._tokens.get(scope)
        return previous is not None and previous == token

    def _previous_children(self, kind_name: str, parent_id: str) -> list[str]:
        with self.store.reading():  # not in the middle of a batch the writer thread writes
            return [r["id"] for r in self.store.current_keys(self.tenant, kind=kind_name, parent_id=parent_id)]

    def _carry(self, scope: str) -> None:
        # A scoped crawl decides over what it staged, carried content included (its
        # dependencies); otherwise a carried scope's rows stay current without being staged.
        self._staged().scope_carried(scope, rows=self.scoping.active)
        if scope.startswith("space:"):
            self.stats.skipped_scopes += 1

    async def _scope_job(
        self, kind: Kind, row: Row, context: dict[str, str], outer: _TokenScopeRead | None, token: str
    ) -> None:
        """Everything inside one space or change request, in catalog order, by one worker;
        `token`: its change token when it was listed, recorded once it is read completely."""
        assert kind.name in ("space", "change-request")
        state = _TokenScopeRead(scope_name("space" if kind.name == "space" else "change-request", context))
        self.stats.crawled_scopes += 1
        await self._scoped_children(kind, row, context, state, outer)
        await self._read_links(kind, context, state, outer)
        if state.name in self.stats.incomplete_scopes:
            if outer is not None:  # the space must be read again to retry its change request
                self.stats.incomplete_scopes.add(outer.name)
        else:
            self._staged().scope_read(state.name, token)

    async def _scoped_children(self, kind: Kind, row: Row, context: dict[str, str], state: _TokenScopeRead, outer: _TokenScopeRead | None) -> None:
        for child in catalog.children(kind.name):
            if child.scope is None or child.name in DEFERRED or (child.when is not None and not child.when(row.data)):
                continue
            job = _Job(child, context, (kind.name, row.id), row.data)
            async for _, rows in self._read(job, state.name):
                for child_row in rows:
                    self._observe(child, child_row, state)
                    child_context = self._bind(child, child_row, context)
                    if child.name == "change-request":
                        await self._change_request(child, child_row, child_context, state)
                    else:
                        await self._scoped_children(child, child_row, child_context, state, outer)

    async def _change_request(self, kind: Kind, row: Row, context: dict[str, str], space_state: _TokenScopeRead) -> None:
        scope, token = f"change-request:{row.id}", change_token(kind, row.data)
        if self._unchanged(scope, token):
            self._carry(scope)
            return
        await self._scope_job(kind, row, context, space_state, token)

    def _observe(self, kind: Kind, row: Row, state: _TokenScopeRead) -> None:
        """Note what the deferred link listings need: linked pages, page bodies."""
        if kind.name == "space-link":
            for ref in row.data.get("locationReferences") or []:
                if isinstance(ref, dict) and isinstance(ref.get("page"), str):
                    state.linked_pages.add(ref["page"])
        elif kind.name in ("page", "change-request-page"):
            raw_id = row.id.rsplit("/", 1)[-1]
            state.page_docs[raw_id] = row.data.get("documentId")
            if LINK_MARK in str(row.data.get("markdown", "")):
                state.pages_with_links.append((row.id, row.data))

    async def _read_links(self, kind: Kind, context: dict[str, str], state: _TokenScopeRead, outer: _TokenScopeRead | None) -> None:
        """Per-page links, read only where they can exist and are not known otherwise.

        A space's pages with links are those its link listing names as locations. A change
        request's page has links of its own only when its body has link syntax and differs
        from the space's page (same `documentId`: same body, same links).
        """
        if kind.name == "space":
            space_id = context["space"]
            link_kind, pages = catalog.BY_NAME["page-link"], [(f"{space_id}/{pid}", None) for pid in sorted(state.linked_pages)]
            parent_kind = "page"
        else:
            link_kind, parent_kind = catalog.BY_NAME["change-request-page-link"], "change-request-page"
            space_docs = outer.page_docs if outer else {}
            pages = []
            for row_id, data in state.pages_with_links:
                raw = row_id.rsplit("/", 1)[-1]
                if raw not in space_docs or space_docs[raw] != data.get("documentId"):
                    pages.append((row_id, data))
        at_once = anyio.CapacityLimiter(LINK_READS)

        async def read(page_row_id: str) -> None:
            page_context = dict(context, page=page_row_id.rsplit("/", 1)[-1])
            async with at_once:
                async for _ in self._read(_Job(link_kind, page_context, (parent_kind, page_row_id)), state.name):
                    pass

        async with anyio.create_task_group() as tg:
            for page_row_id, _ in pages:
                tg.start_soon(read, page_row_id)

    # ----- rows -----------------------------------------------------------------------------

    def _bind(self, kind: Kind, row: Row, context: dict[str, str]) -> dict[str, str]:
        if not kind.binds:
            return context
        value = row.data.get(kind.bind_field) if kind.bind_field else row.id.rsplit("/", 1)[-1]
        return dict(context, **{kind.binds: str(value)})

    def _staged(self) -> StagingQueue:
        assert self._staging is not None, "staging starts with the run"
        return self._staging

    def _stage(self, rows: list[Row]) -> None:
        self._staged().rows(rows)

    def _listed(self, listing_key: str, ok: bool, scope: str | None, error: str | None = None) -> None:
        self.stats.listings += 1
        self._staged().listed(listing_key, ok, error)
        if not ok:
            self.stats.error(f"{listing_key}: {error}", scope)
            log.warning("listing failed", listing=listing_key, error=error)


class MalformedAnswer(SyncdError):
    """An answer of the wrong shape for its listing (counted as a failed listing)."""


DEFERRED = frozenset({"page-link", "change-request-page-link"})
"""Kinds read after the rest of their scope, only where they can have rows."""
LINK_READS = 4
"""Per-page link listings of one scope read at once. One after another, a space's links were a
chain of round trips: 300 ms away, the spaces with the most linked pages read on alone at the
end of a crawl, well under the rate limit. Each holds one small page of rows."""
