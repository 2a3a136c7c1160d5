"""Groups the coordinator leaves stuck are repaired by their kgroup members (issue 29).

Two stalls of Apache Kafka 4.4 (the first in two shapes), each made
deterministic; each test fails with the repair disabled (checked by hand).

**Unowned partitions.**
The trace a deployment tool produced on Apache Kafka 4.4, made deterministic:
static classic cooperative-sticky members, one of which owns all 12 partitions
when three others join. The cooperative first round takes 3..11 from it and
gives them to nobody; the second round would hand them out once that member,
done revoking, rejoins. Its revoke callback is slow (an application saving its
state; the test holds it until the group is converted), and meanwhile a
consumer-protocol process replaces another static
member, which converts the group to a consumer group. The consumer group
inherits the first round's assignment as its target, and nothing bumps its
epoch again: static replacements and a classic member's unchanged rejoin do
not. Without the repair, 3..11 are consumed by nobody for good (checked by
disabling it: the wait below times out with them unowned). With it, an idle
member sees the group settled with partitions unowned twice in a row, leaves
for good and rejoins, and the coordinator hands them out.

**Unowned partitions, every member owning some.** The same stall with no idle
member: the kgroup member holding the fewest partitions releases them, leaves
for good and rejoins (checked by hand with that branch of the watch disabled:
2 of 8 partitions stayed unowned past 75 s).

**A stalled assignment.** Under migration policy ``upgrade``, the last
consumer-protocol member of a converted group leaves: the coordinator bumps the
group epoch but answers the classic members' heartbeats ``NONE``, so none
rejoins and the leaver's partitions stay unowned (``Assigning``). A classic
member that sees the assignment waiting for the same epoch twice rejoins,
keeping its partitions, and its JoinGroup makes the coordinator assign.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions
from helpers import classic_conf, consumer_conf, wait_until
from process_helpers import MemberProcess, SteadyProducer
from test_groups_cli import cli_json

from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import create_topic

pytestmark = pytest.mark.integration

PARTITIONS = 12
REPAIR_BOUND_S = 45.0
"""Generous bound on the repair: the watch's first wait and confirmation (5 s + 5 s),
the leave and rejoin, and a rebalance, on a loaded CI machine."""


@pytest.fixture
def members(tmp_path: Path) -> Iterator[dict[str, MemberProcess]]:
    started: dict[str, MemberProcess] = {}
    yield started
    for m in started.values():
        m.cleanup()


def _has(kind: str, member: MemberProcess) -> Callable[[], bool]:
    return lambda: bool(member.of(kind))


def _owning(count: int, member: MemberProcess) -> Callable[[], bool]:
    return lambda: len(member.assignment()) == count


def _timeline(members: dict[str, MemberProcess], t0: float) -> str:
    lines = []
    for name, m in members.items():
        events = [
            f"{e.t - t0:.1f} {e.kind} {sorted(tp.partition for tp in e.partitions)}"
            for e in m.of("assigned", "revoked", "lost")
        ]
        lines.append(f"{name}: " + "; ".join(events))
    return "\n".join(lines)


def _every_partition_consumed(
    members: dict[str, MemberProcess], since: float, everything: set[int], bound: float, t0: float
) -> float:
    """Waits until some member consumed a record of every partition after ``since``;
    returns how long after ``since`` that was."""

    def consumed_since() -> set[int]:
        seen: set[int] = set()
        for m in members.values():
            for e in m.of("records"):
                if e.t > since:
                    seen.update(p for _, p, _ in e.data["records"])
        return seen

    _all_partitions(
        consumed_since,
        everything,
        bound,
        f"not consumed within {bound} s of the conversion",
        members=members,
        t0=t0,
    )
    return time.monotonic() - since


def _all_partitions(
    current: Callable[[], set[int]],
    everything: set[int],
    bound: float,
    failure: str,
    *,
    members: dict[str, MemberProcess],
    t0: float,
) -> None:
    """Waits until ``current()`` is ``everything``; else fails naming the partitions
    missing (``partitions [..] <failure>``) with every member's timeline."""
    try:
        wait_until(lambda: current() == everything, bound, "every partition")
    except AssertionError:
        raise AssertionError(
            f"partitions {sorted(everything - current())} {failure}\n{_timeline(members, t0)}"
        ) from None


