"""Issue 22, cases 2 and 6: a saved plan is a statement of intent, not a program.

`mirror apply --plan` used to send whatever operations the file held: ops added to a copy
plan (a DELETE of a space in another organization, a PATCH renaming the source organization)
went out with exit 0, since the fingerprints prove the two sides unchanged but bind neither
the ops, the mode nor `max_delete`. A malformed file gave tracebacks, some after writes began.

Now the file is checked whole before anything (one line, exit 2), every op is held to the
run's rules (`syncd.copy.invariants`: the target only, no delete in a copy, at most the
command line's `--max-delete`), and the plan made again from what the run read must hold
exactly the file's ops. Each refusal is checked against the emulator's request counts (no
write) and the state file's journal (no intent). The same rules hold for plans syncd makes
itself (a planner bug writes nothing either); a property test shows they never refuse a plan
the planner makes.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.cli import main
from syncd.copy import ContentStrategy, IdMap, Snapshot, plan_copy
from syncd.copy.invariants import Bounds, check_ops, known_target_ids
from syncd.copy.ops import Op
from tests.cli_zygote import emulator_process
from tests.loopback import EmulatorClient
from tests.strategies import OrgShape, copied, mapping, organizations, remove, snapshot, twin

TOKEN = "intent-token"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Emulator(EmulatorClient):
    """The module's emulator: a fresh empty organization for each call of `org`."""

    def __init__(self, url: str, report: dict[str, Any], token: str) -> None:
        super().__init__(url, report, token)
        self.next = count()

    def org(self) -> str:
        return self.orgs[next(self.next)]

    def title(self, org: str) -> str:
        return str(self.api("GET", f"/v1/orgs/{org}")["title"])

    def titles(self, kind: str, org: str) -> list[str]:
        return sorted(str(item["title"]) for item in self.api("GET", f"/v1/orgs/{org}/{kind}?limit=1000")["items"])


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with emulator_process(token=TOKEN, spec="orgs=0,empty_orgs=40", seed=12) as running:
        yield Emulator(running.url, running.report, TOKEN)


def use_syncd(emulator: Emulator, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """syncd's environment in `folder` (two tenants on the emulator); the state directory."""
    monkeypatch.chdir(folder)
    values = {"SYNCD_STATE_DIR": str(folder / "state"), "SYNCD_LOG_LEVEL": "warning", "COLUMNS": "200"}
    for name in ("SRC", "DST"):
        values[f"SYNCD_TENANTS__{name}__BASE_URL"] = emulator.url
        values[f"SYNCD_TENANTS__{name}__TOKEN"] = TOKEN
    for key in [k for k in os.environ if k.startswith("SYNCD_")]:
        monkeypatch.delenv(key)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return folder / "state"


@pytest.fixture
def state(emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_syncd(emulator, tmp_path, monkeypatch)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def journal_rows(state: Path) -> int:
    """Intents journaled in the state file so far (none when there is no state file yet)."""
    db = state / "syncd.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM journal").fetchone()[0])


