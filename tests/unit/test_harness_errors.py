"""kgroup.testing error paths: no Java, no Maven, Maven failing, a broker that exits.

The last two run Maven and a JVM, but no broker ever becomes ready.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
from pathlib import Path

import pytest

from kgroup import _maven
from kgroup.errors import BrokerStartError, JarResolutionError, JavaNotFoundError
from kgroup.testing import KafkaBroker, NodeState, find_java, jvm, resolve_kafka_libs

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs java")
needs_maven = pytest.mark.skipif(shutil.which("mvn") is None, reason="needs mvn")


@pytest.fixture
def empty_path(tmp_path: Path) -> str:
    """A PATH with nothing on it."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return str(empty)


class TestJava:
    def test_no_java_on_path(self, empty_path: str) -> None:
        with pytest.raises(JavaNotFoundError, match="openjdk-17-jre-headless"):
            find_java({"PATH": empty_path})

    def test_java_home_without_java(self, tmp_path: Path) -> None:
        with pytest.raises(JavaNotFoundError, match="JAVA_HOME") as info:
            find_java({"JAVA_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")})
        assert "Java runtime 17" in str(info.value)

    def test_too_old_java(self, tmp_path: Path) -> None:
        bin_dir = tmp_path / "jdk8" / "bin"
        bin_dir.mkdir(parents=True)
        fake = bin_dir / "java"
        fake.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        with pytest.raises(JavaNotFoundError, match="Java 8"):
            find_java({"JAVA_HOME": str(tmp_path / "jdk8")})

    @needs_java
    def test_java_home_is_respected(self) -> None:
        real = Path(shutil.which("java") or "").resolve()
        java_home = real.parent.parent
        found = find_java({"JAVA_HOME": str(java_home), "PATH": ""})
        assert found.executable == java_home / "bin" / "java"
        assert found.major_version >= 17

    def test_broker_start_without_java(
        self, monkeypatch: pytest.MonkeyPatch, empty_path: str
    ) -> None:
        monkeypatch.setenv("PATH", empty_path)
        monkeypatch.delenv("JAVA_HOME", raising=False)
        broker = KafkaBroker()
        with pytest.raises(JavaNotFoundError, match="install|Install"):
            broker.start()
        assert broker.state is NodeState.NEW


class TestJars:
    def test_no_maven(self, tmp_path: Path, empty_path: str) -> None:
        with pytest.raises(JarResolutionError, match="Install Maven"):
            resolve_kafka_libs("4.4.0", cache_dir=tmp_path, environ={"PATH": empty_path})

    def test_half_done_cache_is_not_used(self, tmp_path: Path, empty_path: str) -> None:
        # Jars without the marker (an interrupted resolution) mean: resolve again.
        libs = tmp_path / "kafka-4.4.0" / "libs"
        libs.mkdir(parents=True)
        (libs / "kafka_2.13-4.4.0.jar").write_bytes(b"")
        with pytest.raises(JarResolutionError, match="Maven"):
            resolve_kafka_libs("4.4.0", cache_dir=tmp_path, environ={"PATH": empty_path})

    def test_complete_cache_needs_no_maven(self, tmp_path: Path, empty_path: str) -> None:
        root = tmp_path / "kafka-4.4.0"
        (root / "libs").mkdir(parents=True)
        (root / "complete").write_text(jvm.pom_digest() + "\n")
        assert resolve_kafka_libs("4.4.0", cache_dir=tmp_path, environ={"PATH": empty_path}) == (
            root / "libs"
        )

    def test_a_changed_pom_invalidates_the_cache(self, tmp_path: Path, empty_path: str) -> None:
        root = tmp_path / "kafka-4.4.0"
        (root / "libs").mkdir(parents=True)
        (root / "complete").write_text("digest-of-another-pom\n")
        with pytest.raises(JarResolutionError, match="Maven"):
            resolve_kafka_libs("4.4.0", cache_dir=tmp_path, environ={"PATH": empty_path})

    def test_version_must_look_like_one(self, tmp_path: Path) -> None:
        with pytest.raises(JarResolutionError, match="not a Kafka version"):
            resolve_kafka_libs("4.4.0; rm -rf /", cache_dir=tmp_path)

    @needs_maven
    @pytest.mark.timeout(300)
    def test_maven_failure_carries_its_message(self, tmp_path: Path) -> None:
        progress = io.StringIO()
        with pytest.raises(JarResolutionError) as info:
            resolve_kafka_libs("0.0.1-no-such-release", cache_dir=tmp_path, progress=progress)
        message = str(info.value)
        assert "0.0.1-no-such-release" in message
        assert "[ERROR]" in message
        assert "kafka_2.13" in message
        # Maven's output was streamed while it ran.
        assert "kgroup: fetching Apache Kafka 0.0.1-no-such-release" in progress.getvalue()
        assert "BUILD FAILURE" in progress.getvalue()
        # Nothing is left that a later run could take for a complete cache.
        root = tmp_path / "kafka-0.0.1-no-such-release"
        assert not (root / "complete").exists()
        assert not (root / "libs").exists()


def test_maven_runs_on_the_closures_own_pom(tmp_path: Path) -> None:
    # Regression: every closure ran Maven on the broker's pom, so on a machine
    # without a cached connector the fleet report's Spark Kafka connector
    # "resolved" to Kafka's broker jars (ConnectorJarError: copied no
    # spark-sql-kafka jar) and every report test failed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_mvn = bin_dir / "mvn"
    # A stand-in for Maven: the "dependency" it copies is the pom it was run on.
    fake_mvn.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${arg#*=}";; esac; done\n'
        'mkdir -p "$out" && cp pom.xml "$out/the-pom.jar"\n'
    )
    fake_mvn.chmod(fake_mvn.stat().st_mode | stat.S_IEXEC)
    closure = _maven.MavenClosure(
        title="a closure of its own",
        pom="<project><!-- not the broker's pom --></project>",
        properties={},
        required_jar="the-pom",
        error=JarResolutionError,
        no_maven="no mvn",
        failure_hint="",
    )
    jars = _maven.resolve_maven_closure(
        closure,
        tmp_path / "cache",
        "jars",
        progress=io.StringIO(),
        timeout=60,
        environ={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert (jars / "the-pom.jar").read_text() == closure.pom


@needs_java
@needs_maven
class TestBrokerExit:
    @pytest.mark.timeout(300)
    def test_broker_exit_reports_the_log_tail(self) -> None:
        # Formatting does not load the authorizer; the broker does, and dies.
        broker = KafkaBroker({"authorizer.class.name": "com.example.NoSuchAuthorizer"})
        try:
            with pytest.raises(BrokerStartError) as info:
                broker.start()
            message = str(info.value)
            assert "exited with code" in message
            assert "com.example.NoSuchAuthorizer" in message
            assert str(broker.log_path) in message
            assert broker.state is NodeState.STOPPED
            assert broker.pid is None
        finally:
            broker.close()

    @pytest.mark.timeout(300)
    def test_rejected_config_reports_the_reason(self) -> None:
        # The heartbeat interval must stay below the session timeout.
        broker = KafkaBroker({"group.consumer.heartbeat.interval.ms": "7000"})
        try:
            with pytest.raises(BrokerStartError) as info:
                broker.start()
            assert "must be less than group.consumer.session.timeout.ms" in str(info.value)
        finally:
            broker.close()
