"""What every op of a run may do, whoever made the plan: `check_ops` (pure).

A plan comes from the planner or from a file someone may have edited. Either way, before the
first write, each op is held to the run's rules; an op that breaks one is a violation (one
line each), and a plan with any violation is not applied at all:

- target side only: every write path is a write call the catalog has for the op's kind, with
  `{org}` the target organization and every other id a `{ref:KIND:SOURCE_ID}` of the right
  kind (resolved through the id map: an object of the target) or an id of the target as read
  (its objects, the id map's target ids). The id a create gives its new object (a custom
  field's name, an OpenAPI spec's slug) is the one exception. A write on the source side is
  only the duplicate a same-token copy makes of a space of the source (then transferred);
  a space is brought back (`restore`) only when the run found it deleted in the target itself;
- settle steps and sections name the target organization (`spec.org`), a duplicate transfers
  into it (`spec.organization`); listings a create is looked for in are the target's;
- mode `copy` never deletes; a mirror deletes at most `max_delete` objects, the limit of the
  command line or the configuration (never a plan file's);
- the target's access settings (`rules.ACCESS_FIELDS` of the organization, SAML providers)
  are written only by a run asked `with_access`.

Without `target_ids` (a plan file checked before anything is read) the ids are not checked;
everything else is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from syncd.catalog import BY_NAME, KINDS, Call
from syncd.copy.model import BOOKKEEPING, IdMap, Snapshot
from syncd.copy.ops import PATH_REF, Op, refs_in
from syncd.copy.plancheck import show
from syncd.copy.rules import ACCESS_FIELDS, ACCESS_KINDS

__all__ = ["Bounds", "check_ops", "known_target_ids", "violations_line"]

WRITE_METHODS: frozenset[str] = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The methods syncd sends."""

_RECIPES_OF: dict[str, frozenset[str]] = {
    "adopt": frozenset({"adopt"}),
    "create": frozenset({"call", "section", "undelete", "duplicate-transfer"}),
    "patch": frozenset({"call"}),
    "move": frozenset({"call"}),
    "delete": frozenset({"call"}),
    "content": frozenset({"import", "import-served"}),
    "settle": frozenset({"settle-tree", "settle-site"}),
}
"""The recipes each action may run."""

_CALL_OF: dict[tuple[str, str], str] = {
    ("create", "call"): "create",
    ("create", "section"): "create",
    ("create", "undelete"): "restore",
    ("create", "duplicate-transfer"): "duplicate",
    ("patch", "call"): "patch",
    ("move", "call"): "move",
    ("delete", "call"): "delete",
    ("content", "import"): "import",
    ("content", "import-served"): "import",
}
"""The catalog call an op's path must be, by (action, recipe); adopt and settle send no call of their own."""

_PLACEHOLDER_KIND = {"site": "site", "space": "space", "section": "site-section"}
"""The kind each path placeholder names (`{id}`: the call's own kind; `{org}`: the organization)."""


@dataclass(frozen=True)
class Bounds:
    """The rules of one run: its target organization and mode, the delete limit, and (once
    read) the ids of the target's objects and what the read allows on the source side."""

    target_org: str
    mode: str
    max_delete: int
    target_ids: frozenset[str] | None = None
    """Ids of objects of the target as read and of the id map; None: not read yet."""
    source_spaces: frozenset[str] = frozenset()
    """Spaces of the source as read: what a same-token copy may duplicate."""
    restorable: frozenset[str] = frozenset()
    """Spaces deleted in the target organization itself that the run may bring back."""
    with_access: bool = False
    """Whether the run may write the target's access settings (`--with-access`)."""


def known_target_ids(target: Snapshot, idmap: IdMap) -> frozenset[str]:
    """Every id that names an object of the target: each object's id, its API id and the
    field its write paths address it by (a custom field's name), and the id map's target ids
    (not its bookkeeping: a duplicate lives in the source)."""
    ids = {target.org}
    for node in target.nodes.values():
        ids.update((node.id, node.api_id))
        writes = BY_NAME[node.kind].writes if node.kind in BY_NAME else None
        if writes is not None and writes.address != "id" and isinstance(node.data.get(writes.address), str):
            ids.add(node.data[writes.address])
    ids.update(entry.target_id for (kind, _), entry in idmap.entries.items() if kind not in BOOKKEEPING)
    return frozenset(ids)


