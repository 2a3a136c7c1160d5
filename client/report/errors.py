"""Errors of ``kgroup report``; all derive from :class:`kgroup.errors.KgroupError`.

This module imports nothing from Spark, so the CLI can name these errors
without loading pyspark.
"""

from __future__ import annotations

from kgroup.errors import KgroupError

__all__ = ["ConnectorJarError", "ReportError", "ReportInputError", "SparkMissingError"]


class ReportError(KgroupError):
    """The report could not be produced; the message says why and what to do."""


class SparkMissingError(ReportError):
    """pyspark (or matplotlib) is not installed: install the ``report`` extra."""


class ReportInputError(ReportError):
    """The input is unusable: no files, no events, an unreadable topic."""


class ConnectorJarError(ReportError):
    """Spark's Kafka connector jars could not be resolved for the installed pyspark."""
