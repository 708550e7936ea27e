"""Link rewriting: the destinations of a page's inline links and images made the relative
paths of the files an export writes (the page's markdown is otherwise left as it is, and so is
anything inside code), and the names of file binaries under `.gitbook/assets/`."""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import unquote

from syncd.read.export.layout import _ASSET_MAX, _WINDOWS_RESERVED


def _link_text(title: str) -> str:
    """A title as markdown link text: one line, no control characters, brackets escaped."""
    visible = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in title)
    text = " ".join(visible.split()) or "Untitled"
    return re.sub(r"([\\\[\]])", r"\\\1", text)


# ----- links -----------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{1,31}:")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_ASSET_PREFIXES = (".gitbook/assets/", "./.gitbook/assets/", "/.gitbook/assets/")


def rewrite_links(markdown: str, resolve: Callable[[str], str | None]) -> str:
    """`markdown` with the destination of each inline link and image (`[text](dest)`,
    `![alt](dest "title")`, `[text](<dest>)`) replaced by `resolve(dest)` when that is not
    None; nothing else changes, and nothing inside fenced code blocks or code spans."""
    return "".join(rewritten_lines(markdown, resolve))


def rewritten_lines(markdown: str, resolve: Callable[[str], str | None]) -> Iterator[str]:
    """`rewrite_links`, line by line as `str.splitlines(keepends=True)` cuts them: a page is
    written as it is rewritten, never held twice."""
    fence = ""
    for line in _lines(markdown):
        opening = _FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence) and not line[opening.end() :].strip():
                fence = ""
            yield line
        elif opening and not (opening.group(1)[0] == "`" and "`" in line[opening.end() :]):
            fence = opening.group(1)
            yield line
        else:
            yield _rewrite_line(line, resolve)


_LINES_BLOCK = 1 << 20


def _lines(text: str) -> Iterator[str]:
    """`text.splitlines(keepends=True)`, made as it is read: pieces of about 1 MiB cut after a
    `\n` (which always ends a line, and never parts a `\r\n`) are split in turn, so the
    lines of a huge page are never all in memory at once."""
    start, end = 0, len(text)
    while start < end:
        cut = text.find("\n", min(start + _LINES_BLOCK, end) - 1)
        stop = end if cut == -1 else cut + 1
        yield from text[start:stop].splitlines(keepends=True)
        start = stop


def _code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of the code spans of one line: a run of n backticks up to the next run of n."""
    spans: list[tuple[int, int]] = []
    runs = list(_BACKTICKS.finditer(line))
    index = 0
    while index < len(runs):
        run = runs[index]
        closing = next((j for j in range(index + 1, len(runs)) if len(runs[j].group()) == len(run.group())), None)
        if closing is None:
            index += 1
            continue
        spans.append((run.start(), runs[closing].end()))
        index = closing + 1
    return spans


def _destination(line: str, start: int) -> tuple[int, int, int] | None:
    """After `](` at `start`: (start, end) of the destination and the index after the closing
    parenthesis, or None when what follows is not a link destination (CommonMark rules)."""
    i, n = start, len(line)
    while i < n and line[i] in " \t":
        i += 1
    if i < n and line[i] == "<":
        close = i + 1
        while close < n and line[close] not in "<>\n":
            close += 2 if line[close] == "\\" else 1
        if close >= n or line[close] != ">":
            return None
        begin, end, j = i + 1, close, close + 1
    else:
        begin, depth, j = i, 0, i
        while j < n and line[j] not in " \t\r\n" and ord(line[j]) >= 0x20:
            if line[j] == "\\" and j + 1 < n:
                j += 2
                continue
            if line[j] == "(":
                depth += 1
            elif line[j] == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        end = j
        if end == begin:
            return None
    while j < n and line[j] in " \t":
        j += 1
    if j < n and line[j] in "\"'(" and j > end:
        closer = ")" if line[j] == "(" else line[j]
        k = j + 1
        while k < n and line[k] != closer:
            k += 2 if line[k] == "\\" else 1
        if k >= n:
            return None
        j = k + 1
        while j < n and line[j] in " \t":
            j += 1
    if j >= n or line[j] != ")":
        return None
    return begin, end, j + 1


def _rewrite_line(line: str, resolve: Callable[[str], str | None]) -> str:
    if "](" not in line:
        return line
    code = _code_spans(line)
    pieces: list[str] = []
    done = 0
    at = line.find("](")
    while at != -1:
        inside = next((end for begin, end in code if begin <= at < end), None)
        if inside is not None:
            at = line.find("](", inside)
            continue
        found = _destination(line, at + 2)
        if found is None:
            at = line.find("](", at + 2)
            continue
        begin, end, after = found
        target = resolve(line[begin:end])
        if target is not None:
            pieces += [line[done:begin], target]
            done = end
        at = line.find("](", after)
    return "".join(pieces) + line[done:]


def _resolver(page_file: str, page_files: Mapping[str, str], assets: Mapping[str, str]) -> Callable[[str], str | None]:
    """The new destination of a link in the page written at `page_file` (from the content's
    root): the relative path of the linked page's file or of the file's binary, the anchor
    kept; None for anything else (left as it is)."""
    folder = posixpath.dirname(page_file) or "."

    def resolve(destination: str) -> str | None:
        target = _ESCAPED.sub(r"\1", destination)
        if not target or target.startswith(("#", "//", "?")) or _SCHEME.match(target):
            return None
        path, hashmark, anchor = target.partition("#")
        if "?" in path:
            return None
        path = unquote(path)
        found: str | None = None
        for prefix in _ASSET_PREFIXES:
            if path.startswith(prefix):
                found = assets.get(path[len(prefix) :])
                break
        else:
            while path.startswith("./"):
                path = path[2:]
            found = page_files.get(path[:-1] if path.endswith("/") else path)
        if found is None:
            return None
        return posixpath.relpath(found, folder) + hashmark + anchor

    return resolve


def asset_name(name: str) -> str:
    """A file's name for `.gitbook/assets/`: ascii letters, digits, `.`, `_` and `-` only,
    not starting with a dot, at most 100 characters with its extension kept."""
    value = unicodedata.normalize("NFKD", name)
    value = "".join(ch for ch in value if not unicodedata.combining(ch))
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip(".-")
    value = re.sub(r"\.{2,}", ".", value)
    stem, dot, extension = value.rpartition(".")
    if not dot or not stem or len(extension) > 16:
        stem, dot, extension = value, "", ""
    stem = stem[: _ASSET_MAX - len(dot + extension)].rstrip(".-") or "file"
    if stem.lower() in _WINDOWS_RESERVED:
        stem += "-file"
    return stem + dot + extension
