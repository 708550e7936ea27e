"""The content source: what syncd holds, served as a website the target service imports.

    site.py     one space's pages and files as a website (pure; the conventions)
    server.py   the HTTP server of one run: capability URLs, read-only, bounded

Which spaces a copy serves, and where their files come from, is the write side's
(`syncd/copy/served.py`): this package knows nothing of copies.
"""

from syncd.content.server import ContentSource, ContentSourceError, serve_content
from syncd.content.site import ServedFile, SitePage, SpaceSite

__all__ = ["ContentSource", "ContentSourceError", "ServedFile", "SitePage", "SpaceSite", "serve_content"]
