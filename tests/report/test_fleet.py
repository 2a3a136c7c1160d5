"""The whole report over synthetic fleet telemetry.

An injected fault is found, a clean run is clean, and the HTML page opens in a
headless browser with its plots drawn.
"""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from matplotlib import image as mpimg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kgroup.cli import report_main as main
from kgroup.cli.report import EXIT_DOUBLE_OWNERSHIP
from kgroup.report import analysis
from kgroup.report.job import TABLES
from kgroup.report.source import FileSource, parse, read_lines
from kgroup.report.synth import SynthResult


def events_of(spark: SparkSession, telemetry: Path) -> tuple[int, DataFrame]:
    parsed = parse(read_lines(spark, FileSource((str(telemetry),))))
    return parsed.filter(~F.col("valid")).count(), parsed.filter("valid").drop("valid")


@dataclass(frozen=True)
class Run:
    code: int
    out: Path

    def table(self, spark: SparkSession, name: str) -> DataFrame:
        return spark.read.parquet(str(self.out / "tables" / name))

    @property
    def html(self) -> Path:
        return self.out / "report.html"


@pytest.fixture(scope="module")
def injected_run(
    spark: SparkSession,
    injected_fleet: tuple[Path, SynthResult],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    """``kgroup report`` over the injected fleet, as a user runs it (in-process, on the
    tests' session, which the command must leave running)."""
    telemetry, _ = injected_fleet
    out = tmp_path_factory.mktemp("report")
    code = main(["--input", str(telemetry), "--out", str(out), "--fail-on-double-ownership"])
    return Run(code, out)


def test_injected_double_ownership_is_flagged_with_partition_members_and_interval(
    spark: SparkSession, injected_fleet: tuple[Path, SynthResult], injected_run: Run
) -> None:
    _, synth = injected_fleet
    assert synth.injected, "the generator injected nothing"
    found = injected_run.table(spark, "double_ownership").collect()
    flagged = sorted(
        (
            r["topic"],
            r["partition"],
            frozenset((r["member_a"], r["member_b"])),
            r["start"],
            r["end"],
        )
        for r in found
    )
    truth = sorted(
        (o.topic, o.partition, frozenset((o.faulty_member, o.new_owner)), o.start, o.end)
        for o in synth.injected
    )
    assert [f[:3] for f in flagged] == [t[:3] for t in truth]
    for (*_, start, end), (*_, true_start, true_end) in zip(flagged, truth, strict=True):
        assert start == pytest.approx(true_start, abs=1e-6)
        assert end == pytest.approx(true_end, abs=1e-6)
    (summary,) = injected_run.table(spark, "summary").collect()
    assert summary["double_ownership"] == len(synth.injected)


def test_cli_exits_non_zero_on_double_ownership_and_leaves_the_session_running(
    spark: SparkSession, injected_run: Run
) -> None:
    assert injected_run.code == EXIT_DOUBLE_OWNERSHIP
    assert spark.range(1).count() == 1


def test_the_report_writes_every_table(spark: SparkSession, injected_run: Run) -> None:
    for name in TABLES:
        assert list((injected_run.out / "tables" / name).glob("**/*.parquet")), name
    (summary,) = injected_run.table(spark, "summary").collect()
    assert summary["partitions"] == 24
    assert summary["rebalances"] > 0
    assert summary["unowned_gaps"] > 0
    assert summary["fencings"] > 0


def test_a_clean_fleet_has_no_double_ownership(
    spark: SparkSession, clean_fleet: tuple[Path, SynthResult]
) -> None:
    telemetry, synth = clean_fleet
    assert synth.injected == ()
    assert synth.churn, "no churn: the check would be vacuous"
    malformed, events = events_of(spark, telemetry)
    assert malformed == 0
    intervals = analysis.ownership(events)
    assert intervals.select("topic", "partition").distinct().count() == 24
    # Partitions did change hands, and nobody overlapped.
    assert analysis.handovers(intervals).count() > 0
    assert analysis.double_ownership(intervals).count() == 0


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def test_html_plots_are_non_empty_images(injected_run: Run) -> None:
    page = injected_run.html.read_text()
    assert "DOUBLE OWNERSHIP" in page
    pngs = embedded_pngs(page)
    # Per group: ownership heatmap, Gantt, membership, two histograms.
    assert len(pngs) == 5
    for png in pngs:
        pixels = mpimg.imread(io.BytesIO(png), format="png")
        height, width = pixels.shape[:2]
        assert height > 100
        assert width > 300
        assert pixels.std() > 0.05, "a blank image"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install chromium")
def test_html_opens_in_headless_chromium_with_every_plot_rendered(
    injected_run: Run, tmp_path: Path
) -> None:
    assert CHROMIUM is not None
    # After load, a script writes each image's decoded size into the title,
    # which --dump-dom prints: the browser itself says whether it drew them.
    probe = tmp_path / "probe.html"
    probe.write_text(
        injected_run.html.read_text().replace(
            "</body>",
            "<script>window.addEventListener('load', () => { document.title = 'sizes:' + "
            "[...document.images].map(i => i.complete ? i.naturalWidth + 'x' + i.naturalHeight"
            " : 'pending').join(','); });</script></body>",
        )
    )
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run(
        [*browser, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    title = re.search(r"<title>sizes:([^<]*)</title>", dom)
    assert title is not None, dom[:500]
    sizes = [tuple(int(n) for n in s.split("x")) for s in title.group(1).split(",")]
    assert len(sizes) == 5
    assert all(w > 300 and h > 100 for w, h in sizes), sizes
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            *browser,
            f"--screenshot={shot}",
            "--window-size=1300,2400",
            injected_run.html.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = mpimg.imread(str(shot))
    assert pixels.std() > 0.05, "the browser drew an empty page"
