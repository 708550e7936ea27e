"""Plain ops and the check after each write: the service's answer is the truth.

A create sends the fields a create can carry; whatever the service then made (a default it
chose, a name it derived, a field its answer leaves out) is compared with what the source
says (`Op.want`), and what differs is patched at once, in the same run. A field the answer
does not show is patched too (unless the source wants it empty): a check never assumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from syncd.api import ApiError
from syncd.catalog import write_call
from syncd.copy.model import Node, Snapshot
from syncd.copy.ops import Op
from syncd.copy.rules import RULES, canonical
from syncd.copy.writer import CallFailed, Unresolved, Writer

__all__ = ["Outcome", "Status", "check_answer", "outcome", "run_adopt", "run_call"]

Status = Literal["done", "adopted", "already-done", "failed", "skipped"]
_NOT_OK = ("failed", "skipped")
_EMPTY = Snapshot("", "")


@dataclass(frozen=True)
class Outcome:
    """What became of one op; `reason` says why for anything but a plain success, `fixes`
    counts the calls its checks added (patches after a create, moves of a settle step)."""

    key: str
    kind: str
    title: str
    status: Status
    reason: str = ""
    result_id: str | None = None
    fixes: int = 0

    @property
    def ok(self) -> bool:
        return self.status not in _NOT_OK


def outcome(op: Op, status: Status, reason: str = "", result_id: str | None = None, fixes: int = 0) -> Outcome:
    return Outcome(op.key, op.kind, op.title, status, reason, result_id, fixes)


def differences(kind: str, answer: Any, want: Mapping[str, Any]) -> dict[str, Any]:
    """Body (API names) of the fields of `want` (resolved) that the answer does not show as
    wanted. A field the answer leaves out counts as different, unless what is wanted is what
    an absent field means (no value, adaptive content off)."""
    rule = RULES[kind]
    data = answer if isinstance(answer, Mapping) else {}
    have = canonical(kind, Node(kind, str(data.get("id", "")), None, None, data), _EMPTY)
    absent = canonical(kind, Node(kind, "", None, None, {}), _EMPTY)
    body: dict[str, Any] = {}
    for name, value in want.items():
        if (have.get(name) if name in data else absent.get(name)) == value:
            continue
        body[rule.body_name(name)] = value
    return body


async def check_answer(op: Op, writer: Writer, answer: Any, patch_path: str | None) -> int:
    """Patch what a write's answer shows differently from `op.want`; returns the calls sent."""
    if not op.want or not patch_path:
        return 0
    want = writer.resolve(op.want)
    body = differences(op.kind, answer, want)
    if not body:
        return 0
    path = writer.resolve_path(patch_path)
    await writer.call(f"{op.key}:check", op.kind, op.source_id, write_call(op.kind, "patch").method, path, body)
    return 1


async def run_adopt(op: Op, writer: Writer) -> Outcome:
    """Record that an equivalent object already on the target stands for the source one."""
    if not op.source_id or not op.target_id:
        return outcome(op, "failed", "an adopt op needs a source id and a target id")
    mapped = writer.idmap.target(op.kind, op.source_id)
    if mapped is not None:
        return outcome(op, "already-done", f"{op.kind} {op.source_id} is already mapped to {mapped}", mapped)
    await writer.record([(op.kind, op.source_id, op.target_id, "adopted")])
    return outcome(op, "adopted", result_id=op.target_id)


async def run_call(op: Op, writer: Writer) -> Outcome:
    """One write call; a create is checked against `want` and what differs is patched."""
    if op.creates and op.source_id is not None:
        mapped = writer.idmap.target(op.kind, op.source_id)
        if mapped is not None and mapped != op.target_id:
            return outcome(op, "already-done", f"{op.kind} {op.source_id} is already mapped to {mapped}", mapped)
    try:
        path, body = writer.resolve_path(op.path), writer.resolve(op.body)
        if not op.creates:
            drops = [(op.kind, op.source_id)] if op.action == "delete" and op.source_id else []
            await writer.call(op.key, op.kind, op.source_id, op.method, path, body, side=op.side, drops=drops)
            return outcome(op, "done")
        assert op.expect is not None and op.source_id is not None
        new_id, answer = await writer.create(op.key, (op.kind, op.source_id), op.method, path, body, writer.resolve_expect(op.expect), side=op.side)
        writer.done_creating()
        fixes = await check_answer(op, writer, answer, (op.spec or {}).get("patch"))
        fixes += await replace_stale(op, writer)
        return outcome(op, "done", result_id=new_id, fixes=fixes)
    except Unresolved as exc:
        return outcome(op, "failed", f"cannot send: {exc}")
    except (ApiError, CallFailed) as exc:
        return outcome(op, "failed", str(exc))


async def replace_stale(op: Op, writer: Writer) -> int:
    """Delete the object a create replaced (a site-space syncd made in the wrong section:
    it cannot move there), once its replacement exists."""
    spec = op.spec or {}
    if not spec.get("replaces") or not spec.get("replaces_path"):
        return 0
    await writer.call(f"{op.key}:replaced", op.kind, None, "DELETE", writer.resolve_path(spec["replaces_path"]))
    return 1
