"""The JVM side of a broker process: a Java runtime and the Kafka jars, cached per version.

The jars come from Maven Central through the ``pom.xml`` shipped in
``kgroup/testing/resources``; ``mvn dependency:copy-dependencies`` copies the
runtime closure into ``<cache>/kafka-<version>/libs``. A marker file is written
only after a complete copy, so an interrupted resolution is never used.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TextIO

from kgroup.errors import JarResolutionError, JavaNotFoundError

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
_MARKER = "complete"
_MAVEN_TAIL_LINES = 40
# Maven's console library emits colour resets even in batch mode.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
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


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """Return the user cache directory of kgroup (not created).

    ``$KGROUP_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/kgroup``, else
    ``~/.cache/kgroup``.
    """
    env = os.environ if environ is None else environ
    if env.get("KGROUP_CACHE_DIR"):
        return Path(env["KGROUP_CACHE_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "kgroup"
    return Path.home() / ".cache" / "kgroup"


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
    return hashlib.sha256(read_resource("pom.xml").encode("utf-8")).hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    # Two test sessions (or the CLI and a test run) resolving the same version at
    # once must not interleave their copies.
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def resolve_kafka_libs(
    version: str | None = None,
    *,
    cache_dir: Path | None = None,
    progress: TextIO | None = None,
    timeout: float = 1800.0,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Return a directory holding every jar the Kafka broker ``version`` needs.

    The first call for a version runs Maven (``mvn`` on ``PATH``) and streams
    its output to ``progress`` (standard error by default); later calls return
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
    root = (cache_dir if cache_dir is not None else cache_root(environ)) / f"kafka-{ver}"
    libs = root / "libs"
    marker = root / _MARKER
    digest = pom_digest()
    if _is_complete(marker, digest):
        return libs
    with _locked(root / ".lock"):
        # Another process may have finished while this one waited for the lock.
        if _is_complete(marker, digest):
            return libs
        marker.unlink(missing_ok=True)
        _run_maven(
            version=ver,
            root=root,
            libs=libs,
            progress=progress if progress is not None else sys.stderr,
            timeout=timeout,
            environ=environ,
        )
        marker.write_text(digest + "\n", encoding="utf-8")
    return libs


def _is_complete(marker: Path, digest: str) -> bool:
    try:
        return marker.read_text(encoding="utf-8").strip() == digest
    except OSError:
        return False


def _run_maven(
    *,
    version: str,
    root: Path,
    libs: Path,
    progress: TextIO,
    timeout: float,
    environ: Mapping[str, str] | None,
) -> None:
    env = dict(os.environ if environ is None else environ)
    mvn = shutil.which("mvn", path=env.get("PATH", os.defpath))
    if mvn is None:
        raise JarResolutionError(
            "Maven (`mvn`) is not on PATH; kgroup.testing uses it once per Kafka version to "
            "fetch the broker jars from Maven Central. Install Maven (for example "
            "`apt-get install maven`) or use KGROUP_BROKER_BACKEND=external with "
            "KAFKA_BOOTSTRAP_SERVERS."
        )
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="resolve-", dir=root) as tmp:
        project = Path(tmp)
        (project / "pom.xml").write_text(read_resource("pom.xml"), encoding="utf-8")
        staging = project / "libs"
        cmd = [
            mvn,
            "-B",
            # Batch mode still colours its output; the progress goes to logs and pipes.
            "-Dstyle.color=never",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
            f"-Dkafka.version={version}",
        ]
        _log.info("resolving Kafka %s jars with Maven: %s", version, " ".join(cmd))
        progress.write(f"kgroup: fetching Apache Kafka {version} jars with Maven (first use)\n")
        progress.flush()
        tail: collections.deque[str] = collections.deque(maxlen=_MAVEN_TAIL_LINES)
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=project,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise JarResolutionError(f"could not run {mvn}: {exc}") from exc
        assert proc.stdout is not None
        timed_out = threading.Event()

        def _expire() -> None:
            # Maven can hang silently (a stuck download); reading its output
            # alone would then never return.
            timed_out.set()
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
                    progress.flush()
                code = proc.wait()
        finally:
            watchdog.cancel()
        if timed_out.is_set():
            raise JarResolutionError(
                f"Maven did not resolve Kafka {version} within {timeout:.0f} s. Last output:\n"
                + "\n".join(tail)
            )
        if code != 0:
            errors = [line for line in tail if "[ERROR]" in line]
            raise JarResolutionError(
                f"Maven failed (exit {code}) to resolve Apache Kafka {version} jars. "
                f"Is {version} a released Kafka version, and is Maven Central reachable?\n"
                + "\n".join(errors or list(tail))
            )
        jars = sorted(staging.glob("*.jar")) if staging.is_dir() else []
        if not any(j.name.startswith("kafka_2.13-") for j in jars):
            raise JarResolutionError(
                f"Maven succeeded but copied no kafka_2.13 jar into {staging}. Last output:\n"
                + "\n".join(tail)
            )
        if libs.exists():
            shutil.rmtree(libs)
        staging.rename(libs)
    _log.info(
        "resolved %d jars for Kafka %s in %.1f s into %s",
        len(jars),
        version,
        time.monotonic() - started,
        libs,
    )
