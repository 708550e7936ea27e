"""Links between pages and search, both read from the markdown of a holder's revision.

Markdown links between pages use the target's `path` (`[Install](guides/install)`), files
are referenced as `.gitbook/assets/<name>`; links, backlinks and search read them from the
markdown, so a copy of a space keeps working links without any id rewriting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from syncd.emulator import revisions
from syncd.emulator.routes.content_model import ASSETS, Holder, locate_all
from syncd.emulator.store import Record, Store

_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")


def _link_target(href: str, by_path: dict[str, Record], by_name: dict[str, Record], base: str) -> tuple[str, dict[str, Any]] | None:
    """(status, targetReference) of a markdown link; None for in-page anchors."""
    if href.startswith("#"):
        return None
    if href.startswith(("http://", "https://")):
        parts = urlsplit(href)
        in_app = f"{parts.scheme}://{parts.netloc}" == base and parts.path.startswith("/app/")
        return ("in-app" if in_app else "ok"), {"kind": "url", "url": href}
    if href.startswith("/app/"):
        return "in-app", {"kind": "url", "url": base + href}
    if href.startswith(ASSETS):
        file = by_name.get(href[len(ASSETS) :])
        return ("ok", {"kind": "file", "file": file["id"]}) if file else ("broken", {"kind": "url", "url": href})
    path = href.split("#", 1)[0].strip("/").removesuffix(".md")
    page = by_path.get(path)
    return ("ok", {"kind": "page", "page": page["id"]}) if page else ("broken", {"kind": "url", "url": href})


def content_links(store: Store, holder: Holder, base: str, page_id: str | None = None) -> list[dict[str, Any]]:
    """Link records of a revision (or of one page): one per target, with every location."""
    revision = holder.revision(store)
    located = locate_all(revision["pages"])
    by_path = {loc.path: loc.page for loc in located}
    by_name = {f["name"]: f for f in revision["files"]}
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for loc in located:
        if page_id is not None and loc.page["id"] != page_id:
            continue
        for _, href in _LINK.findall(loc.page.get("markdown", "")):
            resolved = _link_target(href, by_path, by_name, base)
            if resolved is None:
                continue
            status, target = resolved
            key = (status, repr(sorted(target.items())))
            item = grouped.setdefault(
                key,
                {"object": "content-link", "status": status, "relation": "reference", "targetReference": target, "locationReferences": []},
            )
            ref = {"kind": "page", "page": loc.page["id"], "space": holder.space["id"]}
            if ref not in item["locationReferences"]:
                item["locationReferences"].append(ref)
    return list(grouped.values())


def link_stats(items: list[dict[str, Any]], change_request: bool) -> dict[str, Any]:
    broken = sum(1 for item in items if item["status"] == "broken")
    return {"total": len(items), "broken": {"total": broken, "changeRequest": broken if change_request else 0}}


def _sections(markdown: str) -> Iterator[tuple[str, str]]:
    """(heading, body) of each section of a page: the text before the first heading is ''."""
    heading, lines, in_code = "", [], False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        if line.startswith("#") and not in_code:
            if lines or heading:
                yield heading, "\n".join(lines).strip()
            heading, lines = line.lstrip("#").strip(), []
        else:
            lines.append(line)
    yield heading, "\n".join(lines).strip()


def search_revision(store: Store, holder: Holder, query: str) -> list[dict[str, Any]]:
    """Pages whose title or markdown contains the query (case-insensitive), best first."""
    needle = query.lower()
    results: list[tuple[int, dict[str, Any]]] = []
    ancestry: dict[str, list[dict[str, str]]] = {}
    for loc in locate_all(holder.revision(store)["pages"]):
        page = loc.page
        ancestors = ancestry.get(loc.parent, []) if loc.parent else []
        ancestry[page["id"]] = ancestors + [{"title": page["title"]}]
        markdown = page.get("markdown", "")
        title_hit = needle in page["title"].lower()
        if not title_hit and needle not in markdown.lower():
            continue
        page_url = holder.app_url + loc.path
        sections = []
        for heading, text in _sections(markdown):
            if needle in heading.lower() or needle in text.lower():
                anchor = revisions.slugify(heading) if heading else ""
                suffix = f"#{anchor}" if anchor else ""
                sections.append(
                    {
                        "id": f"{page['id']}{suffix}",
                        "title": heading or page["title"],
                        "path": loc.path + suffix,
                        "body": text[:400],
                        "score": 1.0,
                        "resultType": "section",
                        "urls": {"app": page_url + suffix},
                    }
                )
        score = (10 if title_hit else 0) + len(sections)
        results.append(
            (
                score,
                {
                    "object": "search-page-result",
                    "id": page["id"],
                    "title": page["title"],
                    "description": page.get("description", ""),
                    "path": loc.path,
                    "score": float(score),
                    "resultType": "page" if title_hit else "section",
                    "sections": sections,
                    "ancestors": ancestors,
                    "urls": {"app": page_url},
                },
            )
        )
    results.sort(key=lambda pair: -pair[0])
    out = [item for _, item in results]
    for rank, item in enumerate(out, start=1):
        item["rank"] = rank
    return out
