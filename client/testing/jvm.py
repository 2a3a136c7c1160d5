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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TextIO

from kgroup.errors import JarResolutionError, JavaNotFoundError, KgroupError

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "JavaRuntime",
    "MavenClosure",
    "cache_root",
    "find_java",
    "kafka_version",
    "pom_digest",
    "read_resource",
    "resolve_kafka_libs",
    "resolve_maven_closure",
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
    return _digest(read_resource("pom.xml"))


def _digest(pom: str) -> str:
    return hashlib.sha256(pom.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class MavenClosure:
    """A pom's runtime dependency closure, for :func:`resolve_maven_closure` to copy.

    The broker's jars are one (:func:`resolve_kafka_libs`); the fleet report's
    Spark Kafka connector (``kgroup.report.jars``) another.
    """

    title: str
    """What is fetched, for the progress line and errors: ``Apache Kafka 4.4.0 jars``."""
    pom: str
    """The ``pom.xml`` text."""
    properties: Mapping[str, str]
    """``-Dkey=value`` properties the pom uses (the version)."""
    required_jar: str
    """The name prefix of a jar that must be among the copied ones."""
    error: type[KgroupError]
    """The exception raised on any failure (constructed with a message)."""
    no_maven: str
    """The message when ``mvn`` is not on PATH: why it is needed, what to do instead."""
    failure_hint: str
    """Said after ``Maven failed (exit N) to resolve <title>.``: what may be wrong."""
    strip_version: bool = False
    """Copy jars as ``artifactId.jar`` (no version in the name)."""


def resolve_maven_closure(
    closure: MavenClosure,
    root: Path,
    out: str,
    *,
    progress: TextIO,
    timeout: float,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Return ``root/out`` holding ``closure``'s jars, running Maven once if not cached.

    A marker file holding the pom's digest is written only after a complete
    copy, so an interrupted resolution is never used and a changed pom
    resolves again. Concurrent callers (processes) wait for one another.

    Raises:
        closure.error: Maven is missing, failed (the message carries the tail of
            its output) or did not finish within ``timeout`` seconds.
    """
    target = root / out
    marker = root / _MARKER
    digest = _digest(closure.pom)
    if _is_complete(marker, digest):
        return target
    with _locked(root / ".lock"):
        # Another process may have finished while this one waited for the lock.
        if _is_complete(marker, digest):
            return target
        marker.unlink(missing_ok=True)
        _run_maven(
            closure,
            root=root,
            target=target,
            progress=progress,
            timeout=timeout,
            environ=environ,
        )
        marker.write_text(digest + "\n", encoding="utf-8")
    return target


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


def _is_complete(marker: Path, digest: str) -> bool:
    try:
        return marker.read_text(encoding="utf-8").strip() == digest
    except OSError:
        return False


class _ProgressLine:
    """One line of progress on ``stream``: a title, live counts on a terminal, an outcome.

    On a terminal the line is rewritten in place (carriage return) as work advances;
    in a log or a pipe it is the title and, at the end, the outcome on the
    same line. A block left by an exception ends the line with "interrupted".
    """

    _REFRESH = 0.2  # seconds between rewrites on a terminal

    def __init__(self, stream: TextIO, title: str) -> None:
        self._stream = stream
        self._head = f"kgroup: {title} ... "
        self._live = _is_terminal(stream)
        self._shown = ""
        self._last = 0.0
        self._done = False

    def __enter__(self) -> _ProgressLine:
        self._write(self._head)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if not self._done:
            self.finish("interrupted" if exc_type is not None else "done")

    def update(self, status: str) -> None:
        """Show ``status`` after the title (terminals only; throttled)."""
        now = time.monotonic()
        if not self._live or now - self._last < self._REFRESH:
            return
        self._last = now
        self._show(status)

    def finish(self, outcome: str) -> None:
        """End the line with ``outcome``."""
        if self._done:
            return
        self._done = True
        if self._live:
            self._show(outcome)
            self._write("\n")
        else:
            self._write(outcome + "\n")

    def _show(self, status: str) -> None:
        # Pad with blanks so that a shorter status hides the longer one before it.
        padding = " " * max(0, len(self._shown) - len(status))
        self._write(f"\r{self._head}{status}{padding}")
        self._shown = status

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


def _show_tail(progress: TextIO, tail: Sequence[str], log_path: Path) -> None:
    """After a failure: the end of Maven's captured output, for context."""
    progress.write(f"kgroup: the last {len(tail)} lines of Maven's output ({log_path}):\n")
    progress.write("".join(f"  {text}\n" for text in tail))
    progress.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def _run_maven(
    closure: MavenClosure,
    *,
    root: Path,
    target: Path,
    progress: TextIO,
    timeout: float,
    environ: Mapping[str, str] | None,
) -> None:
    error = closure.error
    env = dict(os.environ if environ is None else environ)
    mvn = shutil.which("mvn", path=env.get("PATH", os.defpath))
    if mvn is None:
        raise error(closure.no_maven)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="resolve-", dir=root) as tmp:
        project = Path(tmp)
        (project / "pom.xml").write_text(closure.pom, encoding="utf-8")
        staging = project / target.name
        cmd = [
            mvn,
            "-B",
            # Batch mode still colours its output; the output goes to a log file.
            "-Dstyle.color=never",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
            *(["-Dmdep.stripVersion=true"] if closure.strip_version else []),
            *(f"-D{key}={value}" for key, value in closure.properties.items()),
        ]
        _log.debug("resolving %s with Maven: %s", closure.title, " ".join(cmd))
        title = f"fetching {closure.title} from Maven Central"
        with _ProgressLine(progress, title) as line:
            tail: collections.deque[str] = collections.deque(maxlen=_MAVEN_TAIL_LINES)
            log_path = root / "maven.log"
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
                line.finish(f"failed: {exc}")
                raise error(f"could not run {mvn}: {exc}") from exc
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
            downloads = 0
            # Maven's output is hundreds of download lines: kept in a file (and its
            # tail in memory for an error), never echoed; one line tells progress.
            try:
                with proc, log_path.open("w", encoding="utf-8") as log:
                    log.write(f"$ {' '.join(cmd)}\n")
                    for raw in proc.stdout:
                        text = _ANSI.sub("", raw)
                        log.write(text)
                        tail.append(text.rstrip("\n"))
                        if text.startswith("[INFO] Downloaded from"):
                            downloads += 1
                            line.update(f"{downloads} files downloaded")
                    code = proc.wait()
            finally:
                watchdog.cancel()
            took = time.monotonic() - started
            if timed_out.is_set():
                line.finish(f"timed out after {took:.1f} s")
                _show_tail(progress, tail, log_path)
                raise error(
                    f"Maven did not resolve {closure.title} within {timeout:.0f} s "
                    f"(full output in {log_path}). Last output:\n" + "\n".join(tail)
                )
            if code != 0:
                line.finish(f"failed after {took:.1f} s")
                _show_tail(progress, tail, log_path)
                errors = [text for text in tail if "[ERROR]" in text]
                raise error(
                    f"Maven failed (exit {code}) to resolve {closure.title}. "
                    f"{closure.failure_hint} "
                    f"(full output in {log_path})\n" + "\n".join(errors or list(tail))
                )
            jars = sorted(staging.glob("*.jar")) if staging.is_dir() else []
            if not any(j.name.startswith(closure.required_jar) for j in jars):
                line.finish(f"failed after {took:.1f} s")
                _show_tail(progress, tail, log_path)
                raise error(
                    f"Maven succeeded but copied no {closure.required_jar.rstrip('-')} jar "
                    f"into {staging} "
                    f"(full output in {log_path}). Last output:\n" + "\n".join(tail)
                )
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
            line.finish(f"done in {took:.1f} s ({len(jars)} jars)")
    _log.debug(
        "resolved %d jars for %s in %.1f s into %s",
        len(jars),
        closure.title,
        time.monotonic() - started,
        target,
    )
