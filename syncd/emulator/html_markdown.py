"""How the emulator's website importer turns a page's HTML into markdown (its HTML path: an
importer that reads what a website shows). Pure but for the `rewrite` of links it is given;
the one conversion, shared by the importer (`syncd.emulator.website_import`) and the tests that
play an HTML-only import.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bs4 import BeautifulSoup, Tag
from markdownify import MarkdownConverter

__all__ = ["Rewrite", "convert_main", "html_page_to_markdown", "main_and_title"]

Rewrite = Callable[[str, str, bool], str]
"""(link or image source, the page's URL, is an image) -> where the markdown points."""


def html_page_to_markdown(page: str | BeautifulSoup, base: str, *, rewrite: Rewrite, keep_first_heading: bool = False) -> tuple[str, str, str | None]:
    """(title, markdown, description) of an HTML page as the importer's HTML path reads it:
    the title is `<main>`'s first `<h1>` (else `<title>`), that heading dropped from the
    content unless `keep_first_heading`; `<main>` converted by `convert_main`. Pure but for
    `rewrite`; the one conversion, shared with tests that play an HTML-only import."""
    soup = page if isinstance(page, BeautifulSoup) else BeautifulSoup(page, "html.parser")
    main, heading, title = main_and_title(soup)
    if heading is not None and not keep_first_heading:
        heading.extract()
    description = soup.find("meta", attrs={"name": "description"})
    return title, convert_main(main, base, rewrite), (description.get("content") or None) if description is not None else None


def main_and_title(soup: BeautifulSoup) -> tuple[Tag, Tag | None, str]:
    """A page's `<main>` (else its body), the first `<h1>` in it, and the page's title: that
    heading's text, else `<title>`'s."""
    main = soup.find("main") or soup.body or soup
    heading = main.find("h1")
    title = _text(heading) if heading is not None else _text(soup.title) if soup.title is not None else ""
    return main, heading, title


def convert_main(main: Tag, base: str, rewrite: Rewrite) -> str:
    """`<main>` as markdown, links and images rewritten by `rewrite` (changes `main`)."""
    for tag in main.find_all(["a", "img"]):
        attribute = "href" if tag.name == "a" else "src"
        value = tag.get(attribute)
        if value and not value.startswith("#"):
            target = rewrite(value, base, tag.name == "img")
            tag[attribute] = f"<{target}>" if re.search(r"[\s()<>]", target) else target
    for tag in main.find_all(["nav", "script", "style", "template"]):
        tag.decompose()
    markdown = _Converter(heading_style="ATX", bullets="-", code_language_callback=_code_language).convert_soup(main)
    markdown = re.sub(r"[ \t]+\n", "\n", markdown)
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip("\n")
    return markdown + "\n" if markdown else ""


class _Converter(MarkdownConverter):  # type: ignore[misc]
    """markdownify with the semantic block elements a documentation page uses read as
    blocks: a figure and its caption, an expandable section and its summary (each a
    paragraph, not run into the text around it)."""

    def convert_figure(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return str(self.convert_div(el, text, parent_tags))

    convert_details = convert_summary = convert_figure  # each a paragraph, as a figure


def _code_language(el: Tag) -> str | None:
    for tag in (el, el.find("code")):
        if isinstance(tag, Tag):
            for name in tag.get("class") or []:
                for prefix in ("language-", "lang-"):
                    if name.startswith(prefix) and len(name) > len(prefix):
                        return name[len(prefix) :]
    return None


def _text(tag: Tag | None) -> str:
    return " ".join(tag.get_text(" ").split()) if tag is not None else ""

