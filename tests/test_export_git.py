"""The documentation's history as a Git repository (issue 43, part 2): `syncd export FILE.db DIR
--git` commits the export when something changed, with a message that says what; `--push`
sends it to a remote (here a local bare repository); `syncd restore DIR@REV TENANT:ORG` restores
what a commit holds. The real CLI against an emulator process over loopback: three syncs with
changes between them are three commits with their summaries, a sync without changes is none,
`git log -p` shows a page's edit as a diff of its markdown, and the first commit restored into
an empty organization verifies equal to it.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.read.export.commit_message import commit_message, compare
from syncd.read.export.git_history import shown_remote
from syncd.read.export.records import LinePatch, Records, _patched
from tests.cli_zygote import emulator_process
from tests.loopback import EmulatorClient, closed_port
from tests.schema_support import check_output
from tests.test_plan_review import run as syncd
from tests.thread_emulator import command_folder

SPEC = "orgs=1,empty_orgs=1,collections=1,spaces=2,pages=3,files=1"


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorClient]:
    with emulator_process(token="all", spec=SPEC, seed=43, rate=0, profile="default") as running:
        yield EmulatorClient(running.url, running.report, "all")


@pytest.fixture
def env(emulator: EmulatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return command_folder(monkeypatch, tmp_path, emulator.url)


def git_log(repo: Path) -> list[tuple[str, str]]:
    """(commit id, full message) of the branch, newest first (dulwich: no git binary needed)."""
    from dulwich.repo import Repo

    with Repo(str(repo)) as opened:
        return [(entry.commit.id.decode(), entry.commit.message.decode()) for entry in opened.get_walker()]


def git_show(repo: Path, commit: str) -> str:
    """`git show COMMIT` (`git log -p` of one commit): the git binary where there is one (CI has
    it), else dulwich's equivalent."""
    git = shutil.which("git")
    if git:
        return subprocess.run([git, "-C", str(repo), "show", "--format=%s", commit], capture_output=True, text=True, check=True).stdout
    from dulwich import porcelain

    out = io.BytesIO()
    porcelain.show(str(repo), objects=[commit], outstream=out)
    return out.getvalue().decode()


