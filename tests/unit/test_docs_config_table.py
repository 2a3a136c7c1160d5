"""docs/configuration.md's table is every key kgroup owns or changes, once.

The registry (kgroup.config_keys), the security keys (kgroup.config_security),
the telemetry keys (kgroup.telemetry.config) and the librdkafka defaults the
data plane changes
(kgroup.dataplane.librdkafka.DATAPLANE_DEFAULTS) together are what kgroup
implements; every other key is librdkafka's, which the page links. Each
registry key's default cell is test_config_keys.py's check; here: the rows
are exactly those keys, the changed defaults show kgroup's values, and no
other page carries a second copy of the table.
"""

from __future__ import annotations

import re
from pathlib import Path

from kgroup import config_keys
from kgroup.config_security import SECURITY_KEYS
from kgroup.dataplane.librdkafka import DATAPLANE_DEFAULTS
from kgroup.telemetry import config as telemetry_config

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "configuration.md"
LIBRDKAFKA = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"

_ROW = re.compile(r"^\| (?P<keys>`[^|]+) \| (?P<default>[^|]+) \| (?P<meaning>.*?) ?\|$")


def table() -> list[tuple[list[str], str, str]]:
    """The page's table: (the keys a row names, its default cell, its meaning cell)."""
    text = PAGE.read_text()
    start = text.index("| key | default | meaning |")
    rows = []
    for line in text[start:].split("\n\n", 1)[0].splitlines()[2:]:
        match = _ROW.match(line)
        assert match is not None, f"not a row of the table: {line!r}"
        # "`sasl.mechanism` (alias `sasl.mechanisms`)", "`a` / `b`": each key by its full name.
        names = re.findall(r"`([^`]+)`", match.group("keys"))
        rows.append((names, match.group("default").strip(), match.group("meaning").strip()))
    return rows


def test_the_table_names_every_key_kgroup_owns_or_changes_and_nothing_else() -> None:
    named = [name for names, _, _ in table() for name in names]
    assert len(named) == len(set(named)), "a key has two rows"
    # The telemetry keys kgroup checks by name (its producer's pass-through
    # telemetry.kafka.* has one row, named by its prefix).
    telemetry = set(telemetry_config._KEYS) | {"telemetry.kafka.<producer key>"}
    expected = (
        {k.name for k in config_keys.KEYS} | SECURITY_KEYS | set(DATAPLANE_DEFAULTS) | telemetry
    )
    assert set(named) == expected, (
        f"rows missing: {sorted(expected - set(named))}; "
        f"rows for keys kgroup does not implement: {sorted(set(named) - expected)}"
    )


def test_changed_librdkafka_defaults_show_kgroups_value() -> None:
    defaults = {names[0]: default for names, default, _ in table()}
    for name, value in DATAPLANE_DEFAULTS.items():
        assert defaults[name] == value, (
            f"{name}: the page shows {defaults[name]}, kgroup sets {value}"
        )


def test_every_row_says_what_the_key_does() -> None:
    for names, default, meaning in table():
        assert default, f"{names}: no default"
        assert meaning, f"{names}: the meaning cell is empty"


def test_the_page_sends_the_other_keys_to_librdkafka() -> None:
    assert LIBRDKAFKA in PAGE.read_text()


def test_no_other_page_keeps_a_copy_of_the_table() -> None:
    ours = {k.name for k in config_keys.KEYS}
    for page in sorted(DOCS.rglob("*.md")):
        if page == PAGE:
            continue
        copies = [m for m in re.findall(r"^\| `([^`]+)` \|", page.read_text(), re.M) if m in ours]
        assert len(copies) < 3, f"{page.relative_to(DOCS)} has rows for {copies}: link {PAGE.name}"
