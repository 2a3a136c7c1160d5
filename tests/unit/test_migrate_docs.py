"""docs/migration.md explains every finding the checker can report."""

from __future__ import annotations

import re
from pathlib import Path

from kgroup.admin import migration

ROOT = Path(__file__).resolve().parents[2]


def _codes_in_source() -> dict[str, str]:
    source = Path(migration.__file__).read_text()
    found = re.findall(r'Severity\.(BLOCKER|WARNING|INFO),\s*"([a-z0-9-]+)"', source)
    return {code: severity.lower() for severity, code in found}


def test_every_finding_code_is_in_the_migration_docs_with_its_severity() -> None:
    codes = _codes_in_source()
    assert len(codes) > 20  # the pattern still finds the findings
    docs = (ROOT / "docs" / "migration.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (blocker|warning|info) \|", docs, re.M))
    missing = sorted(set(codes) - set(rows))
    assert not missing, f"add these findings to the table in docs/migration.md: {missing}"
    wrong = {c: (rows[c], s) for c, s in codes.items() if rows[c] != s}
    assert not wrong, f"docs/migration.md gives the wrong severity (docs, code): {wrong}"
    stale = sorted(set(rows) - set(codes))
    assert not stale, f"docs/migration.md lists findings the checker no longer has: {stale}"
