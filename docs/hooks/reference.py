"""MkDocs hook: the reference pages made from the code (`syncd.reference`) when the site is
built, so that what they say is what the code does. They are in no file of `docs/`: each is
added to the site's files here, before the navigation is built from them."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from syncd.reference import PAGES


def on_files(files: Files, config: Any) -> Files:
    """Add each generated page (`mkdocs.yml`'s nav names them) to the site's files."""
    for src_uri, write in PAGES.items():
        if files.get_file_from_path(src_uri) is not None:
            raise ValueError(f"docs/{src_uri} is generated from the code at build time: delete the file")
        files.append(File.generated(config, src_uri, content=write()))
    return files
