"""Jars from Maven Central, resolved once into the cache: what the harness and report share.

A :class:`MavenClosure` names a ``pom.xml`` and what to say when it fails;
:func:`resolve_maven_closure` runs ``mvn dependency:copy-dependencies`` on it
into a directory of the cache (:func:`cache_root`), behind a lock and a marker
file written only after a complete copy, so an interrupted resolution is never
used. The test broker's jars (:mod:`kgroup.testing.jvm`) and the report's Spark
Kafka connector (:mod:`kgroup.report.jars`) are two such closures; this module
is neither's, so that the shipped report does not import the test harness.
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
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kgroup.errors import KgroupError

__all__ = ["MavenClosure", "cache_root", "pom_digest_of", "resolve_maven_closure"]

# The logger keeps the name it had when this code lived in the harness.
_log = logging.getLogger("kgroup.testing.jvm")

_MARKER = "complete"
_MAVEN_TAIL_LINES = 40
# Maven's console library emits colour resets even in batch mode.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


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


def pom_digest_of(pom: str) -> str:
    """The digest of ``pom`` that a complete cache's marker file records."""
    return hashlib.sha256(pom.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class MavenClosure:
    """A pom's runtime dependency closure, for :func:`resolve_maven_closure` to copy.

    The test broker's jars are one (:func:`kgroup.testing.jvm.resolve_kafka_libs`);
    the fleet report's Spark Kafka connector (:mod:`kgroup.report.jars`) another.
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
    digest = pom_digest_of(closure.pom)
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
