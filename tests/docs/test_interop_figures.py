"""docs/interop.md's benchmark figures are those of docs/performance.md.

The benchmarks rewrite performance.md's tables; interop.md copies a few of
their figures by hand for the peers it is about. Each copied figure is looked
up here in the table it comes from, so a rerun that changes one fails until
interop.md is updated too.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
PERFORMANCE = (DOCS / "performance.md").read_text()
INTEROP = (DOCS / "interop.md").read_text()

Table = dict[str, list[str]]


def section(text: str, heading: str) -> str:
    """The text from a heading line that starts with ``heading`` to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)}.*?(?=^#+ |\Z)", text, re.M | re.S)
    assert match, f"no section {heading!r}"
    return match.group(0)


def rows(text: str) -> list[list[str]]:
    """Every Markdown table row of ``text``, as stripped cells (separator rows left out)."""
    found = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"[|:\- ]+", line):
            found.append([cell.strip() for cell in line.strip("|").split("|")])
    return found


def median(cell: str) -> str:
    """A cell's first figure: the median of ``0.87 (0.72-1.23)``."""
    return cell.split(maxsplit=1)[0]


def row(table: list[list[str]], *leading: str) -> list[str]:
    matches = [r for r in table if tuple(r[: len(leading)]) == leading]
    assert len(matches) == 1, f"{len(matches)} rows start with {leading!r}"
    return matches[0]


INTEROP_TABLE = rows(section(INTEROP, "Against the same peers"))
INTEROP_PROSE = section(INTEROP, "Against the same peers")


def interop(measure: str) -> list[str]:
    """The kgroup, librdkafka and Java cells of interop.md's row ``measure``."""
    return row(INTEROP_TABLE, measure)[1:4]


def test_throughput_figures_agree() -> None:
    defaults = rows(section(PERFORMANCE, "Defaults vs defaults"))
    equal = rows(section(PERFORMANCE, "Equal settings"))
    for size, label in (("100 B", "100 B"), ("1000 B", "1 KB")):
        measure = f"throughput at each client's defaults, {label}, records/s (kgroup sync)"
        kgroup, librdkafka, _ = interop(measure)
        assert kgroup == median(row(defaults, size, "kgroup sync")[3])
        assert librdkafka == median(row(defaults, size, "confluent-kafka")[3])
    ratios = interop(
        "throughput at equal librdkafka settings, kgroup sync / plain loop, 100 B and 1 KB"
    )[0]
    assert ratios == ", ".join(row(equal, size, "kgroup sync")[5] for size in ("100 B", "1000 B"))


def test_rebalance_figures_agree() -> None:
    table = rows(section(PERFORMANCE, "Rebalance latency"))
    pairs = {
        "(a) 10 members: cold start to stable assignment (s)": (
            "(a) 10 members: cold start to stable assignment (s)"
        ),
        "(b) 11th member: join to consuming its partitions (s)": (
            "(b) 11th member: join to consuming its partitions (s)"
        ),
        "(c) member close: to its partitions consumed by others (s)": (
            "(c) member close: to its partitions consumed by others (s)"
        ),
        "longest gap on unmoved partitions during a join (s)": (
            "(d) longest gap on unmoved partitions during (b) (s)"
        ),
    }
    for measure, source in pairs.items():
        kgroup, java, librdkafka = (median(cell) for cell in row(table, source)[1:4])
        assert interop(measure) == [kgroup, librdkafka, java], measure


def test_footprint_figures_agree() -> None:
    # The first table (five columns); the per-thread split follows it.
    table = [r for r in rows(section(PERFORMANCE, "Footprint")) if len(r) == 5]
    rss = [median(row(table, client)[2]) for client in ("kgroup", "librdkafka", "java")]
    cpu = [row(table, client)[4] for client in ("kgroup", "librdkafka", "java")]
    assert interop("idle member: RSS (MiB)") == rss
    assert interop("idle member: CPU (% of one core)") == cpu


def test_prose_ratios_agree() -> None:
    rebalance = section(PERFORMANCE, "Rebalance latency")
    match = re.search(
        r"kgroup / librdkafka median: a ([\d.]+)x, b ([\d.]+)x, c ([\d.]+)x", rebalance
    )
    assert match
    ratios = sorted(float(x) for x in match.groups())
    prose = " ".join(INTEROP_PROSE.split())
    assert f"takes {ratios[0]:.2f}-{ratios[-1]:.2f}x librdkafka's own member's time" in prose
    footprint = section(PERFORMANCE, "Footprint")
    match = re.search(r"kgroup / librdkafka: RSS ([\d.]+)x, CPU ([\d.]+)x", footprint)
    assert match
    rss, cpu = match.groups()
    assert f"{cpu}x less CPU and {rss}x less memory" in " ".join(INTEROP_PROSE.split())
    equal = rows(section(PERFORMANCE, "Equal settings"))
    one_kb = row(equal, "1000 B", "kgroup sync")[5]
    assert f"1 KB records at {one_kb} the plain loop's rate" in " ".join(INTEROP_PROSE.split())
