"""``python -m kgroup.report``: the same as ``kgroup report``.

The one module of the report that imports the CLI: it is an entry point, run
by ``python -m`` and imported by nothing.
"""

from __future__ import annotations

import sys

from kgroup.cli import report_main

sys.exit(report_main())