def check_ops(ops: Sequence[Op], bounds: Bounds) -> list[str]:
    """Every violation of the run's rules (module docstring), one line each; [] when none."""
    found = [f"op {show(op.key)}: {problem}" for op in ops for problem in _op_problems(op, bounds)]
    if bounds.mode != "mirror" and any(op.action == "delete" for op in ops):
        found.append(f"mode {bounds.mode} never deletes, and the plan holds {sum(op.action == 'delete' for op in ops)} delete(s)")
    deletes = sum(1 for op in ops if op.action == "delete")
    if bounds.mode == "mirror" and deletes > bounds.max_delete:
        found.append(f"{deletes} deletes exceed --max-delete {bounds.max_delete}")
    return found


def violations_line(violations: Sequence[str]) -> str:
    """The first violation, and how many more (one line)."""
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return violations[0] + more


def _op_problems(op: Op, bounds: Bounds) -> Iterator[str]:
    if op.recipe not in _RECIPES_OF.get(op.action, frozenset()):
        yield f"a {op.action} op cannot run the {show(op.recipe)} recipe"
        return
    if op.action == "delete" and bounds.mode != "mirror":
        yield f"mode {bounds.mode} never deletes"
    wanted = _CALL_OF.get((op.action, op.recipe))
    if wanted is None:
        if op.method or op.path:
            yield f"a {op.action} op sends no call of its own, yet names {op.method} {op.path}"
    else:
        yield from _call_problems(op, wanted, bounds)
    if op.side != "target" and op.recipe != "duplicate-transfer":
        yield f"writes the {op.side} side: only the target is written"
    if not bounds.with_access:
        yield from _access_problems(op)
    if op.target_id is not None and bounds.target_ids is not None and op.target_id not in bounds.target_ids:
        yield f"its target_id {show(op.target_id)} is not an object of the target organization"
    yield from _spec_problems(op, bounds)
    if op.expect is not None:
        if op.expect.side != "target":
            yield "looks for what it made on the source side"
        else:
            yield from _org_problems(op.expect.path, bounds, "the listing it looks in")
    for ref in _refs(op):
        if ref.kind in BOOKKEEPING:
            yield f"names a {ref.kind} ({ref.source_id}): syncd's bookkeeping, not an object of the target"


def _access_problems(op: Op) -> Iterator[str]:
    """An op that writes the target's access settings in a run that keeps them."""
    if op.kind in ACCESS_KINDS:
        yield f"a {op.action} of a {op.kind}: the run keeps the target's access settings (--with-access copies them)"
    elif op.kind == "organization":
        written = [name for part in (op.body, op.want) if isinstance(part, Mapping) for name in ACCESS_FIELDS if name in part]
        if written:
            yield f"writes the organization's {', '.join(dict.fromkeys(written))}: the run keeps the target's access settings (--with-access copies them)"


def _refs(op: Op) -> Iterable[Any]:
    yield from refs_in(op.path)
    yield from refs_in(op.body)
    yield from refs_in(op.want)
    yield from refs_in(op.spec)


def _call_problems(op: Op, call_name: str, bounds: Bounds) -> Iterator[str]:
    if op.method not in WRITE_METHODS:
        yield f"method {show(op.method)} is not one syncd sends ({', '.join(sorted(WRITE_METHODS))})"
        return
    call = _call(op.kind, call_name)
    if call is None:
        yield f"the catalog has no {call_name} call for {show(op.kind)}"
        return
    if op.method != call.method:
        yield f"a {op.kind} {call_name} is {call.method}, not {op.method}"
        return
    params = _match(call.path, op.path)
    if params is None:
        yield f"path {show(op.path)} is not a {op.kind} {call_name} ({call.method} {call.path})"
        return
    if call_name == "duplicate":
        if op.side != "source":
            yield "a duplicate is made on the source side"
        elif bounds.target_ids is not None and unquote(params.get("id", "")) not in bounds.source_spaces:
            yield f"duplicates {show(params.get('id'))}, which is not a space of the source"
        return
    if call_name == "restore":
        if bounds.target_ids is not None and unquote(params.get("id", "")) not in bounds.restorable:
            yield f"brings back space {show(params.get('id'))}, which the run did not find deleted in the target organization"
        return
    yield from _param_problems(op.kind, params, bounds, new_id=call_name == "create", what=f"path {show(op.path)}")


