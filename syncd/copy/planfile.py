"""Saved plans: `mirror plan --out PLAN.json` writes one, `mirror apply --plan PLAN.json`
applies exactly its operations, or refuses when a side changed since (a stale Terraform plan).

A plan file is a statement of intent, not a program: apply reads the file whole and checks
every field (`plancheck`) and every op against the run's rules (`invariants`) before it reads
anything, then plans again from what it read and applies that plan only when its operations
are exactly the file's (`check_same`); anything else is refused in one line, exit 2, with
nothing written. The mode and options are the file's (they say what was planned), but the
delete limit is the command line's, never the file's.

What tells "changed" is a fingerprint of each side as the plan read it: a sha256 over every
object a copy reads to decide what to write (the copied kinds, the pages and files of spaces,
the custom field values, the text of OpenAPI specs), each as (kind, id, parent, position,
the hash of its fields without the volatile ones the state mirror leaves out too: a signed
URL, an `updatedAt`, a space's revision). The target's also covers the id map of the pair:
another apply in between changes it. A re-read of an unchanged organization gives the same
fingerprint; any change that could change the plan gives another (and so do a few that
would not, such as a page edited in a space whose content is not copied: the plan is then
made again, never applied on a guess). Objects a copy does not write (members, comments,
change requests, integrations) are left out, so a comment does not make a plan stale.

The file is JSON (`PLAN_FORMAT`, version `PLAN_VERSION`), the same document `mirror plan
--json` prints (docs/concepts/plans.md; schema `syncd/schemas/mirror-plan.json`), written
privately (0600: it names objects of both organizations). It is written as it is made
(`write_plan`: the JSON of one entry of its lists at a time, never the whole document or its
whole text: a first copy of 800 spaces x 10 pages plans 3 MB of it), under a temporary name
renamed to the file's once whole, so an interrupted write leaves no half plan behind.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from syncd.catalog import BY_NAME, content_hash
from syncd.copy.invariants import Bounds, check_ops, violations_line
from syncd.copy.journal import Pair
from syncd.copy.model import IdMap, Snapshot
from syncd.copy.ops import Op, Plan, Skip, op_from_json, op_to_json
from syncd.copy.plancheck import BadField, check_document, show
from syncd.copy.review import Item, counts
from syncd.copy.rules import COPIED_KINDS
from syncd.errors import SyncdError, UsageError
from syncd.files import private_dir, replace_private
from syncd.safe_read import FileRefused, read_regular
from syncd.scope import Scope

__all__ = [
    "FINGERPRINTED_KINDS",
    "PLAN_FORMAT",
    "PLAN_VERSION",
    "PlanBreaksRules",
    "PlanFileError",
    "PlanMismatch",
    "SavedPlan",
    "StalePlan",
    "check_fresh",
    "check_intent",
    "check_same",
    "fingerprint",
    "load_plan",
    "now_text",
    "plan_text",
    "plan_data",
    "plan_document",
    "plan_fields",
    "plan_options",
    "refuse_violations",
    "restrict",
    "save_plan",
    "saved_from",
    "sides_fingerprints",
    "skip_json",
    "write_plan",
]

PLAN_FORMAT = "syncd-plan"
PLAN_VERSION = 1
PLAN_FILE_LIMIT = 1 << 30
"""The most of a plan file the command line reads (a million operations are about 400 MB)."""
FINGERPRINTED_KINDS: frozenset[str] = frozenset(COPIED_KINDS) | {"page", "file", "space-custom-field-value", "openapi-spec-source"}
"""What a plan is made from (module docstring)."""


class PlanFileError(UsageError):
    """A plan file that cannot be read or is not a syncd plan (exit 2)."""


class StalePlan(SyncdError):
    """A side changed since the plan was made: nothing was written (exit 2)."""

    exit_code = 2


class PlanMismatch(SyncdError):
    """The file's operations are not those of the plan made again now: nothing was written (exit 2)."""

    exit_code = 2


