"""The web page of the daemon (`/ui/`): server-rendered HTML over the views the JSON API serves.

Why server-rendered: no Node toolchain at install time, pages that work without JavaScript (a
little script only refreshes the live parts), and one place that escapes what the organizations
and files say (Jinja2's autoescape) before a browser sees it.
"""
