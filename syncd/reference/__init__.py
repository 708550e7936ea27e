"""The documentation's reference pages, made from the live objects so that they cannot drift
from the code: the command line (the Typer app), the configuration (the pydantic models), the
JSON Schemas of `--json` output, the control API's routes and the daemon's metrics.

Each module holds one pure function that returns a page's markdown; `docs/hooks/reference.py`
adds the pages to the site when it is built, and `tests/test_docs_reference.py` fails when a
command, option, setting, route, metric or schema is missing from them or has no description.
Nothing else in syncd imports this package.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["PAGES"]


def _cli() -> str:
    from syncd.reference.cli import cli_reference

    return cli_reference()


def _configuration() -> str:
    from syncd.reference.settings import settings_reference

    return settings_reference()


def _json_output() -> str:
    from syncd.reference.schemas import schemas_reference

    return schemas_reference()


def _control_api() -> str:
    from syncd.reference.routes import routes_reference

    return routes_reference()


def _metrics() -> str:
    from syncd.reference.metrics import metrics_reference

    return metrics_reference()


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": _cli,
    "reference/configuration.md": _configuration,
    "reference/json-output.md": _json_output,
    "reference/control-api.md": _control_api,
    "reference/metrics.md": _metrics,
}
"""Each generated page, by its place in `docs/`, and the function that writes it."""