class PlanBreaksRules(SyncdError):
    """An op breaks the run's rules (`invariants`), or the plan is marked refused: nothing was written (exit 2)."""

    exit_code = 2


@dataclass
class SavedPlan:
    """A plan with what it was made from: the pair, the refs as given, the mode and options,
    and the fingerprint of each side."""

    pair: Pair
    source: str
    target: str
    mode: str
    plan: Plan
    fingerprints: dict[str, str]
    options: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    binds: Literal["all", "deletes"] = "all"
    """What later rounds of its apply may not add: any op the plan does not hold (a plan
    file), or only deletes (a plan whose deletes were confirmed on a terminal)."""

    @property
    def keys(self) -> set[str]:
        return {op.key for op in self.plan.ops}


# ----- fingerprints ------------------------------------------------------------------------------


def fingerprint(snapshot: Snapshot, idmap: IdMap | None = None) -> str:
    """`sha256:<hex>` of one side as read (module docstring); with the id map for the target."""
    digest = hashlib.sha256()
    for line in sorted(_lines(snapshot, idmap)):
        digest.update(line.encode())
        digest.update(b"\n")
    return "sha256:" + digest.hexdigest()


def _lines(snapshot: Snapshot, idmap: IdMap | None) -> Iterable[str]:
    held = (node for (kind, _), node in snapshot.nodes.items() if kind in FINGERPRINTED_KINDS)
    for node in itertools.chain(held, snapshot.every(FINGERPRINTED_KINDS & snapshot.read_kinds)):
        meaning = content_hash(BY_NAME[node.kind], node.data)  # every fingerprinted kind is the catalog's
        yield _json(["node", node.kind, node.id, list(node.parent) if node.parent else None, node.position, meaning])
    if idmap is not None:
        for (kind, source_id), entry in idmap.entries.items():
            yield _json(["map", kind, source_id, entry.target_id, entry.origin])


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sides_fingerprints(source: Snapshot, target: Snapshot, idmap: IdMap) -> dict[str, str]:
    return {"source": fingerprint(source), "target": fingerprint(target, idmap)}


def check_fresh(saved: SavedPlan, now: Mapping[str, str]) -> None:
    """StalePlan, in one line, when either side's fingerprint differs from the plan's."""
    changed = [side for side in ("source", "target") if saved.fingerprints.get(side) != now.get(side)]
    if changed:
        what = "the source and the target changed" if len(changed) == 2 else f"the {changed[0]} changed"
        raise StalePlan(f"{what} since the plan was made ({saved.created_at or 'at an unknown time'}): make a new plan")


def restrict(plan: Plan, saved: SavedPlan) -> tuple[Plan, list[Op]]:
    """A later round's plan without what the saved plan does not allow (`binds`), and what
    was left out (reported, not applied)."""
    keys = saved.keys

    def allowed(op: Op) -> bool:
        return op.key in keys or (saved.binds == "deletes" and op.action != "delete")

    kept = [op for op in plan.ops if allowed(op)]
    dropped = [op for op in plan.ops if not allowed(op)]
    return Plan(kept, list(plan.skips), plan.refused, list(plan.warnings), list(plan.left)), dropped


# ----- the document ------------------------------------------------------------------------------


def plan_fields(saved: SavedPlan, items: Sequence[Item]) -> dict[str, Any]:
    """The JSON of a plan, what `--out` saves and `mirror plan --json` prints, with its four
    long lists as iterators: each entry's JSON is made as `write_plan` writes it, then dropped."""
    pair, plan = saved.pair, saved.plan
    return {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "created_at": saved.created_at,
        "source": {"ref": saved.source, "tenant": pair.source_tenant, "org": pair.source_org, "fingerprint": saved.fingerprints.get("source")},
        "target": {"ref": saved.target, "tenant": pair.target_tenant, "org": pair.target_org, "fingerprint": saved.fingerprints.get("target")},
        "mode": saved.mode,
        "options": saved.options,
        "refused": plan.refused,
        "warnings": list(plan.warnings),
        "counts": counts(items),
        "changes": (item.to_json() for item in items),
        "ops": (op_to_json(op) for op in plan.ops),
        "skips": (skip_json(skip) for skip in plan.skips),
        "left_on_target": (leftover.to_json() for leftover in plan.left),
    }


