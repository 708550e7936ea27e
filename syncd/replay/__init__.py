"""The write side: plan and apply the calls that make a target organization match a source.

    snapshot.py  Snapshot: one tenant's organization as the mirror holds it (pure data)
    ops.py       Op, Ref, Plan: what plan produces and apply executes (JSON-serialisable)
    rules.py     how each kind is copied: identity for adoption, fields, references
    plan.py      plan(source, target, idmap, mode) -> Plan            (pure)
    simulate.py  an in-memory target that executes a Plan           (pure, for property tests)
    apply.py     execute a Plan against the API: journal, idmap, reconciliation
    verify.py    compare two snapshots through the id map

Ids never cross tenants: every reference in an op is a `Ref(kind, source_id)` resolved
through the id map when the op runs, so an op can be planned before what it references
exists on the target.
"""
