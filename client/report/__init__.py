"""``kgroup report``: the PySpark fleet report over kgroup telemetry.

The only part of kgroup that imports pyspark (the ``report`` extra installs
it). Importing this package does not load Spark: the job
(:mod:`kgroup.report.job`), its tables (:mod:`kgroup.report.analysis`) and
the HTML page (:mod:`kgroup.report.html`) are imported by name when used, and
the synthetic telemetry generator (:mod:`kgroup.report.synth`) needs no
Spark at all. The command line (``kgroup report``) is :mod:`kgroup.cli.report`:
the report does not import the CLI.

::

    from kgroup.report.job import build_session, run_report
    from kgroup.report.source import FileSource

    spark = build_session("local[*]")
    result = run_report(spark, FileSource(("telemetry/",)), "out/")
    assert result.double_ownership == 0
"""

from __future__ import annotations

from kgroup.errors import ConnectorJarError, ReportError, ReportInputError, SparkMissingError

__all__ = ["ConnectorJarError", "ReportError", "ReportInputError", "SparkMissingError"]
