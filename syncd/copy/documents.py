"""The JSON documents the write side prints with `--json` (one per run, on stdout).

- `mirror plan --json` (and `apply --dry-run --json`, `restore --dry-run --json`): the plan
  document, `planfile.plan_fields`, written as it is made (`planfile.write_plan`; schema
  `syncd/schemas/mirror-plan.json`);
- `mirror apply --json` and `restore --json`: `copy_document`, what each round did and the
  final verify (`mirror-apply.json`, `restore.json`);
- `mirror verify --json`: `verify_document` (`mirror-verify.json`).

Values from the organizations (titles, field values) are JSON values: `json.dumps` escapes
control characters itself, so nothing here needs `safe_text`.
"""

from __future__ import annotations

from typing import Any

from syncd.copy.apply import ApplyResult
from syncd.copy.report import CopyReport, RoundReport
from syncd.copy.observe import Outcome
from syncd.copy.ops import Op
from syncd.copy.planfile import skip_json
from syncd.copy.verify import Entry, Verification

__all__ = ["copy_document", "entry_json", "verification_json", "verify_document"]

BUCKETS: tuple[str, ...] = ("missing", "extra", "different", "errors", "excused")
"""Verify's buckets listed object by object (identical ones are only counted)."""


def entry_json(entry: Entry) -> dict[str, Any]:
    data = {
        "kind": entry.kind, "source_id": entry.source_id, "target_id": entry.target_id, "title": entry.title,
        "fields": {name: {"source": source, "target": target} for name, (source, target) in entry.fields.items()},
        "note": entry.note,
    }
    if entry.path:
        data["path"] = entry.path
    return data


def verification_json(verification: Verification) -> dict[str, Any]:
    return {
        "equal": verification.equal,
        "counts": verification.counts(),
        **{bucket: [entry_json(e) for e in getattr(verification, bucket)] for bucket in BUCKETS},
        "left_on_target": [entry_json(e) for e in verification.left],
    }


def verify_document(source: str, target: str, verification: Verification, residue: list[Entry]) -> dict[str, Any]:
    """`mirror verify --json`: equal only when nothing differs and the source holds nothing a copy made."""
    return {
        "source": source,
        "target": target,
        "equal": verification.equal and not residue,
        "verification": verification_json(verification),
        "residue": [entry_json(e) for e in residue],
    }


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {"key": outcome.key, "kind": outcome.kind, "title": outcome.title, "status": outcome.status, "reason": outcome.reason}


def _apply_json(result: ApplyResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "writes": result.writes, "reads": result.reads, "seconds": round(result.seconds, 3), "stats": result.stats(),
        "failed": [_outcome_json(o) for o in result.failed], "skipped": [_outcome_json(o) for o in result.skipped],
        "reconciled": list(result.reconciled), "notes": list(result.notes),
    }


def _round_json(round_: RoundReport) -> dict[str, Any]:
    return {"number": round_.number, "ops": round_.ops, "counts": round_.counts, "apply": _apply_json(round_.apply), "left": round_.left}


def _op_json(op: Op) -> dict[str, Any]:
    return {"key": op.key, "action": op.action, "kind": op.kind, "title": op.title}


def copy_document(report: CopyReport, *, plan_file: str | None = None) -> dict[str, Any]:
    """`mirror apply --json` / `restore --json`: the rounds, what was left, the final verify."""
    return {
        "source": report.source,
        "target": report.target,
        "mode": report.mode,
        "plan_file": plan_file,
        "equal": report.equal,
        "read_cleanly": report.read_cleanly,
        "writes": report.writes,
        "settled": list(report.settled),
        "rounds": [_round_json(r) for r in report.rounds],
        "changes": [item.to_json() for item in report.listing],
        "skips": [skip_json(s) for s in report.skips],
        "warnings": list(report.warnings),
        "outside_plan": [_op_json(op) for op in report.outside_plan],
        "verification": verification_json(report.verification),
        "residue": [entry_json(e) for e in report.residue],
    }