class Refusal:
    """`apply --plan` of an edited file: exit 2, one `syncd: error:` line, no traceback,
    no write request served by the emulator, no intent journaled."""

    def __init__(self, emulator: Emulator, state: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.emulator, self.state, self.capsys = emulator, state, capsys

    def __call__(self, plan_file: Path, *extra: str) -> str:
        writes, intents = self.emulator.writes(), journal_rows(self.state)
        code, out, err = run(self.capsys, "mirror", "apply", "--plan", str(plan_file), *extra)
        lines = [line for line in err.splitlines() if line.strip()]
        assert (code, out) == (2, ""), (code, out, err)
        assert len(lines) == 1 and lines[0].startswith("syncd: error: ") and "Traceback" not in err, err
        assert self.emulator.writes() == writes and journal_rows(self.state) == intents
        return lines[0]


@pytest.fixture
def refused(emulator: Emulator, state: Path, capsys: pytest.CaptureFixture[str]) -> Refusal:
    return Refusal(emulator, state, capsys)


def edited(plan_file: Path, change: Any, name: str, folder: Path | None = None) -> Path:
    """A copy of the plan file with `change(document)` applied (beside it, or in `folder`)."""
    document = json.loads(plan_file.read_text())
    change(document)
    out = (folder or plan_file.parent) / name
    out.write_text(json.dumps(document))
    return out


def added(op: dict[str, Any]) -> Any:
    return lambda document: document["ops"].append(op)


def call_op(key: str, action: str, kind: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """An op as a plan file holds it (what an edit adds)."""
    return {"key": key, "action": action, "kind": kind, "source_id": key.rsplit(":", 1)[-1], "title": "edited in", "recipe": "call",
            "method": method, "path": path, "body": body, "side": "target", "target_id": None, "after": [], "serial": None, "note": ""}


def planned(emulator: Emulator, folder: Path, *options: str) -> tuple[str, str, Path]:
    """A source with a collection and a space in it, an empty target, and the saved plan."""
    src, dst = emulator.org(), emulator.org()
    guides = emulator.api("POST", f"/v1/orgs/{src}/collections", {"title": "Guides"})["id"]
    emulator.api("POST", f"/v1/orgs/{src}/spaces", {"title": "Alpha", "parent": guides})
    plan_file = folder / "plan.json"
    code = main(["mirror", "plan", f"src:{src}", f"dst:{dst}", *options, "--out", str(plan_file)])
    assert code == 2 and plan_file.exists()
    return src, dst, plan_file


@pytest.fixture(scope="module")
def base_plan(emulator: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One saved copy plan for the cases that edit a field (none of them reads anything)."""
    folder = tmp_path_factory.mktemp("base")
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_syncd(emulator, folder, monkeypatch)
        return planned(emulator, folder)[2]


def test_ops_added_to_a_copy_plan_are_refused_and_nothing_is_sent(
    emulator: Emulator, state: Path, refused: Refusal, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src, dst, plan_file = planned(emulator, tmp_path)
    other = emulator.org()
    victim = emulator.api("POST", f"/v1/orgs/{other}/spaces", {"title": "Not yours"})["id"]
    source_title = emulator.title(src)

    line = refused(edited(plan_file, added(call_op("delete:space:evil", "delete", "space", "DELETE", f"/v1/spaces/{victim}")), "delete.json"))
    assert "mode copy never deletes" in line, line
    line = refused(edited(plan_file, added(call_op("patch:organization:evil", "patch", "organization", "PATCH", f"/v1/orgs/{src}", {"title": "Owned"})), "rename.json"))
    assert f"is in organization '{src}', not the target '{dst}'" in line, line
    # An op of the plan changed in place: it is not the op a plan made now holds.
    def retitle(document: dict[str, Any]) -> None:
        op = next(op for op in document["ops"] if op["key"].startswith("create:collection:"))
        op["body"]["title"] = "Renamed by whoever had the file"
    line = refused(edited(plan_file, retitle, "retitled.json"))
    assert "the plan file is not the plan made from what was read now" in line and "differs in body" in line, line
    # An op the plan holds, dropped: a plan made now still holds it.
    def drop_space(document: dict[str, Any]) -> None:
        document["ops"] = [op for op in document["ops"] if not op["key"].startswith("create:space:")]
        for op in document["ops"]:
            op["after"] = [key for key in op["after"] if not key.startswith("create:space:")]
    line = refused(edited(plan_file, drop_space, "dropped.json"))
    assert "it lacks op 'create:space:" in line, line

    assert emulator.titles("spaces", other) == ["Not yours"] and emulator.title(src) == source_title
    assert emulator.titles("collections", dst) == []
    code, out, err = run(capsys, "mirror", "apply", "--plan", str(plan_file))  # the file as it was saved: applied
    assert code == 0 and ": equal" in out, out + err
    assert emulator.titles("collections", dst) == ["Guides"] and emulator.titles("spaces", dst) == ["Alpha"]


def test_a_mirror_plan_may_delete_only_objects_of_the_target(emulator: Emulator, state: Path, refused: Refusal, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A delete in a mirror plan passes the checks made before the read; once the target is
    read, a space of another organization is not one of its objects."""
    _, dst, plan_file = planned(emulator, tmp_path, "--mode", "mirror")
    other = emulator.org()
    victim = emulator.api("POST", f"/v1/orgs/{other}/spaces", {"title": "Not yours"})["id"]
    line = refused(edited(plan_file, added(call_op("delete:space:evil", "delete", "space", "DELETE", f"/v1/spaces/{victim}")), "delete.json"))
    assert f"names space '{victim}', which is not an object of the target organization" in line, line
    # A settle step's organization is the run's target, not what the file says.
    def elsewhere(document: dict[str, Any]) -> None:
        next(op for op in document["ops"] if op["action"] == "settle")["spec"]["org"] = other
    line = refused(edited(plan_file, elsewhere, "settle.json"))
    assert f"spec.org '{other}' is not the target organization '{dst}'" in line, line
    assert emulator.titles("spaces", other) == ["Not yours"] and emulator.titles("spaces", dst) == []


def test_the_mode_is_bound_to_the_ops_and_deletes_to_the_command_line_limit(
    emulator: Emulator, state: Path, refused: Refusal, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src, dst = emulator.org(), emulator.org()
    emulator.api("POST", f"/v1/orgs/{src}/collections", {"title": "Kept"})
    doomed = [emulator.api("POST", f"/v1/orgs/{src}/collections", {"title": f"Old {n:02}"})["id"] for n in range(11)]
    assert run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}")[0] == 0
    for collection in doomed:
        emulator.api("DELETE", f"/v1/collections/{collection}")
    copy_plan, mirror_plan = tmp_path / "copy.json", tmp_path / "mirror.json"
    assert run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--out", str(copy_plan))[0] in (0, 2)
    code, _, err = run(capsys, "mirror", "plan", f"src:{src}", f"dst:{dst}", "--mode", "mirror", "--max-delete", "11", "--out", str(mirror_plan))
    assert code == 2 and json.loads(mirror_plan.read_text())["options"]["max_delete"] == 11, err

    # A copy plan relabelled mirror: a plan made now in mirror mode deletes, the file does not.
    line = refused(edited(copy_plan, lambda d: d.update(mode="mirror"), "relabelled.json"))
    assert "it lacks op 'delete:collection:" in line, line
    # A mirror plan relabelled copy, its deletes kept: a copy never deletes.
    line = refused(edited(mirror_plan, lambda d: d.update(mode="copy"), "copy-with-deletes.json"))
    assert "mode copy never deletes" in line, line
    # The file says 11 may go; the limit is the command line's (default 10), not the file's.
    line = refused(mirror_plan)
    assert "11 deletes exceed --max-delete 10" in line, line
    line = refused(mirror_plan, "--max-delete", "3")
    assert "11 deletes exceed --max-delete 3" in line, line
    assert len(emulator.titles("collections", dst)) == 12
    code, out, err = run(capsys, "mirror", "apply", "--plan", str(mirror_plan), "--max-delete", "11")
    assert code == 0 and ": equal" in out, out + err
    assert emulator.titles("collections", dst) == ["Kept"]


def op(document: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The op of the document whose key starts with `prefix`."""
    return next(item for item in document["ops"] if item["key"].startswith(prefix))


COLLECTION, SPACE = "create:collection:", "create:space:"
MALFORMED: list[tuple[str, Any, str]] = [
    ("unknown-action", lambda d: op(d, COLLECTION).update(action="explode"), "action 'explode' is not one of adopt, create"),
    ("unknown-recipe", lambda d: op(d, COLLECTION).update(recipe="rm-rf"), "recipe 'rm-rf' is not one of call, adopt"),
    ("crlf-method", lambda d: op(d, COLLECTION).update(method="POST\r\nX-Injected: 1"), "method 'POST\\r\\nX-Injected: 1' is not an HTTP method"),
    ("other-method", lambda d: op(d, COLLECTION).update(method="TRACE"), "method 'TRACE' is not one syncd sends (POST, PUT, PATCH, DELETE)"),
    ("crlf-path", lambda d: op(d, COLLECTION).update(path=op(d, COLLECTION)["path"] + "\r\nHost: evil"), "is not an API path (/v1/...)"),
    ("duplicate-keys", lambda d: d["ops"].append(copy.deepcopy(op(d, COLLECTION))), "two ops have the key 'create:collection:"),
    ("cycle", lambda d: [op(d, COLLECTION).update(after=[op(d, SPACE)["key"]]), op(d, SPACE).update(after=[op(d, COLLECTION)["key"]])],
     "wait for each other in a cycle"),
    ("unknown-after", lambda d: op(d, COLLECTION).update(after=["create:space:nowhere"]), "waits for 'create:space:nowhere', which the plan does not hold"),
    ("max-delete-text", lambda d: d["options"].update(max_delete="lots"), "options.max_delete 'lots' is not a whole number >= 0"),
    ("adopt-text", lambda d: d["options"].update(adopt="yes"), "options.adopt 'yes' is not true or false"),
    ("unknown-option", lambda d: d["options"].update(force=True), "options.'force' is not an option of a plan"),
    ("mode", lambda d: d.update(mode="destroy"), "mode 'destroy' is neither copy nor mirror"),
    ("fingerprint", lambda d: d["target"].update(fingerprint="sha256:nope"), "target.fingerprint 'sha256:nope' is not sha256:<64 hex digits>"),
    ("ops-not-a-list", lambda d: d.update(ops={"a": 1}), "ops must be a list"),
    ("op-not-an-object", lambda d: d["ops"].append("DELETE /v1/spaces/x"), "must be an object"),
    ("unknown-op-field", lambda d: op(d, COLLECTION).update(headers={"X": "1"}), "has an unknown field 'headers'"),
    ("bad-ref", lambda d: op(d, SPACE).update(body={"parent": {"$ref": ["collection"]}}), "a reference {'$ref': ['collection']} must be"),
    ("target-id-type", lambda d: op(d, COLLECTION).update(target_id=7), "7 must be text or null"),
    ("refused", lambda d: d.update(refused="12 deletes exceed --max-delete 10"), "the plan must not be applied: 12 deletes exceed --max-delete 10"),
]


@pytest.mark.parametrize(("name", "change", "said"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_each_malformed_field_is_one_line_before_anything_is_written(
    base_plan: Path, state: Path, refused: Refusal, tmp_path: Path, name: str, change: Any, said: str
) -> None:
    line = refused(edited(base_plan, change, f"{name}.json", tmp_path))
    assert said in line, line


def test_a_name_given_twice_in_one_object_is_refused(base_plan: Path, state: Path, refused: Refusal, tmp_path: Path) -> None:
    """One tool shows the first `path`, another uses the last: the file is not read at all."""
    text = base_plan.read_text()
    twice = tmp_path / "twice.json"
    twice.write_text(text.replace('"path": "/v1/orgs/', '"path": "/v1/spaces/x", "path": "/v1/orgs/', 1))
    assert "the name 'path' is given twice in one object" in refused(twice)


def test_a_plan_syncd_makes_itself_is_held_to_the_same_rules(
    emulator: Emulator, state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: a planner bug that plans a write of the source writes nothing."""
    import syncd.copy.engine as engine

    src, dst = emulator.org(), emulator.org()
    emulator.api("POST", f"/v1/orgs/{src}/collections", {"title": "Guides"})
    title = emulator.title(src)

    def buggy(*args: Any, **kwargs: Any) -> Any:
        plan = plan_copy(*args, **kwargs)
        plan.ops.append(Op(key="patch:organization:bug", action="patch", kind="organization", source_id=src, title="bug",
                           method="PATCH", path=f"/v1/orgs/{src}", body={"title": "Written by a bug"}))
        return plan

    monkeypatch.setattr(engine, "plan_copy", buggy)
    writes = emulator.writes()
    code, out, err = run(capsys, "mirror", "apply", f"src:{src}", f"dst:{dst}")
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert "the plan breaks the run's rules (a bug of syncd): op 'patch:organization:bug'" in err, err
    assert emulator.writes() == writes and emulator.title(src) == title and journal_rows(state) == 0


# ----- no false alarm: every plan the planner makes keeps the rules ---------------------------------


def target_bounds(source: Snapshot, target: Snapshot, idmap: IdMap, mode: str) -> Bounds:
    spaces = source.of_kind("space")
    return Bounds(target_org=target.org, mode=mode, max_delete=1000, target_ids=known_target_ids(target, idmap),
                  source_spaces=frozenset(n.api_id for n in spaces) | frozenset(n.id for n in spaces))


def empty_target() -> Snapshot:
    from syncd.copy import Node

    return Snapshot("dst", "TORG", [Node("organization", "TORG", None, None, {"object": "organization", "id": "TORG", "title": "Target"})])


CONTENTS = st.sampled_from((ContentStrategy(same_credentials=True), ContentStrategy(readable=True), ContentStrategy(serve=True, serve_everything=True)))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Snapshot, Snapshot, IdMap, str, ContentStrategy]:
    """A source and a target: empty, missing a few objects, or equal and then losing a few in
    the source (a mirror deletes them)."""
    shape: OrgShape = draw(organizations())
    full = snapshot(shape)
    keys = sorted(copied(full))
    lost = draw(st.sets(st.sampled_from(keys), max_size=4)) if keys else set()
    kind = draw(st.sampled_from(("empty", "lost-in-target", "lost-in-source")))
    mode = draw(st.sampled_from(("copy", "mirror")))
    content = draw(CONTENTS)
    if kind == "empty":
        return full, empty_target(), IdMap(), mode, content
    twin_target = snapshot(shape, tenant="dst", org="TORG", prefix="T")
    if kind == "lost-in-target":
        target, _ = remove(twin_target, {(k, twin(i, "T")) for k, i in lost})
        return full, target, mapping(full, target, "T"), mode, content
    source, _ = remove(full, lost)
    return source, twin_target, mapping(full, twin_target, "T"), mode, content


@settings(max_examples=max(20, settings.default.max_examples // 2), deadline=None)  # 25 by default, more under HYPOTHESIS_PROFILE=slow
@given(scenarios())
def test_every_plan_the_planner_makes_keeps_the_rules(scenario: tuple[Snapshot, Snapshot, IdMap, str, ContentStrategy]) -> None:
    source, target, idmap, mode, content = scenario
    plan = plan_copy(source, target, idmap, mode, max_delete=1000, content=content)  # type: ignore[arg-type]
    assert check_ops(plan.ops, target_bounds(source, target, idmap, mode)) == []
