"""The write side: make a target organization equal to a source (a copy, a mirror, a restore).

    engine.py   copy_org: settle leftovers, read, plan, apply, read again, in rounds
    free_memory.py  a dropped reading's memory given back before the next one is read
    report.py   what a copy tells: its rounds, verification, leftovers, the run summary
    sides.py    the two sides and how they are read (live organization, backup file)
    plan.py     plan_copy(source, target, idmap, mode) -> Plan: the order of the parts (pure)
    context.py  what the parts of the planner share: snapshots, id map, the plan being written
    org.py      organization settings, teams, custom fields, translations, specs, SAML
    tree.py     collections, spaces, their values and content, their order (settle step)
    sites.py    sites, groups, sections, site-spaces, adaptive schemas, their layout (settle)
    site_layout.py  a site's layout, pure: the changes a settle makes, previewed at plan time
    deletes.py  mirror mode: what syncd made and the source lost, children first, capped
    apply.py    execute a Plan: dependencies, concurrency, the turns of creates into one listing
    overlap.py  which creates into one listing may be in flight together (names told apart)
    placement.py  where new objects land, observed; the turn (Turnstile) chosen from it
    observe.py  plain calls, and the check of every create's answer against the source
    writer.py   journaled calls; a lost answer settled by what appeared in the listing
    content.py  a space's content brought by an import, right at every open point of imports
    served.py   the source spaces published on the run's content source, once per import
    import_bound.py  content imports at once: what the content source serves, learned from it
    recover.py  what earlier runs left: open intents, duplicates in the source
    journal.py  the apply runs, the journal and the id map in the state file
    verify.py   compare source and target (rclone check style), excuses, residue
    review.py   a plan as people review it: one line per operation, titles, paths, before → after
    planfile.py saved plans: the plan document, fingerprints of both sides, stale plans refused
    documents.py  the JSON documents of `--json` (apply, restore, verify)
    rules.py    how each kind is compared: fields, identity, canonical form
    model.py    Snapshot, Node, IdMap (pure data)
    scoped.py   a space's pages, links, files, comments: read from the state when asked, not held
    ops.py      Op, Ref, Expect, Plan, Skip (JSON round-trip)

Ids never cross tenants: every reference in an op is a `Ref(kind, source id)` resolved
through the id map when the op runs. The service's answers and listings are the truth: no part
predicts a name, a path, a position or a default the service chooses.
"""

from syncd.copy.context import ContentStrategy, Mode
from syncd.copy.engine import NotRestored, PlanRefused, Reading, copy_org, dry_run_lines, plan_org, verify_org
from syncd.copy.model import IdMap, Node, Snapshot
from syncd.copy.ops import Op, Plan, Ref, Skip
from syncd.copy.plan import plan_copy
from syncd.copy.recover import UnsettledError
from syncd.copy.report import CopyReport, RoundReport
from syncd.copy.sides import BackupSource
from syncd.copy.verify import Verification, compare, render

__all__ = [
    "BackupSource",
    "ContentStrategy",
    "CopyReport",
    "IdMap",
    "Mode",
    "Node",
    "NotRestored",
    "Op",
    "Plan",
    "PlanRefused",
    "Reading",
    "Ref",
    "RoundReport",
    "Skip",
    "Snapshot",
    "UnsettledError",
    "Verification",
    "compare",
    "copy_org",
    "dry_run_lines",
    "plan_copy",
    "plan_org",
    "render",
    "verify_org",
]
