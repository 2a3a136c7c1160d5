"""``python -m kgroup.cli``: the same as ``kgroup``."""

from __future__ import annotations

import sys

from kgroup.cli import main

sys.exit(main())
