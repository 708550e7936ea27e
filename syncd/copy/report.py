"""What a copy tells (`CopyReport`, one `RoundReport` a round): the rounds with their
plans and costs, the closing verification, what was left on the target, the run summary the
daemon records. Apart from the engine (`syncd.copy.engine`), which fills them in, so that
whoever only shows a copy (`syncd.copy.documents`, the commands) needs none of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncd.copy.apply import ApplyResult
from syncd.copy.ops import Leftover, Op, Plan, Skip
from syncd.copy.review import Item
from syncd.copy.verify import Entry, Verification, leftovers

__all__ = ["NAMED", "CopyReport", "RoundReport"]

NAMED = 20
"""Objects a run summary names per list (what was left on the target, what differs)."""


@dataclass
class RoundReport:
    """One round: its plan, what applying it cost, and what the next read found left."""

    number: int
    ops: int
    counts: dict[str, dict[str, int]]
    apply: ApplyResult | None = None
    left: dict[str, int] | None = None

    @property
    def writes(self) -> int:
        return self.apply.writes if self.apply else 0

    def line(self) -> str:
        cost = f"{self.writes} writes, {self.apply.reads} reads, {self.apply.seconds:.1f}s" if self.apply else "not applied"
        failed = f", {len(self.apply.failed)} failed" if self.apply and self.apply.failed else ""
        left = ""
        if self.left is not None:
            shown = {k: v for k, v in self.left.items() if v and k not in ("identical", "excused", "formatting", "restructured", "left_on_target")}
            left = "; left: " + (", ".join(f"{v} {k}" for k, v in shown.items()) if shown else "nothing")
            if self.left.get("excused"):
                left += f" ({self.left['excused']} differences the plan announced)"
            if self.left.get("left_on_target"):
                left += f" ({self.left['left_on_target']} only on the target, kept by copy mode)"
        return f"round {self.number}: {self.ops} operations, {cost}{failed}{left}"


@dataclass
class CopyReport:
    source: str
    target: str
    mode: str
    rounds: list[RoundReport] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    verification: Verification = field(default_factory=Verification)
    residue: list[Entry] = field(default_factory=list)
    read_cleanly: bool = True
    plans: list[Plan] = field(default_factory=list)
    outside_plan: list[Op] = field(default_factory=list)
    """Ops a later round planned that the saved plan did not hold: not applied."""
    listing: list[Item] = field(default_factory=list)
    """The first plan as people review it (`review`)."""
    traffic: dict[str, int] = field(default_factory=dict)
    """Requests, retries and 429s of the copy's clients, both sides (`requests`, `retries`, `rate_limited`)."""

    @property
    def equal(self) -> bool:
        """Equal apart from what the plan announced, and nothing left in the source."""
        return self.verification.equal and not self.residue

    @property
    def left_on_target(self) -> list[Leftover]:
        """What the copy left on the target that the source does not have (copy mode keeps it)."""
        return leftovers(self.verification)

    @property
    def writes(self) -> int:
        return sum(r.writes for r in self.rounds)

    @property
    def apply_seconds(self) -> float:
        return sum(r.apply.seconds for r in self.rounds if r.apply)

    @property
    def failed(self) -> list[str]:
        return [f"{o.key}: {o.reason}" for r in self.rounds if r.apply for o in r.apply.failed]

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures (the daemon's run summary)."""
        return {
            "rounds": [{"ops": r.ops, "writes": r.writes, "left": r.left} for r in self.rounds],
            "writes": self.writes,
            **self.traffic,
            "verify": self.verification.counts(),
            "residue": len(self.residue),
            "skips": len(self.skips),
            "equal": self.equal,
            "read_cleanly": self.read_cleanly,
            "failures": self.failed[:20],
            "left_on_target": [{"kind": o.kind, "title": o.title, "path": o.path} for o in self.left_on_target[:NAMED]],
            "differences": self.differences()[:NAMED],
        }

    def differences(self) -> list[str]:
        """What keeps the copy from being equal, object by object, in words (`missing space 'A'`)."""
        v = self.verification
        named = [(bucket, e) for bucket in ("missing", "different", "extra", "errors") for e in getattr(v, bucket)]
        words = {"missing": "missing on the target", "different": "different", "extra": "only on the target", "errors": "in error"}
        out = [f"{e.kind} {e.title!r} {words[bucket]}" + (f" ({', '.join(e.fields)})" if e.fields else "") for bucket, e in named]
        return out + [f"{e.kind} {e.title!r} made in the source by a copy and still there" for e in self.residue]
