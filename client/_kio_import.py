"""Imported first by :mod:`kgroup`: kio's phantom types, without Hypothesis where it is
not wanted (see :func:`import_kio_without_hypothesis`)."""

from __future__ import annotations

import sys

__all__ = ["import_kio_without_hypothesis"]


def import_kio_without_hypothesis() -> None:
    """Import kio's phantom types with Hypothesis hidden, unless a test run wants it.

    kio's phantom types (every wire integer and string type) import Hypothesis
    when it is installed, only to register strategies for property tests; and
    Hypothesis imports pytest, trio, attrs and Pygments. In an environment that
    has Hypothesis (any project that tests with it), a consumer then carried
    twice the Python objects (66,000 against 33,000), so the garbage
    collector's full passes took five times as long, and several MiB more
    memory. Hidden only while kio's module loads, and only if neither
    Hypothesis nor pytest is already imported (a test run may build kio values
    with ``st.from_type``); a later ``import hypothesis`` works as usual.
    """
    if any(name in sys.modules for name in ("hypothesis", "pytest", "kio.static._phantom")):
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import fails: ImportError
    try:
        import kio.static.primitive  # noqa: F401, PLC0415
    except ImportError:
        pass  # a kio without this module: nothing to hide it from
    finally:
        # Typed ModuleType, but None here unless the import above put a module there.
        entry: object = sys.modules.get("hypothesis", sys)
        if entry is None:
            del sys.modules["hypothesis"]


import_kio_without_hypothesis()
