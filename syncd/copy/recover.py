"""What earlier copies of a pair left unsettled, settled before anything is read.

- An intent whose answer was lost when its run ended (killed, cancelled, the target
  unreachable): a create is looked for by what appeared in its listing since the intent was
  written (found: mapped; not found: closed as not applied, the plan makes it again); any
  other call is closed (sending it again is harmless). A create sent beside its siblings
  (journaled with their `names`) takes only the new object of its own name; one that finds
  none, but a new object bearing no sibling's name, is looked at again once the others are
  settled: alone in its listing by then, what appeared there is its own, as for a create
  sent alone.
- A duplicate made in the source for a transfer that did not happen: transferred after all
  (it is in the target: mapped), or deleted from the source.

Why before reading: a duplicate left in the source would be read as a source space and copied
too; an object made by a lost create would be created a second time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from syncd.api import ApiError
from syncd.copy import journal
from syncd.copy.ops import Expect, decode, expect_from_json, expect_to_json
from syncd.copy.tree import settle_duplicate
from syncd.copy.overlap import names_from_json
from syncd.copy.writer import CallFailed, Unexplained, Unresolved, Writer
from syncd.errors import SyncdError

__all__ = ["UnsettledError", "pending_work", "settle_leftovers"]


class UnsettledError(SyncdError):
    """Calls of an earlier run have an unknown effect that cannot be checked now: nothing is
    written until they are (the next run tries again)."""


@dataclass(frozen=True)
class _Open:
    """An open create of an earlier run: its journal entry and what it was to make."""

    run: int
    seq: int
    where: str
    kind: str
    source_id: str
    body: Any


def pending_work(open_intents: list[dict[str, object]], duplicates: dict[str, str]) -> bool:
    return bool(open_intents) or bool(duplicates)


async def settle_leftovers(writer: Writer, open_intents: list[dict[str, object]]) -> list[str]:
    """Settle what earlier runs left (see the module docstring); returns what was done, one
    line each. Raises UnsettledError when a lost create cannot be looked for."""
    done: list[str] = []
    unknown: list[str] = []
    later: list[tuple[_Open, Expect]] = []
    for intent in open_intents:
        run, seq, key = int(intent["run"]), int(intent["seq"]), str(intent["op_key"])  # type: ignore[call-overload]
        info = intent.get("intent") or {}
        if isinstance(info, dict) and "made" not in info:
            info = _from_older_syncd(intent, info)
        made = info.get("made") if isinstance(info, dict) else None
        where = f"call {key} of run {run}"
        if not made or not isinstance(info, dict) or "expect" not in info:
            await writer.db(journal.fail, run, seq, f"its run ended with its effect unknown; closed by run {writer.run}: safe to send again", False)
            continue
        kind, source_id = str(made[0]), str(made[1])
        lost = _Open(run, seq, where, kind, source_id, intent.get("body"))
        mapped = writer.idmap.target(kind, source_id)
        if mapped is not None:
            await writer.db(journal.complete, run, seq, mapped, (), ())
            continue
        try:
            expect = writer.resolve_expect(expect_from_json(info["expect"]))
            item = await writer.find_made(expect, (kind, source_id), run, intent.get("body"), names_from_json(info.get("names")))
        except Unexplained:
            later.append((lost, expect))
            continue
        except (ApiError, CallFailed, Unresolved) as exc:
            unknown.append(f"{where}: {exc}")
            continue
        done.append(await _close(writer, lost, expect, item))
    alone = Counter(_listing(expect) for _, expect in later)
    for lost, expect in later:
        if alone[_listing(expect)] > 1:
            unknown.append(f"{lost.where}: several creates sent side by side found new objects of names none of them sent")
            continue
        try:
            item = await writer.find_made(expect, (lost.kind, lost.source_id), lost.run, lost.body)
        except (ApiError, CallFailed) as exc:
            unknown.append(f"{lost.where}: {exc}")
            continue
        done.append(await _close(writer, lost, expect, item))
    for source_id, duplicate in writer.idmap.of_kind("space-duplicate").items():
        moved = await settle_duplicate(writer, source_id, duplicate)
        done.append(f"duplicate {duplicate} of space {source_id}: " + ("it had been transferred" if moved else "settled in the source"))
    if unknown:
        raise UnsettledError(
            f"{len(unknown)} call(s) of an earlier run may have made objects that cannot be looked for now "
            f"({unknown[0]}); nothing was written: run again once the target answers"
        )
    return done


def _listing(expect: Expect) -> tuple[str, str, str]:
    return expect.side, expect.path, str(expect.parent)


async def _close(writer: Writer, lost: _Open, expect: Expect, item: Any | None) -> str:
    """Close an open create with what was found of it (None: nothing); what was done, one line."""
    if item is None:
        await writer.db(journal.fail, lost.run, lost.seq, f"not applied: nothing appeared (checked by run {writer.run})", False)
        return f"{lost.where}: not applied"
    new_id = str(item.get(expect.id_field))
    await writer.db(journal.complete, lost.run, lost.seq, new_id, [(lost.kind, lost.source_id, new_id, "created")], ())
    writer.idmap.put(lost.kind, lost.source_id, new_id, "created")
    return f"{lost.where}: its {lost.kind} was made ({new_id})"


def _from_older_syncd(intent: dict[str, object], op: dict[str, object]) -> dict[str, object]:
    """An intent journaled by a syncd before this write side: its op's `match` says where a
    create's object shows up (its field value is not used: what appeared is)."""
    match = op.get("match")
    if op.get("action") not in ("create", "content") or not isinstance(match, dict) or not isinstance(match.get("path"), str):
        return {}
    side = "source" if op.get("client") == "source" else "target"
    expect = Expect(str(match["path"]), side=side, parent_field=match.get("parent_field"), parent=decode(match.get("parent")),  # type: ignore[arg-type]
                    id_field=str(op.get("result_id_field") or "id"))
    kind = "space-duplicate" if side == "source" else str(intent["kind"])
    return {"side": side, "made": [kind, str(intent["source_id"])], "expect": expect_to_json(expect)}