def plan_document(saved: SavedPlan, items: Sequence[Item]) -> dict[str, Any]:
    """`plan_fields` with its lists made: the whole document at once (a small plan, tests)."""
    return {name: list(value) if isinstance(value, Iterator) else value for name, value in plan_fields(saved, items).items()}


def plan_options(max_delete: int, adopt: bool, with_access: bool, scope: Scope) -> dict[str, Any]:
    """What a plan records it was made with (its document's `options`)."""
    return {"max_delete": max_delete, "adopt": adopt, "with_access": with_access, **scope.to_json()}


def skip_json(skip: Skip) -> dict[str, Any]:
    return {"kind": skip.kind, "source_id": skip.source_id, "title": skip.title, "reason": skip.reason, "excuses": list(skip.excuses)}


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def save_plan(path: Path, document: Mapping[str, Any]) -> None:
    """Write the plan file `path` as `write_plan` writes it, privately (0600; a file there keeps
    its mode), under a temporary name renamed to `path` once whole and on disk: if writing
    fails, `path` is as it was and no temporary file is left. Missing folders are made (0700),
    as `backup --out` makes them: `--out state/plans/NAME.json` works on a fresh checkout."""
    private_dir(Path(path).parent)
    with replace_private(path) as handle:
        write_plan(handle, document)


def write_plan(handle: IO[str], document: Mapping[str, Any]) -> None:
    """Write `document` (`plan_fields`) to `handle` as `json.dumps(document, indent=2,
    default=list)` and a newline would, the same bytes, but each entry of a top-level list (or
    iterator) serialised and written on its own: the text of the whole plan is never held."""
    handle.write("{")
    for number, (name, value) in enumerate(document.items()):
        handle.write(("\n  " if number == 0 else ",\n  ") + json.dumps(name) + ": ")
        if isinstance(value, (list, tuple, Iterator)):
            _write_list(handle, value)
        else:
            handle.write(_indented(value, 1))
    handle.write("\n}\n" if document else "}\n")


def _write_list(handle: IO[str], values: Iterable[Any]) -> None:
    """A top-level list of the document, one entry at a time (`[]` when it is empty)."""
    empty = True
    for value in values:
        handle.write(("[" if empty else ",") + "\n    " + _indented(value, 2))
        empty = False
    handle.write("[]" if empty else "\n  ]")


def _indented(value: Any, level: int) -> str:
    """`value` as `json.dumps(indent=2)` writes it `level` levels deep (JSON text holds no
    newline but its layout's: a newline in a string is written `\\n`)."""
    return json.dumps(value, indent=2, default=list).replace("\n", "\n" + "  " * level)


def load_plan(path: Path) -> SavedPlan:
    """Read a plan file; PlanFileError (one line) when it is not one this syncd applies: the
    whole file is checked field by field (`plancheck`) before anything is done with it."""
    return saved_from(plan_data(plan_text(path), path), path)


def plan_text(path: Path) -> str:
    """The text of the plan file `path`: a regular file (a FIFO is not waited on, a device not
    read without end) of at most `PLAN_FILE_LIMIT` bytes; PlanFileError (one line) otherwise."""
    try:
        return read_regular(path, PLAN_FILE_LIMIT, "plan", encoding="utf-8")
    except FileNotFoundError:
        raise PlanFileError(f"{path}: no such plan file") from None
    except FileRefused as exc:
        raise PlanFileError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{path} cannot be read as a plan: {exc}") from None


def plan_data(text: str, path: Path) -> Any:
    """The JSON of a plan file's text (a name given twice refused); PlanFileError naming `path`."""
    try:
        return json.loads(text, object_pairs_hook=_unique_names)
    except (json.JSONDecodeError, BadField) as exc:
        raise PlanFileError(f"{path} cannot be read as a plan: {exc}") from None
    except RecursionError:
        raise PlanFileError(f"{path} cannot be read as a plan: it is nested too deeply") from None


