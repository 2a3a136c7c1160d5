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

import collections
import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from importlib import metadata, resources
from pathlib import Path
from typing import TextIO

from kgroup.report.errors import ConnectorJarError

__all__ = ["installed_spark_version", "pyspark_jars_dir", "resolve_kafka_connector"]

_log = logging.getLogger("kgroup.report")
_MARKER = "complete"
_TAIL = 40
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Spark versions whose connector Maven Central serves (checked with
# `mvn dependency:get`); named in the error for any other version.
_KNOWN_GOOD = ("4.0.0", "4.0.1", "4.1.0", "4.1.1", "4.2.0")


def installed_spark_version() -> str:
    """The version of the installed pyspark."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        from kgroup.report.errors import SparkMissingError  # noqa: PLC0415

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


def _cache_root() -> Path:
    # The same cache as kgroup.testing's broker jars.
    from kgroup.testing import cache_root  # noqa: PLC0415

    return cache_root()


def _pom() -> str:
    return resources.files("kgroup.report").joinpath("resources", "pom.xml").read_text("utf-8")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    # Two reports (or test sessions) resolving at once must not interleave copies.
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
    root = (cache_dir or _cache_root()) / f"spark-kafka-{version}"
    jars = root / "jars"
    marker = root / _MARKER
    digest = hashlib.sha256(_pom().encode()).hexdigest()[:16]
    if not _complete(marker, digest):
        with _locked(root / ".lock"):
            if not _complete(marker, digest):
                marker.unlink(missing_ok=True)
                _run_maven(version, root, jars, progress or sys.stderr, timeout)
                marker.write_text(digest + "\n", encoding="utf-8")
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


def _complete(marker: Path, digest: str) -> bool:
    try:
        return marker.read_text(encoding="utf-8").strip() == digest
    except OSError:
        return False


def _run_maven(version: str, root: Path, jars: Path, progress: TextIO, timeout: float) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorJarError(
            "Maven (`mvn`) is not on PATH; kgroup report uses it once per Spark version to "
            "fetch Spark's Kafka connector from Maven Central. Install Maven (for example "
            "`apt-get install maven`), or export the topic to JSON Lines and use --input."
        )
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="resolve-", dir=root) as tmp:
        project = Path(tmp)
        (project / "pom.xml").write_text(_pom(), encoding="utf-8")
        staging = project / "jars"
        cmd = [
            mvn,
            "-B",
            "-Dstyle.color=never",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            "-Dmdep.stripVersion=true",
            f"-DoutputDirectory={staging}",
            f"-Dspark.version={version}",
        ]
        progress.write(
            f"kgroup: fetching Spark {version}'s Kafka connector with Maven (first use)\n"
        )
        progress.flush()
        tail: collections.deque[str] = collections.deque(maxlen=_TAIL)
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=project,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env=dict(os.environ),
            )
        except OSError as exc:
            raise ConnectorJarError(f"could not run {mvn}: {exc}") from exc
        assert proc.stdout is not None
        expired = threading.Event()

        def _expire() -> None:
            expired.set()
            proc.kill()

        watchdog = threading.Timer(timeout, _expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            with proc:
                for raw in proc.stdout:
                    line = _ANSI.sub("", raw)
                    tail.append(line.rstrip("\n"))
                    progress.write(line)
                code = proc.wait()
        finally:
            watchdog.cancel()
        if expired.is_set():
            raise ConnectorJarError(
                f"Maven did not resolve the connector within {timeout:.0f} s:\n" + "\n".join(tail)
            )
        if code != 0:
            errors = [line for line in tail if "[ERROR]" in line]
            raise ConnectorJarError(
                f"Maven could not resolve org.apache.spark:spark-sql-kafka-0-10_2.13:{version} "
                f"(exit {code}). The connector must match pyspark's version exactly; Maven "
                f"Central serves it for {', '.join(_KNOWN_GOOD)} (not for 4.2.1 or 4.3.0). "
                "Install pyspark==4.2.0 (the report extra pins it), or read JSON Lines with "
                "--input.\n" + "\n".join(errors or list(tail))
            )
        if jars.exists():
            shutil.rmtree(jars)
        staging.rename(jars)
    _log.info("resolved Spark %s's Kafka connector into %s", version, jars)
