"""A token must never reach log output, in either format, however it travels."""

from __future__ import annotations

import datetime
import enum
import io
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from urllib.parse import quote, quote_plus

import aiohttp
import pytest
import structlog
from multidict import CIMultiDict
from yarl import URL

import syncd.logging as syncd_logging
from syncd.emulator.server import RunningEmulator
from syncd.logging import (
    MASK,
    LogFormat,
    _forget_secrets,
    configure_logging,
    forget_secret,
    get_logger,
    redact,
    redact_processor,
    redact_text,
    register_secret,
    terminal_processor,
)
from tests.log_support import forget_logging

FORMATS: list[LogFormat] = ["console", "json"]


def _token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


@pytest.fixture
def capture() -> Iterator[Callable[[LogFormat], io.StringIO]]:
    """configure_logging into a buffer; afterwards drop our handler so other tests are unaffected."""

    def setup(fmt: LogFormat) -> io.StringIO:
        buffer = io.StringIO()
        configure_logging(fmt, "debug", stream=buffer)
        return buffer

    yield setup
    forget_logging()


def check_output(fmt: LogFormat, text: str, *tokens: str) -> None:
    """No token anywhere, the mask somewhere, and JSON mode is one valid object per line."""
    assert text.strip(), "nothing was logged"
    for token in tokens:
        assert token not in text, f"token leaked:\n{text}"
    assert MASK in text
    if fmt == "json":
        for line in text.splitlines():
            json.loads(line)


@pytest.mark.parametrize("fmt", FORMATS)
def test_secret_keys_nested_values_and_messages(fmt: LogFormat, capture: Callable[[LogFormat], io.StringIO]) -> None:
    buffer = capture(fmt)
    plain = _token("plain")  # NOT registered: masked by key names and the Bearer pattern only
    log = get_logger("syncd.test")
    log.info("kwargs", token=plain, Authorization=f"Bearer {plain}", PASSWORD=plain, api_key=plain)
    log.info(
        "nested",
        request={"headers": {"X-Api-Key": plain, "authorization": f"Bearer {plain}"}, "body": [{"secret": plain}]},
        items=[("token", {"access_token": plain})],
    )
    log.warning(f"calling with Authorization: Bearer {plain} failed")
    log.info("positional %s", f"bearer {plain}")
    log.info("query", url=f"https://api.example/v1/user?token={plain}&x=1")
    log.info("repr of headers", headers_repr=repr({"Authorization": f"Basic {plain}"}))
    check_output(fmt, buffer.getvalue(), plain)
    assert buffer.getvalue().count(MASK) >= 10


@pytest.mark.parametrize("fmt", FORMATS)
def test_registered_secret_masked_anywhere(fmt: LogFormat, capture: Callable[[LogFormat], io.StringIO]) -> None:
    buffer = capture(fmt)
    token = _token("reg")
    register_secret(token)
    log = get_logger("syncd.test")
    log.info(f"url http://h/orgs?q={token}", note=f"prefix{token}suffix", obj=object())
    log.error("bytes and objects", raw=token.encode(), err=ValueError(f"bad {token}"))
    check_output(fmt, buffer.getvalue(), token)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_secret_with_url_characters_is_masked_in_every_encoding(fmt: LogFormat, capture: Callable[[LogFormat], io.StringIO]) -> None:
    # `/`, `+`, `=` and `%` are what percent-encoding changes: a `prefix_hex` token would be
    # the same in every form, and so would prove nothing.
    buffer = capture(fmt)
    token = f"tok/en+{secrets.token_hex(6)}==x%41"
    register_secret(token)
    forms = {
        "raw": token,
        "encoded": quote(token, safe=""),
        "encoded, lower-case hex": quote(token, safe="").replace("%2F", "%2f").replace("%3D", "%3d"),
        "encoded but slashes": quote(token, safe="/"),
        "query of a URL": str(URL("https://api.example/v1/orgs").with_query(q=token)),
        "path of a URL": str(URL("https://api.example/v1/").joinpath(token)),
        "form-encoded": quote_plus(token),
    }
    assert len(set(forms.values())) >= 5, forms  # the forms really differ
    log = get_logger("syncd.test")
    for name, form in forms.items():
        log.info(f"{name}: GET {form} failed", url=form, error=ValueError(f"bad {form}"))
    text = buffer.getvalue()
    leaked = [name for name, form in forms.items() if form.split("v1/")[-1].split("q=")[-1] in text]
    assert not leaked, f"{leaked} leaked:\n{text}"
    assert text.count(MASK) >= 3 * len(forms)
    check_output(fmt, text, token)


