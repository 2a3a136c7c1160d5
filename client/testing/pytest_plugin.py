"""pytest fixtures for tests against a real Kafka broker.

Loaded only where a test run asks for it, with ``-p kgroup.testing.pytest_plugin``
or ``pytest_plugins = ["kgroup.testing.pytest_plugin"]`` in the top-level
conftest.py. It is deliberately not a ``pytest11`` entry point: pytest loads
those in every run of every environment kgroup is installed in, and a project
that merely depends on kgroup should find its test run unchanged. Once loaded:

``kafka_broker`` (session)
    A broker of the backend ``KGROUP_BROKER_BACKEND`` selects, started the first
    time a test asks for it and closed at the end of the session. Tests that
    use it (directly or through another fixture) are marked ``integration``.
``kafka_broker_overrides`` (session)
    Broker settings for ``kafka_broker``; ``{}`` unless a conftest overrides
    this fixture.
``kafka_bootstrap_servers`` (session)
    ``kafka_broker.bootstrap_servers``.
``make_topic`` (function)
    ``make_topic(partitions=1, replication_factor=1, config=None, name=None) -> str``
    creates a fresh topic and returns once every partition has a leader; the
    topics are deleted when the test ends.
``make_group_id`` (function)
    ``make_group_id(prefix="g") -> str``: a group id no other test uses.

Marker: ``integration`` (added automatically, see above). The plugin selects
and deselects nothing: which of a project's tests run stays the project's call.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator, Mapping
from typing import Protocol

import pytest

from kgroup.testing.backends import Broker, broker_from_env
from kgroup.testing.topics import create_topic, delete_topics

__all__ = [
    "MakeGroupId",
    "MakeTopic",
    "create_topic",
    "kafka_bootstrap_servers",
    "kafka_broker",
    "kafka_broker_overrides",
    "make_group_id",
    "make_topic",
]

_log = logging.getLogger("kgroup.testing.pytest_plugin")

_BROKER_FIXTURES = frozenset({"kafka_broker", "kafka_bootstrap_servers"})


class MakeTopic(Protocol):
    """The type of the ``make_topic`` fixture."""

    def __call__(
        self,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> str: ...


class MakeGroupId(Protocol):
    """The type of the ``make_group_id`` fixture."""

    def __call__(self, prefix: str = "g") -> str: ...


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs a real Kafka broker (started by kgroup.testing)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # fixturenames is the closure, so a test using make_topic is caught too.
    for item in items:
        names = getattr(item, "fixturenames", ())
        if _BROKER_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kafka_broker_overrides() -> Mapping[str, str]:
    """Broker settings for the session broker; override this fixture in a conftest."""
    return {}


@contextlib.contextmanager
def _uncaptured(config: pytest.Config) -> Iterator[None]:
    # The first start of a Kafka version downloads jars for a while; Maven's
    # progress (on stderr) should reach the terminal, not pytest's capture.
    # The broker itself writes nothing to the terminal: its output goes to a file.
    capman = config.pluginmanager.getplugin("capturemanager")
    disabled = getattr(capman, "global_and_fixture_disabled", None)
    if disabled is None:
        yield
        return
    with disabled():
        yield


@pytest.fixture(scope="session")
def kafka_broker(
    kafka_broker_overrides: Mapping[str, str], request: pytest.FixtureRequest
) -> Iterator[Broker]:
    """One broker for the whole session, started on first use and closed at the end."""
    broker = broker_from_env(kafka_broker_overrides)
    with _uncaptured(request.config):
        broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def kafka_bootstrap_servers(kafka_broker: Broker) -> str:
    """The session broker's bootstrap servers."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def make_topic(kafka_broker: Broker, request: pytest.FixtureRequest) -> Iterator[MakeTopic]:
    """A factory of fresh topics on the session broker, deleted after the test."""
    created: list[str] = []
    test_name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]

    def factory(
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> str:
        topic = name or f"t-{test_name}-{uuid.uuid4().hex[:8]}"
        create_topic(
            kafka_broker.bootstrap_servers,
            topic,
            partitions=partitions,
            replication_factor=replication_factor,
            config=config,
        )
        created.append(topic)
        return topic

    yield factory
    if created:
        try:
            delete_topics(kafka_broker.bootstrap_servers, created)
        except Exception as exc:  # a broker stopped by the test must not fail teardown
            _log.warning("could not delete topics %s: %s", created, exc)


@pytest.fixture
def make_group_id(request: pytest.FixtureRequest) -> MakeGroupId:
    """A factory of group ids no other test (or earlier run on the same broker) uses."""
    test_name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]

    def factory(prefix: str = "g") -> str:
        return f"{prefix}-{test_name}-{uuid.uuid4().hex[:10]}"

    return factory