def _every_record_consumed(
    members: dict[str, MemberProcess], delivered: set[tuple[str, int, int]], t0: float
) -> None:
    """Every delivered record was consumed by some member, and no member saw an error."""

    def consumed() -> set[tuple[str, int, int]]:
        return set().union(*(m.records for m in members.values()))

    # A timeout is reported below, with the records and the timeline.
    with contextlib.suppress(AssertionError):
        wait_until(lambda: delivered <= consumed(), 60, "every record consumed")
    lost = delivered - consumed()
    assert not lost, (
        f"{len(lost)} records never consumed, e.g. {sorted(lost)[:5]}\n{_timeline(members, t0)}"
    )
    for m in members.values():
        assert not m.of("error"), m.of("error")


class _Roll:
    """Starts the members of one group: static classic cooperative-sticky ones, each
    committing after every batch and in its revoke callback, kept in ``members``."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        tmp_path: Path,
        members: dict[str, MemberProcess],
    ) -> None:
        self._bootstrap, self._group, self._topic = bootstrap, group, topic
        self._tmp_path, self._members = tmp_path, members

    def classic(self, instance: str) -> dict[str, Any]:
        return classic_conf(
            self._bootstrap, self._group, "cooperative-sticky", group_instance_id=instance
        )

    def start(self, name: str, conf: dict[str, Any], *, wait: bool = False) -> MemberProcess:
        member = MemberProcess(
            name,
            conf,
            [self._topic],
            self._tmp_path,
            commit_each_batch=True,
            commit_on_revoke=True,
            wait_to_subscribe=wait,
        )
        self._members[name] = member
        return member

    def convert(self, instance: str) -> tuple[MemberProcess, float, set[int], dict[str, Any]]:
        """Starts ``instance``'s consumer-protocol replacement (its classic process
        closed), which converts the group; returns it, when it was assigned, and the
        partitions the group tools then show owned by nobody, with the description."""
        converted = self.start(
            f"{instance}-consumer",
            consumer_conf(
                self._bootstrap,
                self._group,
                group_protocol="consumer",
                group_instance_id=instance,
            ),
        )
        converted.wait_for(lambda: bool(converted.of("assigned")), 60, f"{instance} joined")
        since = time.monotonic()
        # The group tools show the stall (the repair is 10 s away at the earliest).
        described = cli_json(self._bootstrap, "groups", "describe", self._group)
        assert described["state"] == "Stable", described
        unowned = {p["partition"] for p in described["unowned_partitions"]}
        return converted, since, unowned, described


def test_a_converted_group_left_with_unowned_partitions_is_repaired(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    members: dict[str, MemberProcess],
    tmp_path: Path,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=PARTITIONS)
    group = make_group_id()
    everything = set(range(PARTITIONS))

    roll = _Roll(bootstrap, group, topic, tmp_path, members)
    classic, start = roll.classic, roll.start

    producer = SteadyProducer(bootstrap, topic, PARTITIONS, 0.02)
    t0 = time.monotonic()
    try:
        owner = start("inst-1", classic("inst-1"))
        owner.wait_for(
            lambda: {tp.partition for tp in owner.assignment()} == everything,
            60,
            "inst-1 owning every partition",
        )
        # Its next callback (the first round's revocation) lasts until released.
        owner.send("hold_callback")
        # The three join in one rebalance: a later joiner's round would wait for
        # inst-1, which cannot rejoin while its callback is held.
        joiners = [start(f"inst-{i}", classic(f"inst-{i}"), wait=True) for i in (0, 2, 3)]
        for joiner in joiners:
            joiner.wait_for(_has("ready", joiner), 60, f"{joiner.name} ready")
        for joiner in joiners:
            joiner.send("subscribe")
        owner.wait_for(lambda: bool(owner.of("slow_start")), 60, "inst-1 revoking, slowly")
        for joiner in joiners:
            joiner.wait_for(_has("assigned", joiner), 60, f"{joiner.name} synced")
        # The first round is over: inst-1 keeps a quarter, the rest belongs to nobody
        # until inst-1 rejoins. Now inst-0 is restarted on the consumer protocol.
        assert members["inst-0"].close(30) == 0
        _converted, since, unowned, described = roll.convert("inst-0")
        assert unowned == everything - {tp.partition for tp in owner.assignment()}, (
            described,
            _timeline(members, t0),
        )
        assert len(unowned) == PARTITIONS * 3 // 4
        owner.send("release")  # the classic member's rejoin does not repair it either

        repaired_after = _every_partition_consumed(members, since, everything, REPAIR_BOUND_S, t0)
        print(f"every partition consumed again {repaired_after:.1f} s after the conversion")
    finally:
        delivered = producer.stop()

    _every_record_consumed(members, delivered, t0)


STALL_BOUND_S = 75.0
"""The watch's wait for a member that owns partitions (30 s) and its confirmation
(5 s), the rejoin and a rebalance, with room for a loaded CI machine."""


def test_an_assignment_stalled_after_the_last_consumer_member_left_is_repaired(
    tmp_path: Path, members: dict[str, MemberProcess]
) -> None:
    with KafkaBroker(overrides={"group.consumer.migration.policy": "upgrade"}) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "orders", partitions=6)
        group = "upgrade-stall"
        everything = set(range(6))
        t0 = time.monotonic()
        classic = [
            MemberProcess(
                f"classic-{i}",
                classic_conf(bootstrap, group, "cooperative-sticky"),
                ["orders"],
                tmp_path,
            )
            for i in range(2)
        ]
        members.update({m.name: m for m in classic})
        for m in classic:
            m.wait_for(_owning(3, m), 60, f"{m.name} owning 3")
        converter = MemberProcess(
            "consumer",
            consumer_conf(bootstrap, group, group_protocol="consumer"),
            ["orders"],
            tmp_path,
        )
        members["consumer"] = converter
        converter.wait_for(lambda: len(converter.assignment()) == 2, 60, "the group converted")
        assert converter.close(30) == 0
        left = time.monotonic()

        def owned() -> set[int]:
            return {tp.partition for m in classic for tp in m.assignment()}

        _all_partitions(
            owned,
            everything,
            STALL_BOUND_S,
            f"owned by nobody {STALL_BOUND_S} s after the last consumer-protocol member left",
            members=members,
            t0=t0,
        )
        print(f"every partition owned again {time.monotonic() - left:.1f} s after the leave")
        described = cli_json(bootstrap, "groups", "describe", group)
        assert described["group_epoch"] == described["assignment_epoch"]
        assert described["unowned_partitions"] == []
        for m in classic:
            assert not m.of("lost", "error")


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(30)


BUSY_BOUND_S = 75.0
"""The watch's wait for a member that owns partitions (30 s) and two confirmations
(5 s each) for the member holding the fewest, its release, leave and rejoin, and
a rebalance, with room for a loaded CI machine."""


def test_unowned_partitions_in_a_group_where_every_member_owns_some_are_repaired(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    members: dict[str, MemberProcess],
    tmp_path: Path,
) -> None:
    """No member is idle, so a member that owns partitions repairs the group.

    The state a CI run of the mixed-client migration roll reached (a cooperative
    first round had given every member something and withheld one partition
    when a static replacement converted the group), made deterministic: inst-1
    owns all 6 partitions of a topic that then grows to 8, and inst-0 joins. The
    leader's first round gives inst-0 the new partitions 6 and 7 at once (nobody
    owned them), keeps 4 for inst-1 and withholds the 2 inst-1 must revoke; its
    revoke callback is held while inst-0 is restarted on the consumer protocol,
    which converts the group with those 2 partitions in nobody's target. Both
    members own partitions; the one holding fewer (inst-0) releases its own,
    leaves for good and rejoins, and the coordinator hands everything out.
    """
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    group = make_group_id()
    everything = set(range(8))

    roll = _Roll(bootstrap, group, topic, tmp_path, members)
    classic, start = roll.classic, roll.start

    t0 = time.monotonic()
    owner = start("inst-1", classic("inst-1"))
    owner.wait_for(
        lambda: {tp.partition for tp in owner.assignment()} == set(range(6)),
        60,
        "inst-1 owning every partition",
    )
    _add_partitions(bootstrap, topic, 8)
    producer = SteadyProducer(bootstrap, topic, 8, 0.02)
    try:
        owner.send("hold_callback")
        joiner = start("inst-0", classic("inst-0"))
        owner.wait_for(lambda: bool(owner.of("slow_start")), 60, "inst-1 revoking, slowly")
        joiner.wait_for(
            lambda: {tp.partition for tp in joiner.assignment()} == {6, 7},
            60,
            "inst-0 given the new partitions in the first round",
        )
        kept = {tp.partition for tp in owner.assignment()}
        assert len(kept) == 4, _timeline(members, t0)
        assert joiner.close(30) == 0
        converted, since, unowned, described = roll.convert("inst-0")
        assert unowned == everything - kept - {6, 7}, (described, _timeline(members, t0))
        assert all(m["assignment"] for m in described["members"]), described
        owner.send("release")

        def owned() -> set[int]:
            return {tp.partition for m in (owner, converted) for tp in m.assignment()}

        repaired_after = _every_partition_consumed(members, since, everything, BUSY_BOUND_S, t0)
        print(f"every partition consumed again {repaired_after:.1f} s after the conversion")
        wait_until(lambda: owned() == everything, 30, "every partition owned")
    finally:
        delivered = producer.stop()

    _every_record_consumed(members, delivered, t0)
    # The member that repaired is the one that held fewer: it left and came back.
    assert converted.of("revoked"), _timeline(members, t0)