def _spec_problems(op: Op, bounds: Bounds) -> Iterator[str]:
    spec = op.spec or {}
    required = {"org"} if op.action == "settle" or op.recipe == "section" else {"organization"} if op.recipe == "duplicate-transfer" else set()
    for name in ("org", "organization"):
        if (name in spec or name in required) and spec.get(name) != bounds.target_org:
            yield f"spec.{name} {show(spec.get(name))} is not the target organization {show(bounds.target_org)}"
    patch = spec.get("patch")
    if patch is not None:
        yield from _spec_path_problems(op, "patch", patch, bounds, new_id=op.action == "create")
    if spec.get("replaces") is not None or spec.get("replaces_path") is not None:
        yield from _replaces_problems(op, spec, bounds)


def _spec_path_problems(op: Op, call_name: str, path: Any, bounds: Bounds, *, new_id: bool) -> Iterator[str]:
    call = _call(op.kind, call_name)
    params = _match(call.path, path) if call is not None and isinstance(path, str) else None
    if params is None:
        yield f"spec.{call_name} {show(path)} is not a {op.kind} {call_name} path"
        return
    yield from _param_problems(op.kind, params, bounds, new_id=new_id, what=f"spec.{call_name} {show(path)}")


def _replaces_problems(op: Op, spec: Mapping[str, Any], bounds: Bounds) -> Iterator[str]:
    """A create may delete the object it replaces (a site-space syncd made in another
    section): that object, named in `target_id`, by the kind's delete call."""
    replaced, path = spec.get("replaces"), spec.get("replaces_path")
    call = _call(op.kind, "delete")
    params = _match(call.path, path) if call is not None and isinstance(path, str) else None
    if op.action != "create" or replaced is None or replaced != op.target_id or params is None or unquote(params.get("id", "")) != replaced:
        yield f"spec.replaces_path {show(path)} deletes something other than the object the create replaces"
        return
    yield from _param_problems(op.kind, params, bounds, new_id=False, what=f"spec.replaces_path {show(path)}")


def _param_problems(kind: str, params: Mapping[str, str], bounds: Bounds, *, new_id: bool, what: str) -> Iterator[str]:
    for name, value in params.items():
        if name == "org":
            if unquote(value) != bounds.target_org:
                yield f"{what} is in organization {show(unquote(value))}, not the target {show(bounds.target_org)}"
            continue
        expected = kind if name == "id" else _PLACEHOLDER_KIND.get(name, name)
        ref = PATH_REF.fullmatch(value)
        if ref is not None:
            if ref.group(1) != expected:
                yield f"{what} names a {ref.group(1)} where a {expected} belongs"
            continue
        if "{" in value or "}" in value:
            yield f"{what} holds a malformed reference {show(value)}"
            continue
        if new_id and name == "id":
            continue
        if bounds.target_ids is not None and unquote(value) not in bounds.target_ids:
            yield f"{what} names {expected} {show(unquote(value))}, which is not an object of the target organization"


def _org_problems(path: str, bounds: Bounds, what: str) -> Iterator[str]:
    for kind in KINDS:
        params = _match(kind.path, path)
        if params is not None:
            if "org" in params and unquote(params["org"]) != bounds.target_org:
                yield f"{what} ({show(path)}) is in organization {show(unquote(params['org']))}, not the target {show(bounds.target_org)}"
            return
    yield f"{what} ({show(path)}) is not a listing syncd reads"


def _call(kind: str, name: str) -> Call | None:
    found = BY_NAME.get(kind)
    return found.writes.call(name) if found is not None and found.writes is not None else None


_SEGMENT = r"(?:\{ref:[^{}]+\}|[^/{}?#\s]+)"


def _match(template: str, path: str) -> dict[str, str] | None:
    """The placeholders of `template` as `path` fills them (one segment each), or None."""
    pattern = _TEMPLATES.get(template)
    if pattern is None:
        pattern = re.compile("".join(f"(?P<{part[1:-1]}>{_SEGMENT})" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{[a-z_]+\})", template)))
        _TEMPLATES[template] = pattern
    found = pattern.fullmatch(path)
    return dict(found.groupdict()) if found is not None else None


_TEMPLATES: dict[str, re.Pattern[str]] = {}