@pytest.mark.parametrize("fmt", FORMATS)
def test_exceptions_and_tracebacks_are_scrubbed(fmt: LogFormat, capture: Callable[[LogFormat], io.StringIO]) -> None:
    buffer = capture(fmt)
    registered, plain = _token("exc"), _token("bear")
    register_secret(registered)
    log = get_logger("syncd.test")
    try:
        raise RuntimeError(f"token {registered} refused; header was Bearer {plain}")
    except RuntimeError:
        log.exception("it failed")
    # Library loggers go through stdlib logging: same chain, same redaction.
    try:
        raise ConnectionError(f"Authorization: Bearer {plain} at {registered}")
    except ConnectionError:
        logging.getLogger("aiohttp.client").exception("lib failed %s", registered)
    logging.getLogger("aiohttp.access").warning("extra", extra={"authorization": plain})
    text = buffer.getvalue()
    check_output(fmt, text, registered, plain)
    assert "Traceback" in text and "RuntimeError" in text and "ConnectionError" in text




@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("answer", ["401", "drop"])
async def test_failed_http_request_never_leaks_the_token(
    fmt: LogFormat, answer: str, capture: Callable[[LogFormat], io.StringIO], emulator: RunningEmulator
) -> None:
    """The realistic leak: aiohttp errors carry request info, headers included. The emulator
    answers the unknown token 401, or (its `drop` fault) hangs up without an answer."""
    buffer = capture(fmt)
    header_token = _token("hdr")  # not registered: only structural redaction protects it
    url_secret = _token("url")  # registered, and travelling inside the URL
    register_secret(url_secret)
    base, route = emulator.url, "/v1/user"
    if answer == "drop":
        async with aiohttp.ClientSession() as admin:
            async with admin.put(base + "/_emulator/faults", json={"drop": 1.0}) as resp:
                assert resp.status == 200
    log = get_logger("syncd.api")
    headers = {"Authorization": f"Bearer {header_token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        with pytest.raises(aiohttp.ClientError) as info:
            async with session.get(f"{base}{route}", params={"q": url_secret}) as response:
                request_headers = response.request_info.headers
                response.raise_for_status()
        exc = info.value
        assert isinstance(exc, aiohttp.ClientResponseError) == (answer == "401"), exc  # the emulator played it
        try:
            raise exc
        except aiohttp.ClientError:
            if isinstance(exc, aiohttp.ClientResponseError):
                log.exception(
                    "request failed",
                    url=str(exc.request_info.real_url),
                    headers=dict(request_headers),
                    multidict=request_headers,
                    request_info=exc.request_info,
                    error=exc,
                )
                logging.getLogger("aiohttp.client").error("failed: %r", exc.request_info, exc_info=True)
            else:
                log.exception("request failed", url=f"{base}{route}?q={url_secret}", headers=headers, error=exc)
                logging.getLogger("aiohttp.client").error("failed %s with %r", route, headers, exc_info=True)
    text = buffer.getvalue()
    check_output(fmt, text, header_token, url_secret)
    assert "request failed" in text
    if answer == "401":
        assert "401" in text and "Authorization" in text


def test_configure_is_idempotent(capture: Callable[[LogFormat], io.StringIO]) -> None:
    capture("json")
    buffer = capture("json")
    get_logger("syncd.test").info("once")
    logging.getLogger("x").warning("stdlib once")
    lines = buffer.getvalue().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["once", "stdlib once"]
    marked = [h for h in logging.getLogger().handlers if getattr(h, "_syncd_handler", False)]
    assert len(marked) == 1


def test_level_filters(capture: Callable[[LogFormat], io.StringIO]) -> None:
    buffer = io.StringIO()
    configure_logging("json", "warning", stream=buffer)
    log = structlog.get_logger("syncd.test")
    log.info("hidden")
    log.warning("shown")
    assert [json.loads(line)["event"] for line in buffer.getvalue().splitlines()] == ["shown"]
    with pytest.raises(ValueError):
        configure_logging("xml", "info")  # type: ignore[arg-type]


def test_redact_does_not_mutate_and_keeps_non_secrets() -> None:
    data = {"token": "abc123456", "token_env": "SRC_TOKEN", "count": 3, "nested": {"password": None}}
    clean = redact(data)
    assert data["token"] == "abc123456"
    assert clean == {"token": MASK, "token_env": "SRC_TOKEN", "count": 3, "nested": {"password": None}}
    assert redact_text("nothing secret here") == "nothing secret here"


def test_foreign_handlers_see_scrubbed_records(capture: Callable[[LogFormat], io.StringIO]) -> None:
    """A library's own handler with a plain formatter gets redacted text too."""
    capture("console")
    token = _token("lib")
    register_secret(token)
    plain = _token("plain")
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    library = logging.getLogger("some.library")
    library.addHandler(handler)
    try:
        library.warning("connecting with %s and %r", token, {"h": f"Bearer {plain}"})
        try:
            raise OSError(f"failed for {token}")
        except OSError:
            library.exception("boom")
    finally:
        library.removeHandler(handler)
    text = sink.getvalue()
    assert token not in text and plain not in text
    assert "OSError" in text and MASK in text


def test_a_forgotten_secret_is_shown_again_and_the_others_stay_masked() -> None:
    """`forget_secret` (a content source's capability withdrawn): only that one is let go."""
    kept, gone = _token("kept"), _token("gone")
    register_secret(kept)
    register_secret(gone)
    assert redact_text(f"{kept} {gone}") == f"{MASK} {MASK}"
    forget_secret(f"  {gone}\n")  # trimmed like at registration
    forget_secret(_token("never"))  # unknown: nothing changes
    assert redact_text(f"{kept} {gone}") == f"{MASK} {gone}"
    forget_secret(kept)
    assert redact_text(f"{kept} {gone}") == f"{kept} {gone}"
    registered = set(syncd_logging._secrets)  # what other tests of this process registered, put back below
    try:
        for value in registered:
            forget_secret(value)
        assert redact_text("plain words") == "plain words"  # the last one forgotten: no empty pattern left
        register_secret(kept)
        _forget_secrets()
        assert redact_text(f"plain {kept}") == f"plain {kept}"  # no pattern left behind, not a broken one
    finally:
        for value in registered:
            register_secret(value)


def test_a_secret_containing_another_is_masked_whole() -> None:
    inner = f"zz{secrets.token_hex(8)}"
    outer, around = f"{inner}-tail", f"aa-{inner}"  # the one it begins, the one it ends
    for value in (inner, outer, around):
        register_secret(value)
    assert redact_text(f"[{outer}] [{around}] [{inner}]") == f"[{MASK}] [{MASK}] [{MASK}]"


def test_a_secret_with_characters_of_several_bytes_is_masked_percent_encoded() -> None:
    token = f"tök€n-{secrets.token_hex(8)}"
    register_secret(token)
    assert redact_text(f"?q={quote(token, safe='')} {quote(token).lower()}") == f"?q={MASK} {MASK}"


def test_a_logger_carries_the_values_bound_at_creation(capture: Callable[[LogFormat], io.StringIO]) -> None:
    buffer = capture("json")
    get_logger("syncd.test", job="nightly").info("bound")
    assert json.loads(buffer.getvalue().splitlines()[-1])["job"] == "nightly"


class _Colour(enum.Enum):
    SECRET = "value"


def test_objects_are_logged_readably_and_scrubbed_inside() -> None:
    token = _token("inside")
    register_secret(token)

    class Opaque:
        def __repr__(self) -> str:
            return f"<Opaque {token}>"

    assert redact(ValueError(f"bad {token}")) == f"ValueError: bad {MASK}"
    assert redact(PurePosixPath(f"/keys/{token}")) == f"/keys/{MASK}"
    assert redact(_Colour.SECRET) == "value"
    assert redact(Opaque()) == f"<Opaque {MASK}>"
    assert redact(datetime.date(2026, 3, 1)) == "2026-03-01"


def test_nesting_is_walked_to_a_fixed_depth_then_shown_as_text() -> None:
    token = _token("deep")
    register_secret(token)
    nested: object = [1, token]
    for _ in range(11):  # the innermost list ends at depth 11: still walked
        nested = [nested]
    walked = redact(nested)
    for _ in range(11):
        assert isinstance(walked, list) and len(walked) == 1
        walked = walked[0]
    assert walked == [1, MASK]
    deeper = redact([nested])  # one more level: depth 12 is shown as text, scrubbed
    for _ in range(12):
        deeper = deeper[0]
    assert deeper == f"[1, '{MASK}']"
    assert redact({"a": {"b": nested}})["a"]["b"][0][0][0][0][0][0][0][0][0][0] == f"[[1, '{MASK}']]"


def test_keys_that_are_not_text_are_shown_scrubbed_and_repeated_names_keep_every_value() -> None:
    token = _token("key")
    register_secret(token)
    assert redact({("tenant", token): 1, 5: 2, None: 3, 1.5: 4, True: 5}) == {f"('tenant', '{MASK}')": 1, 5: 2, None: 3, 1.5: 4, True: 5}
    headers = CIMultiDict([("X-Tag", "one"), ("X-Tag", "two"), ("X-Tag", "three"), ("Authorization", f"Bearer {token}")])
    assert redact(headers) == {"X-Tag": ["one", "two", "three"], "Authorization": MASK}
    assert redact(token.encode()) == f"b'{MASK}'"
    assert redact(("a", token)) == ("a", MASK) and isinstance(redact(("a",)), tuple)
    assert redact({"token": "", "password": None}) == {"token": "", "password": None}  # nothing to hide


def test_the_processors_keep_structlogs_own_keys_and_clean_console_text() -> None:
    record = object()
    event = {"event": "e", "token": "", "api_token": "t0ken-value", "_record": record, "_from_structlog": True}
    assert redact_processor(None, "info", dict(event)) == {**event, "api_token": MASK}
    shown = terminal_processor(None, "info", {"event": "a\x1b[31mb\nc", "exception": "Traceback\n  line", "_record": "raw\n", "n": 5})
    assert "\x1b" not in shown["event"] and "\n" not in shown["event"] and "c" in shown["event"]
    assert shown["exception"] == "Traceback\n  line" and shown["_record"] == "raw\n" and shown["n"] == 5


def test_a_foreign_records_stack_is_scrubbed(capture: Callable[[LogFormat], io.StringIO]) -> None:
    capture("console")  # installs the record factory
    token = _token("stack")
    register_secret(token)
    record = logging.getLogRecordFactory()("foreign", logging.INFO, "f.py", 1, "msg", (), None, None, f"Stack (most recent call last):\n  {token}")
    assert record.stack_info == f"Stack (most recent call last):\n  {MASK}"


def test_what_each_format_prints_around_the_event(capture: Callable[[LogFormat], io.StringIO], monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON lines carry an ISO time in UTC ("Z"), console lines the local time as HH:MM:SS (a zone
    away from UTC, so the two differ), both with the values a foreign record was given as `extra`;
    a level or format syncd does not know is refused in words."""
    buffer = capture("json")
    logging.getLogger("some.library").warning("from a library", extra={"attempt": 3})
    line = json.loads(buffer.getvalue().splitlines()[-1])
    assert line["attempt"] == 3 and line["timestamp"].endswith("Z")
    assert abs(datetime.datetime.fromisoformat(line["timestamp"]) - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(minutes=5)

    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: never the same hour as UTC
    time.tzset()
    try:
        buffer = capture("console")
        logging.getLogger("some.library").warning("from a library", extra={"attempt": 4})
        text = buffer.getvalue()
        local = datetime.datetime.now()
        assert text[:8] in {(local - datetime.timedelta(seconds=s)).strftime("%H:%M:%S") for s in range(5)}, text
        assert "attempt=4" in text
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    with pytest.raises(ValueError, match=r"unknown log format 'xml' \(use console or json\)"):
        configure_logging("xml", "info")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown log level 'loud' \(use debug, info, warning, error or critical\)"):
        configure_logging("json", "loud")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_colours_only_a_terminal_and_prints_tracebacks_plain() -> None:
    try:
        for stream, coloured in ((_Terminal(), True), (io.StringIO(), False)):
            configure_logging("console", "info", stream=stream)
            log = get_logger("syncd.test")
            try:
                raise OSError("disk gone")
            except OSError:
                log.exception("write failed")
            text = stream.getvalue()
            assert ("\x1b[" in text) is coloured, text
            assert "Traceback (most recent call last):" in text and "OSError: disk gone" in text
            assert "\u256d" not in text  # plain, not drawn in a box (rich's traceback is the default)
    finally:
        forget_logging()


def test_a_new_level_applies_to_loggers_made_before(capture: Callable[[LogFormat], io.StringIO]) -> None:
    """A daemon's reload may change the level: loggers already made follow it (none is cached)."""
    capture("json")
    log = get_logger("syncd.test")
    log.debug("debug at first")
    buffer = io.StringIO()
    configure_logging("json", "warning", stream=buffer)
    log.debug("hidden now")
    log.warning("shown")
    assert [json.loads(line)["event"] for line in buffer.getvalue().splitlines()] == ["shown"]


def test_a_secret_of_the_shortest_length_masked_is_masked() -> None:
    secret = "k" * syncd_logging._MIN_SECRET_LENGTH
    register_secret(secret)
    try:
        assert redact_text(f"key {secret}.") == f"key {MASK}."
    finally:
        forget_secret(secret)


def test_configuring_replaces_only_syncds_own_handler(capture: Callable[[LogFormat], io.StringIO]) -> None:
    foreign = logging.StreamHandler(io.StringIO())
    root = logging.getLogger()
    root.addHandler(foreign)
    try:
        capture("json")
        capture("console")
        assert foreign in root.handlers
        assert sum(getattr(h, "_syncd_handler", False) for h in root.handlers) == 1
    finally:
        root.removeHandler(foreign)
