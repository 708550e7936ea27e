"""Item 6 of issue 11: text that came from the server is shown as text.

Anyone who can edit a space chooses its title, and a server (or whatever answers in its
place) chooses its error messages. Before the fix a space titled `Docs [/bold]` crashed
`syncd diff` with rich's MarkupError, an error message holding `[/bold]` turned `sync`'s
exit 3 (partial) into a traceback, and escape sequences (clear screen, window title) went
to the terminal as they were. Now every command prints such text literally (markup shown
as written), without control characters or escape sequences, and errors stay one line.
"""

from __future__ import annotations

from pathlib import Path


from tests.hostile.cli_support import HOSTILE_TEXT, EmulatorProcess, Server, module_emulator, run_cli, tenant_env

GENERATE = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=2,files=1,sites=1"
MARKUP_TITLE = "Docs [/bold]"
ESCAPE_TITLE = "Evil \x1b]0;pwned\x07\x1b[2J"
OTHER_TITLE = "[bold red]m[/] \x1b[31mred\x9b2J\r\u202eevil :smile:"  # titles: 50 characters at most
HOSTILE = HOSTILE_TEXT


emulator = module_emulator(GENERATE)


def test_item06_titles_set_through_the_api_are_shown_as_text(emulator: EmulatorProcess, tmp_path: Path) -> None:
    source, empty = emulator.org_ids
    env = tenant_env(emulator.url, tmp_path / "state")

    def syncd(*args: str, code: int = 0) -> str:
        ran = run_cli(*args, env=env, cwd=tmp_path)
        assert ran.code == code, ran.show()
        ran.assert_clean()
        return ran.stdout

    syncd("sync", "src")
    spaces = emulator.items(f"/v1/orgs/{source}/spaces")
    for space, title in zip(spaces, (MARKUP_TITLE, ESCAPE_TITLE, OTHER_TITLE), strict=True):
        emulator.call("PATCH", f"/v1/spaces/{space['id']}", {"title": title})
    collection = emulator.items(f"/v1/orgs/{source}/collections")[0]["id"]
    emulator.call("PATCH", f"/v1/collections/{collection}", {"title": "[link=https://evil.example]x[/link]"})

    syncd("sync", "src")
    syncd("sync", "src")  # the second one finds nothing new: still no traceback
    shown = syncd("diff", "--run", "1", "--run", "2")
    assert MARKUP_TITLE in shown, "the markup is shown as it was written"
    assert "Evil " in shown and "[bold red]m[/] red evil :smile:" in shown and "[link=https://evil.example]x[/link]" in shown
    assert "pwned" not in shown, "an OSC sequence is removed whole, not half"
    syncd("status")
    syncd("mirror", "plan", f"src:{source}", f"src:{empty}", code=2)
    verified = syncd("mirror", "verify", f"src:{source}", f"src:{empty}", code=1)
    assert repr(MARKUP_TITLE) in verified, "verify shows titles as repr(): quoted, controls as \\x.. text"


def test_item06_an_error_message_from_the_server_is_one_clean_line(tmp_path: Path) -> None:
    """An error body's message with markup and escape sequences: a partial sync (exit 3) lists
    it, and a sync that cannot start (exit 1) says it, in one line each, as text."""
    org = {"object": "organization", "id": "org1", "title": "Org " + HOSTILE}
    env = tenant_env("", tmp_path / "state")
    with Server() as server:
        server.answer(r"/v1/orgs", 200, {"items": [org]})
        server.answer(r"/v1/orgs/org1/.+", 403, {"error": {"code": 403, "message": "no access [/bold] " + HOSTILE}})
        env["SYNCD_TENANTS__SRC__BASE_URL"] = server.url
        partial = run_cli("sync", "src", env=env, cwd=tmp_path)
        assert partial.code == 3, partial.show()
        partial.assert_clean()
        said = [line for line in partial.stdout.splitlines() if "could not read" in line and " 403 " in line]
        assert said and all("no access [/bold] [/bold][bold red]markup[/]" in line for line in said), partial.show()

        server.answer(r"/v1/orgs", 403, {"error": {"code": 403, "message": "refused [/bold] " + HOSTILE}})
        refused = run_cli("sync", "src", env=env, cwd=tmp_path)
        line = refused.one_line_error(1)
        assert "refused [/bold]" in line and "[bold red]markup[/]" in line


def test_item06_console_log_lines_carry_no_escape_sequences_and_json_lines_keep_the_text() -> None:
    import io
    import json
    import logging

    from syncd.logging import configure_logging, get_logger

    said = "listing failed: " + HOSTILE + "\nforged line"
    try:
        for fmt in ("console", "json"):
            stream = io.StringIO()
            configure_logging(fmt, "info", stream=stream)  # type: ignore[arg-type]
            get_logger("syncd.crawl").warning(said, error=said, title=ESCAPE_TITLE)
            logging.getLogger("aiohttp.client").warning("%s", said)  # a library's line: same chain
            text = stream.getvalue()
            if fmt == "console":
                assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\u202e" not in text, text
                assert len(text.splitlines()) == 2 and "[/bold]" in text, text
            else:
                events = [json.loads(line) for line in text.splitlines()]
                assert [e["event"] for e in events] == [said, said] and events[0]["title"] == ESCAPE_TITLE
    finally:
        configure_logging()
