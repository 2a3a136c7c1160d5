"""The JVM side of a broker process: a Java runtime and the Kafka jars, cached per version.

The jars come from Maven Central through the ``pom.xml`` shipped in
``kgroup/testing/resources``, resolved by :mod:`kgroup._maven` into
``<cache>/kafka-<version>/libs``. A marker file is written only after a
complete copy, so an interrupted resolution is never used.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TextIO

from kgroup._maven import MavenClosure, cache_root, pom_digest_of, resolve_maven_closure
from kgroup.errors import JarResolutionError, JavaNotFoundError

# cache_root is re-exported: kgroup.testing offers it to users (the cache the
# harness fills); its home is kgroup._maven.
__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "JavaRuntime",
    "cache_root",
    "find_java",
    "kafka_version",
    "pom_digest",
    "read_resource",
    "resolve_kafka_libs",
]

_log = logging.getLogger("kgroup.testing.jvm")

DEFAULT_KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the harness runs unless told otherwise."""

_MIN_JAVA = 17
_INSTALL_JAVA = (
    "Install a Java runtime 17 or newer (for example `apt-get install openjdk-17-jre-headless`) "
    "and put `java` on PATH, or point JAVA_HOME at it."
)


def kafka_version(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Return ``explicit``, else ``$KGROUP_KAFKA_VERSION``, else :data:`DEFAULT_KAFKA_VERSION`."""
    if explicit:
        return explicit
    env = os.environ if environ is None else environ
    return env.get("KGROUP_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def read_resource(name: str) -> str:
    """Return the text of a file shipped in ``kgroup/testing/resources``."""
    return resources.files("kgroup.testing").joinpath("resources", name).read_text("utf-8")


@dataclass(frozen=True)
class JavaRuntime:
    """A usable ``java`` executable and its major version."""

    executable: Path
    major_version: int


def _java_major(executable: Path) -> int:
    try:
        out = subprocess.run(
            [str(executable), "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"{executable} does not run ({exc}). {_INSTALL_JAVA}") from exc
    # `java -version` prints to stderr: openjdk version "17.0.15" / "1.8.0_392".
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if out.returncode != 0 or match is None:
        raise JavaNotFoundError(
            f"{executable} -version failed: {(out.stderr or out.stdout).strip()[-500:]}. "
            f"{_INSTALL_JAVA}"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


_java_cache: dict[Path, JavaRuntime] = {}


def find_java(environ: Mapping[str, str] | None = None) -> JavaRuntime:
    """Find a Java runtime of version 17 or newer.

    ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set (a ``JAVA_HOME`` without
    it is an error rather than silently ignored), else ``java`` on ``PATH``.

    Raises:
        JavaNotFoundError: no java, or one older than 17; the message says what to install.
    """
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            raise JavaNotFoundError(
                f"JAVA_HOME is set to {java_home!r} but {candidate} is not an executable. "
                f"Fix or unset JAVA_HOME. {_INSTALL_JAVA}"
            )
        executable = candidate
    else:
        found = shutil.which("java", path=env.get("PATH", os.defpath))
        if found is None:
            raise JavaNotFoundError(
                f"No `java` on PATH and JAVA_HOME is not set; the Kafka broker needs one. "
                f"{_INSTALL_JAVA}"
            )
        executable = Path(found)
    cached = _java_cache.get(executable)
    if cached is not None:
        return cached
    major = _java_major(executable)
    if major < _MIN_JAVA:
        raise JavaNotFoundError(
            f"{executable} is Java {major}; Kafka 4 needs Java {_MIN_JAVA} or newer. "
            f"{_INSTALL_JAVA}"
        )
    runtime = JavaRuntime(executable=executable, major_version=major)
    _java_cache[executable] = runtime
    return runtime


def pom_digest() -> str:
    """A digest of the shipped ``pom.xml``, as a complete cache's marker file records it.

    A cache whose marker holds another digest was resolved from another pom and
    is resolved again.
    """
    return pom_digest_of(read_resource("pom.xml"))


def resolve_kafka_libs(
    version: str | None = None,
    *,
    cache_dir: Path | None = None,
    progress: TextIO | None = None,
    timeout: float = 1800.0,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Return a directory holding every jar the Kafka broker ``version`` needs.

    The first call for a version runs Maven (``mvn`` on ``PATH``) and shows
    one progress line on ``progress`` (standard error by default): ``kgroup:
    fetching Apache Kafka 4.4.0 jars from Maven Central ... done in 9.8 s (44
    jars)``. Maven's own output goes to ``kafka-<version>/maven.log`` in the
    cache; only if Maven fails is its tail shown on ``progress`` (and its
    ``[ERROR]`` lines put in the exception). Later calls return
    the cached directory at once. The cache lives under ``cache_dir`` (default
    :func:`cache_root`) in ``kafka-<version>/libs`` and counts as complete only
    once its marker file exists; a change of the shipped ``pom.xml``
    invalidates it.

    Raises:
        JarResolutionError: Maven is missing, failed (the message carries the
            tail of its output) or did not finish within ``timeout`` seconds.
    """
    ver = kafka_version(version, environ)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", ver):
        raise JarResolutionError(f"not a Kafka version: {ver!r}")
    closure = MavenClosure(
        title=f"Apache Kafka {ver} jars",
        pom=read_resource("pom.xml"),
        properties={"kafka.version": ver},
        required_jar="kafka_2.13-",
        error=JarResolutionError,
        no_maven=(
            "Maven (`mvn`) is not on PATH; kgroup.testing uses it once per Kafka version to "
            "fetch the broker jars from Maven Central. Install Maven (for example "
            "`apt-get install maven`) or use KGROUP_BROKER_BACKEND=external with "
            "KAFKA_BOOTSTRAP_SERVERS."
        ),
        failure_hint=f"Is {ver} a released Kafka version, and is Maven Central reachable?",
    )
    root = (cache_dir if cache_dir is not None else cache_root(environ)) / f"kafka-{ver}"
    return resolve_maven_closure(
        closure,
        root,
        "libs",
        progress=progress if progress is not None else sys.stderr,
        timeout=timeout,
        environ=environ,
    )
