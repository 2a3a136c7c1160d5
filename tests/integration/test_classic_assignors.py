"""Python assignors on the kgroup leader of a classic group (real broker).

The example assignor (``examples/custom_assignor.py``) deals partitions in
proportion to capacities the members send as subscription user data.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
from helpers import EventLog, Runner, classic_conf, converged, partitions_of, produce, wait_until

from kgroup import Consumer
from kgroup.assignors import (
    Cluster,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
    RebalanceProtocol,
)
from kgroup.errors import AssignmentViolation, InvalidAssignmentError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_assignor.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_assignor_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_custom_assignor_runs_on_the_leader_with_user_data(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    example = _example()
    seen: list[dict[str, int]] = []
    lock = threading.Lock()

    class Recording(example.CapacityAssignor):  # type: ignore[name-defined,misc]
        def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
            with lock:
                seen.append(
                    {m: self.capacity_of(s) for m, s in subscriptions.subscriptions.items()}
                )
            result: GroupAssignment = super().assign(cluster, subscriptions)
            return result

    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=12)
    group = make_group_id()
    values = produce(bootstrap, topic, 12, 240)
    log = EventLog()
    assignors = {name: Recording(capacity=c) for name, c in (("a", 1), ("b", 2), ("c", 3))}
    runners = [
        Runner(classic_conf(bootstrap, group, [assignors[name]]), [topic], log, name)
        for name in "abc"
    ]
    try:
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 12))
                and [len(r.assignment()) for r in runners] == [2, 4, 6]
            ),
            30,
            "assignment in proportion to capacities 1:2:3",
        )
        wait_until(
            lambda: sum(len(set(r.values)) for r in runners) >= len(values), 30, "all consumed"
        )
        assert set().union(*(set(r.values) for r in runners)) == values
        with lock:
            last = seen[-1]
        # The leader saw every member's user data.
        assert sorted(last.values()) == [1, 2, 3]
        for name, runner in zip("abc", runners, strict=True):
            # on_assignment ran on every member with what it got.
            assert set(assignors[name].assigned) == set(runner.assignment())
    finally:
        for runner in runners:
            runner.stop()


class _DroppingAssignor(RangeAssignor):
    """A broken assignor: leaves partition 0 of every topic unassigned."""

    name = "dropping"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        full = super().assign(cluster, subscriptions)
        return GroupAssignment.of(
            {m: [tp for tp in full.partitions(m) if tp.partition != 0] for m in full}
        )


def test_invalid_assignment_is_a_fatal_error_naming_the_assignor_and_never_sent(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=3)
    with Consumer(
        classic_conf(kafka_broker.bootstrap_servers, make_group_id(), [_DroppingAssignor()])
    ) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 20
        with pytest.raises(InvalidAssignmentError) as info:  # noqa: PT012 - polls until it fails
            while time.monotonic() < deadline:
                c.poll(0.1)
        assert info.value.assignor == "dropping"
        assert info.value.violation is AssignmentViolation.MISSING_PARTITION
        assert TopicPartition(topic, 0) not in c.assignment()
        assert "dropping" in str(info.value)