def saved_from(data: Any, path: Path) -> SavedPlan:
    """The plan a decoded plan file holds, checked whole first; PlanFileError naming `path`."""
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
        raise PlanFileError(f"{path} is not a syncd plan (write one with `syncd mirror plan SRC DST --out {path.name}`)")
    if data.get("version") != PLAN_VERSION:
        raise PlanFileError(f"{path} is a plan of format version {show(data.get('version'))}; this syncd applies version {PLAN_VERSION}: make a new plan")
    try:
        check_document(data)
    except BadField as exc:
        raise PlanFileError(f"{path} is a damaged plan: {exc}: make a new plan") from None
    except RecursionError:
        raise PlanFileError(f"{path} is a damaged plan: it is nested too deeply: make a new plan") from None
    source, target = data["source"], data["target"]
    pair = Pair(source["tenant"], source["org"], target["tenant"], target["org"])
    ops = [op_from_json(op) for op in data["ops"]]
    skips = [Skip(s["kind"], s.get("source_id"), s.get("title", ""), s.get("reason", ""), tuple(s.get("excuses") or ())) for s in data.get("skips") or []]
    plan = Plan(ops, skips, data.get("refused"), list(data.get("warnings") or []))
    fingerprints = {"source": source["fingerprint"], "target": target["fingerprint"]}
    return SavedPlan(pair, source.get("ref", ""), target.get("ref", ""), data["mode"], plan, fingerprints, dict(data.get("options") or {}), data.get("created_at") or "")


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose names are all different: a name given twice is read one way by
    one tool and another way by the next (which one did the reviewer see?)."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise BadField(f"the name {show(name)} is given twice in one object")
        out[name] = value
    return out


# ----- a plan file is intent ----------------------------------------------------------------------


def check_intent(saved: SavedPlan, bounds: Bounds) -> None:
    """What can be told of a plan file before anything is read (`bounds` without target ids):
    PlanBreaksRules for a plan marked refused or an op that breaks the run's rules."""
    if saved.plan.refused:
        raise PlanBreaksRules(f"the plan must not be applied: {saved.plan.refused}")
    refuse_violations(check_ops(saved.plan.ops, bounds), "the plan file")


def refuse_violations(violations: list[str], what: str) -> None:
    """PlanBreaksRules (one line, nothing written) when there is any violation."""
    if violations:
        raise PlanBreaksRules(f"{what} breaks the run's rules, nothing was written: {violations_line(violations)}")


def check_same(saved: SavedPlan, fresh: Plan) -> None:
    """PlanMismatch, in one line, unless the saved operations are exactly those of `fresh`,
    the plan made again from what the run read: a plan file states what was reviewed; what
    runs is always what syncd plans itself."""
    mine = {op.key: (op, _canonical(op)) for op in saved.plan.ops}
    now = {op.key: (op, _canonical(op)) for op in fresh.ops}
    differences = [f"its op {show(key)} ({op.action} {op.kind}) is not in it" for key, (op, _) in mine.items() if key not in now]
    differences += [f"it lacks op {show(key)} ({op.action} {op.kind})" for key, (op, _) in now.items() if key not in mine]
    for key, (_, saved_json) in mine.items():
        if key in now and now[key][1] != saved_json:
            fields = [name for name in sorted(set(saved_json) | set(now[key][1])) if saved_json.get(name) != now[key][1].get(name)]
            differences.append(f"its op {show(key)} differs in {', '.join(fields)}")
    if differences:
        more = f" (and {len(differences) - 1} more)" if len(differences) > 1 else ""
        raise PlanMismatch(
            f"the plan file is not the plan made from what was read now: {differences[0]}{more}; nothing was written: make a new plan"
        )


def _canonical(op: Op) -> dict[str, Any]:
    """An op as its JSON says it (tuples as lists), to compare a file's op with a new one."""
    value: dict[str, Any] = json.loads(json.dumps(op_to_json(op), sort_keys=True, default=list))
    return value
