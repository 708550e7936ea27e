"""Property tests (Hypothesis `@given`) run with coverage's line tracer off in their thread.

Why: the test command runs the suite under `coverage run` (docs/development/coverage.md). On Python
3.11 a line tracer slows every line the interpreter runs, measured or not, and a property test
is hundreds of examples of the same code: under the tracer those tests took about twice as long
(about 20 s more of the suite's wall), for lines the example-based tests already run. So the
body of a property test runs untraced; its fixtures, every other test and every child process
are measured as usual.

Only coverage's own tracer is set aside (a debugger's is left alone), only in the test's own
thread (threads started meanwhile are traced as usual), and it is put back when the test ends,
however it ends.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def is_property_test(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


@contextmanager
def coverage_tracer_off() -> Iterator[None]:
    """Remove coverage's tracer from this thread for the block, if it is the one installed."""
    tracer = sys.gettrace()
    if tracer is None or not type(tracer).__module__.startswith("coverage"):
        yield
        return
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(tracer)  # coverage's CTracer puts itself back as a C-level tracer on its first event