def a_space_with_pages(emulator: EmulatorClient, org: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A space and two of its top pages: one to edit, then one without children to remove."""
    for space in emulator.api("GET", f"/v1/orgs/{org}/spaces?limit=1000")["items"]:
        pages = emulator.api("GET", f"/v1/spaces/{space['id']}/content/pages")["pages"]
        leaves = [page for page in pages if not page.get("pages")]  # a removed page takes none with it
        if len(pages) >= 2 and leaves and leaves[-1] is not pages[0]:
            return space, [pages[0], leaves[-1]]
    raise AssertionError(f"no space with two top pages, one without children, in {org}")


def export_git(capsys: pytest.CaptureFixture[str], org: str, *extra: str) -> dict[str, Any]:
    """`syncd sync emu:ORG`, then `syncd export state/syncd.db docs --git --json`: its document."""
    code, out, err = syncd(capsys, "sync", f"emu:{org}")
    assert code == 0, out + err
    code, out, err = syncd(capsys, "export", "state/syncd.db", "docs", "--git", "--json", *extra)
    document = check_output("export", out)
    assert document["git"] is not None, err
    document["code"], document["err"] = code, err
    return document


def test_three_syncs_are_three_commits_and_the_first_restores_equal(
    emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, empty = emulator.orgs[0], emulator.orgs[1]
    bare = env / "remote.git"
    from dulwich.repo import Repo

    Repo.init_bare(str(bare), mkdir=True).close()

    first = export_git(capsys, source, "--push", str(bare))
    assert first["code"] == 0 and first["git"]["committed"] and first["git"]["pushed"], first
    assert first["git"]["subject"].startswith("export of tenant emu, ") and "2 spaces" in first["git"]["subject"]

    # An edit of a page, as a user of the app would: one page changed in one space.
    space, pages = a_space_with_pages(emulator, source)
    edited, removed = pages
    emulator.admin("PATCH", f"/_emulator/spaces/{space['id']}/pages/{edited['id']}", {"markdown": "# Rewritten\n\nThe second version of this page.\n"})
    second = export_git(capsys, source, "--push", str(bare))
    assert second["git"]["committed"] and second["git"]["subject"] == "1 page changed in 1 space", second["git"]
    log = git_log(env / "docs")
    assert f"{space['title']}\n  changed: {edited['title']}" in log[0][1], log[0][1]

    # A page added and another removed.
    emulator.admin("POST", f"/_emulator/spaces/{space['id']}/pages", {"title": "Brand new page", "markdown": "# Brand new page\n\nHello.\n"})
    emulator.admin("DELETE", f"/_emulator/spaces/{space['id']}/pages/{removed['id']}")
    third = export_git(capsys, source, "--push", str(bare))
    assert third["git"]["subject"] == "1 page added, 1 removed in 1 space", third["git"]
    log = git_log(env / "docs")
    assert "  added: Brand new page" in log[0][1] and f"  removed: {removed['title']}" in log[0][1], log[0][1]

    # Nothing changed: no commit, and the remote has every commit.
    fourth = export_git(capsys, source, "--push", str(bare))
    assert not fourth["git"]["committed"] and fourth["git"]["commit"] == third["git"]["commit"] and fourth["git"]["pushed"]
    assert [sha for sha, _ in git_log(env / "docs")] == [third["git"]["commit"], second["git"]["commit"], first["git"]["commit"]]
    with Repo(str(bare)) as remote:
        assert remote.refs[b"refs/heads/main"].decode() == third["git"]["commit"]

    # `git log -p`: the edit is a diff of the page's markdown file.
    shown = git_show(env / "docs", second["git"]["commit"])
    assert "-# " in shown and "+# Rewritten" in shown and "+The second version of this page." in shown, shown
    diffed = [line for line in shown.splitlines() if line.startswith("+++ b/")]
    assert any(line.endswith(".md") for line in diffed), diffed

    # The first commit restored into an empty organization: equal to what the commit holds.
    code, out, err = syncd(capsys, "restore", "docs@HEAD~2", f"emu:{empty}")  # as Git names it
    assert code == 0, out + err
    hint = out.strip().splitlines()[-1]
    assert hint.endswith(f"mirror verify 'docs@{first['git']['commit']}' emu:{empty}") or hint.endswith(f"mirror verify docs@{first['git']['commit']} emu:{empty}"), hint
    code, out, err = syncd(capsys, "mirror", "verify", f"docs@{first['git']['commit']}", f"emu:{empty}")
    assert code == 0 and out.strip().splitlines()[-1].endswith(": equal"), out + err
    restored = {page["title"] for s in emulator.api("GET", f"/v1/orgs/{empty}/spaces?limit=1000")["items"]
                for page in emulator.api("GET", f"/v1/spaces/{s['id']}/content/pages")["pages"]}  # fmt: skip
    assert removed["title"] in restored and "Brand new page" not in restored  # the first state, not the last

    # A push to a remote that cannot be reached: exit 1, the reason, and the commit kept.
    emulator.admin("PATCH", f"/_emulator/spaces/{space['id']}/pages/{edited['id']}", {"markdown": "# Third version\n"})
    unreachable = f"http://127.0.0.1:{closed_port()}/docs.git"
    failed = export_git(capsys, source, "--push", unreachable)
    assert failed["code"] == 1 and failed["git"]["committed"] and failed["git"]["pushed"] is False, failed
    assert failed["git"]["push_error"].startswith(f"the push to {unreachable} failed"), failed["git"]
    assert git_log(env / "docs")[0][0] == failed["git"]["commit"]


def test_a_restore_of_a_folder_that_is_no_history_says_so(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (env / "plain").mkdir()
    from dulwich.repo import Repo

    Repo.init(str(env / "plain")).close()
    code, _, err = syncd(capsys, "restore", "plain", "emu:org")
    assert code != 0 and err.count("\n") == 1 and "plain has no commit 'HEAD'" in err, err


def records(objects: dict[str, list[dict[str, Any]]]) -> Records:
    return Records("emu", ["o"], objects)


def test_the_message_counts_spaces_and_pages_and_names_the_pages_by_space() -> None:
    space = {"id": "s1", "org": "o", "hash": "a", "data": {"title": "Guide"}}
    page = lambda id_, title, h: {"id": id_, "org": "o", "scope": "space:s1", "hash": h, "data": {"title": title}}  # noqa: E731
    old = records({"space": [space], "page": [page("p1", "Intro", "1"), page("p2", "Old", "1")], "organization": [{"id": "o", "hash": "x", "data": {"title": "Acme"}}]})
    new = records({"space": [space], "page": [page("p1", "Intro", "2"), page("p3", "New", "1")], "organization": [{"id": "o", "hash": "x", "data": {"title": "Acme"}}]})
    changes = compare(old, new)
    message = commit_message(changes, old, new, "tenant emu, Acme")
    assert message.splitlines()[0] == "1 page added, 1 changed, 1 removed in 1 space"
    assert "Guide\n  added: New\n  changed: Intro\n  removed: Old\n" in message and message.endswith("Source: tenant emu, Acme\n")
    assert compare(new, new).empty
    moved = records({**new.objects, "page": [dict(new.objects["page"][0], position=3), new.objects["page"][1]]})
    assert commit_message(compare(new, moved), new, moved, "s").splitlines()[0] == "1 page changed in 1 space"


def test_a_line_patch_gives_the_text_back_from_the_rewritten_file() -> None:
    original = ["# Title\n", "See [Install](install).\r\n", "plain\n"]
    written = ["# Title\n", "See [Install](install.md).\r\n", "plain\n"]
    patch = LinePatch()
    for before, after in zip(original, written, strict=True):
        patch.see(before, after)
    assert patch.usable and patch.lines == {"1": original[1]}
    assert _patched("".join(written), patch.lines) == "".join(original)
    broken = LinePatch()
    broken.see("a\n", "a\nb\n")  # a rewrite that made two lines of one: the text is kept whole
    assert not broken.usable


def test_a_remote_is_shown_without_its_password() -> None:
    assert shown_remote("https://bot:s3cret@git.example/org/docs.git") == "https://bot@git.example/org/docs.git"
    assert shown_remote("git@git.example:org/docs.git") == "git@git.example:org/docs.git"
    assert shown_remote("/srv/docs.git") == "/srv/docs.git"
    assert json.dumps(shown_remote("https://x:y@h:8443/r")) == '"https://x@h:8443/r"'


def test_an_https_remote_takes_its_token_from_the_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A smart-HTTP Git server on loopback (dulwich's WSGI app) behind basic authentication: no
    token, a wrong one and the right one, named by --push-token-env; the token is never shown."""
    import base64
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from dulwich.repo import Repo
    from dulwich.server import DictBackend
    from dulwich.web import make_wsgi_chain

    from tests.test_export import build_backup

    backup = build_backup(tmp_path / "backup.db").path
    remote = Repo.init_bare(str(tmp_path / "remote.git"), mkdir=True)
    app = make_wsgi_chain(DictBackend({"/docs.git": remote}))
    wanted = "Basic " + base64.b64encode(b"bot:s3cret-token").decode()

    def guarded(environ: dict[str, Any], start: Any) -> Any:
        if environ.get("HTTP_AUTHORIZATION") != wanted:
            start("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        return app(environ, start)

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", 0, guarded, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://bot@127.0.0.1:{server.server_port}/docs.git"
    try:
        args = ["export", str(backup), str(tmp_path / "docs"), "--git", "--push", url, "--push-token-env", "DOCS_TOKEN"]
        monkeypatch.delenv("DOCS_TOKEN", raising=False)
        code, out, _ = syncd(capsys, *args)
        assert code == 1 and "the environment variable DOCS_TOKEN (the remote's token) is not set" in " ".join(out.split()), out
        monkeypatch.setenv("DOCS_TOKEN", "wrong-token")
        code, out, _ = syncd(capsys, *args)
        assert code == 1 and f"the push to {url} failed" in " ".join(out.split()), out
        monkeypatch.setenv("DOCS_TOKEN", "s3cret-token")
        code, out, err = syncd(capsys, *args, "--json")
        document = check_output("export", out)
        assert code == 0 and document["git"]["pushed"] and document["git"]["remote"] == url, out + err
        assert remote.refs[b"refs/heads/main"].decode() == document["git"]["commit"] == git_log(tmp_path / "docs")[0][0]
        assert "s3cret-token" not in out + err
    finally:
        server.shutdown()
        server.server_close()
        remote.close()


@pytest.mark.parametrize("line", ['[1, 2]', '{"id": "s1", "data": "not an object"}', '["' + "[" * 5 + '"]', "[" * 100_000])
def test_a_commit_whose_records_are_damaged_is_refused_in_one_line_and_leaves_nothing(
    env: Path, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    """A history is input like any file: a record that is no object, a field of the wrong type
    or nesting too deep ends `restore` with one line (exit 1, as any GitError), and no partial backup is left in
    STATE_DIR/git-restores/."""
    from dulwich import porcelain

    repo = env / "damaged"
    (repo / ".syncd" / "objects").mkdir(parents=True)
    (repo / ".syncd" / "export.json").write_text(json.dumps({"format": 1, "tenant": "emu", "organizations": ["o"], "kinds": ["space"]}))
    (repo / ".syncd" / "objects" / "space.jsonl").write_text(line + "\n")
    porcelain.init(str(repo))
    porcelain.add(str(repo), paths=[str(repo / ".syncd" / "export.json"), str(repo / ".syncd" / "objects" / "space.jsonl")])
    porcelain.commit(str(repo), message=b"damaged", author=b"t <t@t>", committer=b"t <t@t>")
    code, out, err = syncd(capsys, "restore", "damaged", "emu:org")
    assert code == 1 and err.count("\n") == 1 and "cannot be restored" in err and "Traceback" not in out + err, (code, out, err)
    restores = env / "state" / "git-restores"
    assert not restores.exists() or not any(restores.iterdir()), list(restores.iterdir())
