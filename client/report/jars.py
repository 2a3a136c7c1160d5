"""Spark's Kafka connector jars, resolved with Maven and cached, like the broker's jars.

Spark reads a Kafka topic through ``spark-sql-kafka-0-10`` of exactly the
installed Spark version. :func:`resolve_kafka_connector` runs Maven once per
version (``mvn dependency:copy-dependencies`` on the shipped ``pom.xml``) into
``<kgroup cache>/spark-kafka-<version>/jars`` and returns the jars pyspark does
not already ship (kafka-clients, commons-pool2, the connector and its token
provider): handing Spark a second, different copy of a jar it has (Scala,
SLF4J, Snappy) would put two versions on one classpath.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import TextIO

from kgroup._maven import MavenClosure, cache_root, resolve_maven_closure
from kgroup.errors import ConnectorJarError, SparkMissingError

__all__ = ["installed_spark_version", "pyspark_jars_dir", "resolve_kafka_connector"]

_log = logging.getLogger("kgroup.report")
# Spark versions whose connector Maven Central serves (checked with
# `mvn dependency:get`); named in the error for any other version.
_KNOWN_GOOD = ("4.0.0", "4.0.1", "4.1.0", "4.1.1", "4.2.0")


def installed_spark_version() -> str:
    """The version of the installed pyspark."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        raise SparkMissingError(
            "pyspark is not installed; install the report extra: pip install 'kgroup[report]'"
        ) from None


def pyspark_jars_dir() -> Path:
    """The directory of the jars pyspark ships (its classpath in local mode)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        installed_spark_version()  # raises the helpful error
        raise ConnectorJarError("pyspark is installed but cannot be located")
    return Path(spec.origin).parent / "jars"


def _pom() -> str:
    return resources.files("kgroup.report").joinpath("resources", "pom.xml").read_text("utf-8")


def resolve_kafka_connector(
    spark_version: str | None = None,
    *,
    cache_dir: Path | None = None,
    progress: TextIO | None = None,
    timeout: float = 900.0,
) -> list[Path]:
    """Return the jar files Spark needs, beyond its own, to read Kafka topics.

    Raises:
        ConnectorJarError: Maven is missing, or cannot resolve the connector of
            this Spark version (the message lists versions known to resolve).
    """
    version = spark_version or installed_spark_version()
    if not re.fullmatch(r"[A-Za-z0-9._-]+", version):
        raise ConnectorJarError(f"not a Spark version: {version!r}")
    # Resolved like the broker's jars (the same cache, lock, marker and Maven run).
    closure = MavenClosure(
        title=f"Spark {version}'s Kafka connector",
        pom=_pom(),
        properties={"spark.version": version},
        required_jar="spark-sql-kafka",
        error=ConnectorJarError,
        no_maven=(
            "Maven (`mvn`) is not on PATH; kgroup report uses it once per Spark version to "
            "fetch Spark's Kafka connector from Maven Central. Install Maven (for example "
            "`apt-get install maven`), or export the topic to JSON Lines and use --input."
        ),
        failure_hint=(
            f"The connector (org.apache.spark:spark-sql-kafka-0-10_2.13) must match pyspark's "
            f"version exactly; Maven Central serves it for {', '.join(_KNOWN_GOOD)} (not for "
            "4.2.1 or 4.3.0). Install pyspark==4.2.0 (the report extra pins it), or read JSON "
            "Lines with --input."
        ),
        strip_version=True,
    )
    jars = resolve_maven_closure(
        closure,
        (cache_dir or cache_root()) / f"spark-kafka-{version}",
        "jars",
        progress=progress or sys.stderr,
        timeout=timeout,
    )
    shipped = {p.name for p in pyspark_jars_dir().glob("*.jar")}
    selected = []
    for jar in sorted(jars.glob("*.jar")):
        artifact = jar.name.removesuffix(".jar")
        # Version-stripped names (artifactId.jar) against pyspark's artifactId-version.jar.
        if any(re.fullmatch(re.escape(artifact) + r"-\d.*\.jar", name) for name in shipped):
            continue
        selected.append(jar)
    if not any(j.name.startswith("spark-sql-kafka") for j in selected):
        raise ConnectorJarError(f"no spark-sql-kafka jar among the resolved jars in {jars}")
    return selected
