"""The architecture page (`docs/development/architecture.md`) draws the rooms as the code has
them: a room (a folder or a module at `syncd/`'s root) missing from its table, or named there
and gone from the code, fails here; so does a room whose "uses" column is not what its modules
import, a diagram that is not the code's graph, a path on the page that does not exist, an
import in a circle between rooms, and a room other than the commands that imports the emulator.

Why a test: the page is read to find where a change goes, and a map that drifted from the code
sends a newcomer to the wrong room. The imports are read from the code (`ast`, at module level
and inside functions); one made by `importlib` from a string is not seen.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "syncd"
PAGE = ROOT / "docs" / "development" / "architecture.md"

ROOMS_HEADING = "## The rooms"
GROUND = "the ground"
"""How the row of the modules every room may use begins: no other row lists it under "uses"."""

SPAN = re.compile(r"`([^`]+)`")
PATH_LIKE = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)
NODE = re.compile(r"(\w+)\[\"([^\"]+)\"\]")
EDGE = re.compile(r"(\w+)(?:\[\"[^\"]+\"\])?\s*-->\s*(\w+)")


@dataclass(frozen=True)
class Row:
    """One row of the page's table of rooms."""

    name: str
    """The first path of its first cell (`copy/`, `cli.py`): how the other rows name it."""
    paths: tuple[str, ...]
    """Every path of its first cell, relative to `syncd/`."""
    holds: str
    uses: frozenset[str]
    """The paths of the other rows whose modules it imports (`copy/`, `ordering.py`), the ground left out."""
    ground: bool


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _spans(text: str) -> list[str]:
    """The code spans of markdown text, outside its fenced blocks."""
    return SPAN.findall(FENCED.sub("", text))


def _rooms_section(text: str) -> str:
    start = text.index(ROOMS_HEADING)
    end = text.find("\n## ", start + len(ROOMS_HEADING))
    return text[start : end if end != -1 else len(text)]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@cache
def _rows() -> tuple[Row, ...]:
    rows = []
    lines = [line for line in _rooms_section(_page()).splitlines() if line.startswith("|")]
    for line in lines[2:]:  # after the header and its rule
        first, holds, uses = _cells(line)
        paths = tuple(SPAN.findall(first))
        assert paths, f"a row of the rooms' table names no room: {line}"
        rows.append(Row(paths[0], paths, holds, frozenset(SPAN.findall(uses)), first.lower().startswith(GROUND)))
    return tuple(rows)


def _top_level() -> set[str]:
    """What stands at `syncd/`'s root: its folders (`api/`) and its modules (`cli.py`)."""
    found = set()
    for entry in PACKAGE.iterdir():
        if entry.name.startswith((".", "__pycache__")):
            continue
        if entry.is_dir():
            found.add(f"{entry.name}/")
        elif entry.suffix == ".py":
            found.add(entry.name)
    return found


def _modules() -> dict[str, str]:
    """Every module of the package by dotted name (`syncd.copy.engine`), with its path
    relative to `syncd/` (`copy/engine.py`)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        parts = ["syncd", *relative.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = relative.as_posix()
    return modules


def _imported(module: str, source: str, modules: Mapping[str, str]) -> Iterable[str]:
    """The modules of the package that `module` imports, anywhere in its code."""
    is_package = modules[module].endswith("__init__.py")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("syncd"):
                yield name


def _holder(relative: str, rows: Iterable[Row]) -> tuple[Row, str]:
    """The row that holds a file, and the path of that row that names it: `copy/engine.py` is
    `copy/`'s, `ordering.py` is the shared rules' as `ordering.py`."""
    holders = [(row, path) for row in rows for path in row.paths if relative == path or (path.endswith("/") and relative.startswith(path))]
    assert len(holders) == 1, f"syncd/{relative} is held by {len(holders)} rows of the rooms' table, not one"
    return holders[0]


@cache
def _uses() -> dict[str, frozenset[str]]:
    """What each row imports, as the code has it: the paths of the other rows that hold the
    modules imported (itself and the ground left out)."""
    rows = _rows()
    modules = _modules()
    uses: dict[str, set[str]] = {row.name: set() for row in rows}
    for module, relative in modules.items():
        holder, _ = _holder(relative, rows)
        for target in _imported(module, (PACKAGE / relative).read_text(encoding="utf-8"), modules):
            used, path = _holder(modules[target], rows)
            if used.name != holder.name and not used.ground:
                uses[holder.name].add(path)
    return {name: frozenset(paths) for name, paths in uses.items()}


@cache
def _graph() -> dict[str, frozenset[str]]:
    """Which rows each row imports (by their names), the ground left out."""
    rows = _rows()
    return {name: frozenset(_holder(path, rows)[0].name for path in paths) for name, paths in _uses().items()}


def _reachable(graph: Mapping[str, Iterable[str]], start: str, skip: tuple[str, str] | None = None) -> set[str]:
    """Every row `start` reaches along the arrows (without the one arrow `skip`)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        here = todo.pop()
        for there in graph.get(here, ()):
            if (here, there) != skip and there not in seen:
                seen.add(there)
                todo.append(there)
    return seen


