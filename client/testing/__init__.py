"""Real Apache Kafka brokers for tests: ``kgroup.testing``.

The default backend runs the broker as a local JVM process from jars that
Maven resolves once per Kafka version and caches (see ``docs/testing.md``)::

    from kgroup.testing import KafkaBroker

    with KafkaBroker() as broker:
        ...  # broker.bootstrap_servers == "127.0.0.1:<port>"

With pytest, the ``kafka_broker``, ``make_topic`` and ``make_group_id``
fixtures of :mod:`kgroup.testing.pytest_plugin` are available to a test run
that asks for the plugin: ``pytest -p kgroup.testing.pytest_plugin``, or
``pytest_plugins = ["kgroup.testing.pytest_plugin"]`` in the top-level
``conftest.py``. It is not an entry point, so installing kgroup changes no
other test run. The plugin needs the ``test`` extra
(``pip install 'kgroup[test]'``).
"""

from kgroup.errors import BrokerStartError, HarnessError, JarResolutionError, JavaNotFoundError
from kgroup.testing.backends import (
    Broker,
    BrokerBackend,
    ContainerBroker,
    ContainerCluster,
    ExternalBroker,
    backend_from_env,
    broker_from_env,
    container_environment,
    start_broker,
)
from kgroup.testing.config import (
    FAST_TEST_DEFAULTS,
    NodePorts,
    QuorumNode,
    generate_cluster_id,
    node_properties,
    pick_free_ports,
    render_properties,
)
from kgroup.testing.jvm import (
    DEFAULT_KAFKA_VERSION,
    JavaRuntime,
    cache_root,
    find_java,
    kafka_version,
    resolve_kafka_libs,
)
from kgroup.testing.process import DEFAULT_JVM_OPTIONS, KafkaBroker, KafkaCluster, NodeState
from kgroup.testing.topics import create_topic, delete_topics

__all__ = [
    "DEFAULT_JVM_OPTIONS",
    "DEFAULT_KAFKA_VERSION",
    "FAST_TEST_DEFAULTS",
    "Broker",
    "BrokerBackend",
    "BrokerStartError",
    "ContainerBroker",
    "ContainerCluster",
    "ExternalBroker",
    "HarnessError",
    "JarResolutionError",
    "JavaNotFoundError",
    "JavaRuntime",
    "KafkaBroker",
    "KafkaCluster",
    "NodePorts",
    "NodeState",
    "QuorumNode",
    "backend_from_env",
    "broker_from_env",
    "cache_root",
    "container_environment",
    "create_topic",
    "delete_topics",
    "find_java",
    "generate_cluster_id",
    "kafka_version",
    "node_properties",
    "pick_free_ports",
    "render_properties",
    "resolve_kafka_libs",
    "start_broker",
]
