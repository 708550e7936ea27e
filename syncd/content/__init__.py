"""The content source: what syncd holds, served as a website the target service imports.

    site.py     one space's pages and files as a website (pure; the conventions)
    server.py   the HTTP server: one per process and address, shared by the runs that
                serve content (each its own capability URLs); read-only, bounded

Which spaces a copy serves, and where their files come from, is the write side's
(`syncd/copy/served.py`): this package knows nothing of copies.
"""

from syncd.content.server import ContentServer, ContentSource, ContentSourceError, serve_content
from syncd.content.site import ServedFile, SitePage, SpaceSite

__all__ = ["ContentServer", "ContentSource", "ContentSourceError", "ServedFile", "SitePage", "SpaceSite", "serve_content"]