def test_every_room_at_the_root_of_the_package_is_a_row_of_the_table() -> None:
    named = [path for row in _rows() for path in row.paths]
    assert len(named) == len(set(named)), f"a room is named in two rows: {sorted(p for p in named if named.count(p) > 1)}"
    missing = _top_level() - set(named)
    gone = set(named) - _top_level()
    assert not missing, f"rooms of syncd/ the architecture page does not name: {sorted(missing)}"
    assert not gone, f"rooms the architecture page names that syncd/ does not have: {sorted(gone)}"


def test_every_package_inside_a_room_is_named_on_the_page() -> None:
    named = {span.rstrip("/") for span in _spans(_page())}  # `daemon/ui/` or a file in it, anywhere
    named |= {f"{row.name}{span}".rstrip("/") for row in _rows() if row.name.endswith("/") for span in _spans(row.holds)}  # `ui/` in `daemon/`'s row
    inner = {
        path.parent.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if len(path.relative_to(PACKAGE).parts) > 2 and "__pycache__" not in path.parts
    }
    assert inner, "syncd/ has packages inside its rooms (daemon/ui/, read/export/...): the walk found none"
    unnamed = {package for package in inner if not any(name == package or name.startswith(f"{package}/") for name in named)}
    assert not unnamed, f"packages the architecture page does not name: {sorted(unnamed)}"


def test_every_path_the_page_names_exists() -> None:
    text = _page()
    top = {name.rstrip("/") for name in _top_level()}
    checked = 0
    for row in _rows():  # a bare file in a row is its room's (`service.py` in `daemon/`)
        room = PACKAGE / row.name if row.name.endswith("/") else PACKAGE
        for span in _spans(row.holds):
            if PATH_LIKE.match(span) and span.endswith((".py", "/")):
                assert (room / span).exists(), f"{row.name} holds `{span}` on the architecture page: syncd/{row.name}{span} does not exist"
                checked += 1
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("|"))  # the table's paths are its rooms'
    for span in _spans(prose):  # elsewhere: a path from the package (`copy/plan.py`) or the repository (`tests/`)
        if "/" in span.rstrip("/") and PATH_LIKE.match(span) and span.endswith((".py", ".json", "/")):
            first = span.split("/", 1)[0]
            where = PACKAGE / span if first in top else ROOT / span
            assert where.exists(), f"the architecture page names `{span}`: {where.relative_to(ROOT)} does not exist"
            checked += 1
    assert checked > 20, "the page names files of the rooms: the check found too few to be reading it"


def test_each_rooms_uses_are_what_its_modules_import() -> None:
    uses = _uses()
    wrong = [
        f"{row.name}: the page says {sorted(row.uses)}, the code imports {sorted(uses[row.name])}" for row in _rows() if row.uses != uses[row.name]
    ]
    assert not wrong, "the rooms' 'uses' column differs from the code:\n" + "\n".join(wrong)


def test_no_room_imports_another_in_a_circle() -> None:
    graph = _graph()
    circles = sorted(name for name in graph if name in _reachable(graph, name))
    assert not circles, f"rooms that reach themselves through their imports: {circles}"


def test_only_the_commands_import_the_emulator() -> None:
    """The emulator is a stand-in for the service: no part of syncd may lean on it but the
    commands that start it (`syncd emulator`, `syncd demo`)."""
    importers = sorted(name for name, used in _graph().items() if "emulator/" in used)
    assert importers == ["commands/"], f"rooms that import the emulator: {importers}"


def test_the_diagram_draws_each_arrow_that_no_longer_way_implies() -> None:
    """The diagram is the code's graph without the arrows a longer way already implies (the
    floors), over the rooms that hold code; the table's "uses" column has every arrow."""
    blocks = MERMAID.findall(_page())
    assert len(blocks) == 1, f"the architecture page has {len(blocks)} mermaid diagrams, not one"
    nodes = {node: label.split()[0].rstrip(",") for node, label in NODE.findall(blocks[0])}
    drawn = {(nodes[a], nodes[b]) for a, b in EDGE.findall(blocks[0])}
    graph = _graph()
    coded = {row.name for row in _rows() if not row.ground and any(row.paths[0] == path for path in _code_rooms())}
    assert set(nodes.values()) == coded, f"the diagram's rooms {sorted(set(nodes.values()))} are not those with code {sorted(coded)}"
    reduced = {(a, b) for a, targets in graph.items() for b in targets if b not in _reachable(graph, a, skip=(a, b))}
    assert drawn == reduced, f"arrows to draw: {sorted(reduced - drawn)}; arrows to take away: {sorted(drawn - reduced)}"


def _code_rooms() -> set[str]:
    """The rooms that hold Python modules (`schemas/` holds data)."""
    return {name for name in _top_level() if name.endswith(".py") or any((PACKAGE / name).rglob("*.py"))}
