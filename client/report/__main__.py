"""``python -m kgroup.report``: the same as ``kgroup report``."""

from __future__ import annotations

import sys

from kgroup.report.cli import main

sys.exit(main())
