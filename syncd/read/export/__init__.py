"""Export a mirror or backup file to a readable directory: each space in GitBook's Git Sync
layout (markdown pages, `SUMMARY.md`, `.gitbook.yaml`, `.gitbook/assets/`), JSON for the rest.

Layout (every directory name is a slug: lower-case ascii letters, digits and `-`; siblings
that would share a slug get `-2`, `-3`, ... in position order, then id order)::

    OUT/.syncd-export                  marker: this directory belongs to `syncd export`
    OUT/<org>/organization.json        the organization's settings
              members.json             members, each with its spaces and teams
              teams.json  saml.json  sso.json  translations.json  custom-fields.json
              integrations.json        integrations, each with its installations
              openapi/<slug>.json      an OpenAPI spec; `<slug>.source.yaml|json` its text
              sites/<site>/site.json   the site; `structure.json` its section groups,
                                       sections and site-spaces in order, each site-space
                                       naming its space's export path (relative to <org>);
                                       the raw `sections.json`, `section-groups.json`,
                                       `site-spaces.json`, `adaptive-schema.json`, `published.json`
              other/<kind>.json        rows of kinds this exporter does not know (none today)
              <collection>/collection.json
              <collection>/<sub-collection>/.../<space>/   a space (or <org>/<space>/)
    <space>/.gitbook.yaml              `root: ./`, `structure:` readme README.md, summary SUMMARY.md
            README.md                  the space's first page
            SUMMARY.md                 `# Table of contents`, then `* [Title](path.md)` nested in
                                       page order; the first page links README.md
            <page>.md                  a page without children
            <page>/README.md           a page with children, which live in <page>/ (the first
                                       page's children live in <page>/ too, beside no README)
            .gitbook/assets/<name>     the space's files' binaries, from the backup's blob folder
                                       (FILE.blobs/), under their names made safe and unique
            space.json  revision.json  custom-fields.json (name -> value)
            pages.json                 every page's file and its other fields, in document order
            files.json  comments.json (each with its replies)  links.json
            change-requests/<number>-<subject>/   change-request.json and the same content
                                       files as a space (.gitbook.yaml, README.md, SUMMARY.md,
                                       pages, .gitbook/assets/, files.json, ...)

A page file is front matter then the page's markdown::

    ---
    id: "<page id>"
    title: "<title>"
    description: "<only when set>"
    emoji: "<only when set>"
    hidden: true                       only when the page is hidden
    ---
    <markdown>

Every front-matter value is a JSON scalar, which is also a YAML scalar (strings are
double-quoted with JSON escapes, and characters YAML does not allow raw are escaped too).

The markdown is the stored markdown with the destinations of its inline links and images
rewritten, nothing else: a link to a page of the same space (by its path from the space's
root, `getting-started/install#anchor`) becomes the relative path of that page's file
(`../getting-started/install.md#anchor`), and a file (`.gitbook/assets/<name>`) the
relative path of its binary under `.gitbook/assets/`, written or not (a backup made without
`--with-files` has none: the report lists what is missing). Links that match neither (another
site, a page that is gone) and anything inside code are left as they are.

Why it is deterministic: JSON is written with sorted keys, 2-space indent and a final
newline; lists follow positions, then ids; nothing about the export itself (time, paths)
is written. Re-exporting writes only files whose bytes changed and removes the files that
are no longer part of the export, so the tree equals a fresh export byte for byte.

The source file is opened read-only (`StateStore(readonly=True)`): an old backup is read as it
is, never migrated, and a backup on read-only media can be exported.

Why it is safe: every path component is a slug, a fixed name or a file name reduced to
`[A-Za-z0-9._-]` (not starting with a dot), checked before use, so no title can reach outside OUT; symlinks met inside OUT are replaced, never followed; a
non-empty directory without the marker is refused rather than cleaned. An export that would
remove all the files a previous export left in OUT, or more than `MAX_REMOVED_RATIO` of them
(a backup that holds no organization, one made by a token that lost access, one organization
exported over all of them), is refused before anything is written unless `force`: a dry run
of the export (`_Plan`) counts what it would remove.

Modules: `writer` (`export_mirror`: the source file read, organization by organization,
into the tree; spaces, change requests and pages), `sites` (an organization's sites and their
`structure.json`), `layout` (where things go: names, front matter and JSON text, the tree that
writes and prunes, the target folder's checks) and `links` (link rewriting, asset names).
"""

from syncd.read.export.layout import ASSETS, MARKER, ExportError, front_matter, json_text, slugify, yaml_scalar
from syncd.read.export.links import asset_name, rewrite_links, rewritten_lines
from syncd.read.export.writer import HANDLED_KINDS, HELD_TEXT_MAX, ExportReport, export_mirror

__all__ = [
    "ASSETS",
    "HANDLED_KINDS",
    "HELD_TEXT_MAX",
    "MARKER",
    "ExportError",
    "ExportReport",
    "asset_name",
    "export_mirror",
    "front_matter",
    "json_text",
    "rewrite_links",
    "rewritten_lines",
    "slugify",
    "yaml_scalar",
]
