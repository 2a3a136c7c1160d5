"""A bootstrap address that is the cluster's controller port, not a broker listener.

An easy mistake (a node has two ports): the address accepts connections and
answers ApiVersions, but serves no Metadata. librdkafka reports that at once;
the commands used to retry it in a tight loop until ``--timeout`` and then say
"no broker answered". They now stop at once and name the mistake, and a
consumer's first poll names it too.
"""

from __future__ import annotations

import time

import pytest
from helpers import run_python

import kgroup
from kgroup.cli.topics import EXIT_UNREACHABLE
from kgroup.errors import KgroupError, NoBrokersAvailableError
from kgroup.testing import KafkaBroker

pytestmark = pytest.mark.integration

TIMEOUT_S = 60.0
"""The --timeout given: the commands must not wait it out."""


@pytest.mark.parametrize(
    "argv",
    [["topics", "create", "t"], ["topics", "produce", "t"], ["consume", "t", "--count", "1"]],
    ids=["topics-create", "topics-produce", "consume"],
)
def test_a_command_given_the_controller_port_says_so_at_once(
    kafka_broker: KafkaBroker, argv: list[str]
) -> None:
    where = f"127.0.0.1:{kafka_broker.ports.controller}"
    started = time.monotonic()
    # In a process of its own, as a user runs it: the command sets up logging
    # for its process, which must not leak into the other tests' loggers.
    done = run_python(
        "-m", "kgroup.cli", *argv, "--bootstrap-servers", where, "--timeout", f"{TIMEOUT_S:g}"
    )
    waited = time.monotonic() - started
    err = done.stderr
    assert done.returncode == EXIT_UNREACHABLE, err
    assert f"{where} answered but serves no Metadata" in err
    assert "not a Kafka broker listener" in err
    # It did not wait for --timeout: the answer cannot change (the interpreter's
    # start-up is in the figure too).
    assert waited < TIMEOUT_S / 2, waited


def test_a_consumer_given_the_controller_port_names_it_in_its_first_poll(
    kafka_broker: KafkaBroker,
) -> None:
    where = f"127.0.0.1:{kafka_broker.ports.controller}"
    with kgroup.Consumer({"bootstrap.servers": where, "group.id": "not-a-broker"}) as consumer:
        consumer.subscribe(["t"])
        error = _first_error(consumer)
    assert isinstance(error, NoBrokersAvailableError), error
    assert "not one (a KRaft controller's port?)" in str(error)


def _first_error(consumer: kgroup.Consumer) -> KgroupError:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            consumer.poll(0.5)
        except KgroupError as exc:
            return exc
    raise AssertionError(f"no error from poll within {TIMEOUT_S:g} s")
