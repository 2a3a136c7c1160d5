"""The migration checker and planner: every rule on hand-made facts, no broker.

Each test starts from the facts of a clean classic group on a Kafka 4.x broker
(safe to roll: infos only) and changes the one fact its rule looks at.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kgroup.admin import (
    BrokerFeatures,
    BrokerInfo,
    GroupDescription,
    GroupType,
    MemberDescription,
    MemberProtocol,
    MigrationFacts,
    Severity,
    check_migration,
    plan_migration,
)
from kgroup.admin.migration import (
    CLASSIC_ONLY_KEYS,
    CONSUMER_ASSIGNORS,
    CONSUMER_MAX_SIZE,
    CONSUMER_SESSION_TIMEOUT,
    MIGRATION_POLICY,
    REBALANCE_PROTOCOLS,
    remote_assignors,
)
from kgroup.protocol import ApiKey, VersionRange
from kgroup.protocol.cluster import BrokerAddress
from kgroup.types import TopicPartition

NODE = BrokerAddress(1, "broker", 9092)
TOPICS = frozenset({"orders", "orders-eu", "orders-us", "payments"})


def _tps(topic: str, *parts: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in parts)


HEARTBEAT_V0_V1 = VersionRange(0, 1)


def _broker(
    heartbeat: VersionRange | None = HEARTBEAT_V0_V1, group_version: int | None = 1
) -> BrokerInfo:
    ranges = {} if heartbeat is None else {int(ApiKey.CONSUMER_GROUP_HEARTBEAT): heartbeat}
    supported = {} if group_version is None else {"group.version": VersionRange(0, 1)}
    finalized = {} if not group_version else {"group.version": group_version}
    features = BrokerFeatures(api_ranges=ranges, supported=supported, finalized=finalized)
    return BrokerInfo(node=NODE, features=features)


def _member(
    name: str,
    *partitions: int,
    instance: str | None = None,
    protocol: MemberProtocol = MemberProtocol.CLASSIC,
    **fields: Any,
) -> MemberDescription:
    values: dict[str, Any] = {
        "member_id": f"{name}-id",
        "instance_id": instance,
        "client_id": name,
        "client_host": "/10.0.0.1",
        "protocol": protocol,
        "subscribed_topics": frozenset({"orders"}),
        "assignment": _tps("orders", *partitions),
    }
    values.update(fields)
    return MemberDescription(**values)


def _group(*members: MemberDescription, **fields: Any) -> GroupDescription:
    values: dict[str, Any] = {
        "group_id": "g",
        "group_type": GroupType.CLASSIC,
        "protocol_type": "consumer",
        "state": "Stable",
        "assignor": "cooperative-sticky",
        "coordinator": NODE,
        "members": members or (_member("a", 0, 1), _member("b", 2)),
    }
    values.update(fields)
    return GroupDescription(**values)


def _facts(**changes: Any) -> MigrationFacts:
    base = MigrationFacts(
        group_id="g",
        group=_group(),
        broker=_broker(),
        broker_configs={
            MIGRATION_POLICY: "bidirectional",
            CONSUMER_MAX_SIZE: "2147483647",
            CONSUMER_ASSIGNORS: "uniform,range",
            REBALANCE_PROTOCOLS: "classic,consumer,streams",
            CONSUMER_SESSION_TIMEOUT: "45000",
        },
        topics=TOPICS,
    )
    return dataclasses.replace(base, **changes)


def _configs(**changes: str) -> dict[str, str | None]:
    configs: dict[str, str | None] = dict(_facts().broker_configs)
    configs.update({k.replace("_", "."): v for k, v in changes.items()})
    return configs


def _codes(facts: MigrationFacts, severity: Severity) -> set[str]:
    return {f.code for f in check_migration(facts).of(severity)}


# -------------------------------------------------------------- the clean case


def test_a_clean_classic_group_is_safe_with_infos_only() -> None:
    report = check_migration(_facts())
    assert report.safe
    assert not report.of(Severity.WARNING)
    assert report.codes() == {
        "broker-ready",
        "policy-allows-upgrade",
        "assignment-movement",
        "broker-side-timeouts",
    }
    for finding in report.findings:
        assert finding.what
        assert finding.why


def test_every_blocker_and_warning_says_what_to_do() -> None:
    facts = _facts(
        broker_configs=_configs(group_consumer_migration_policy="disabled"),
        group=_group(_member("a", 0, instance="i-a", assignment_user_data=b"\x01")),
        regexes=("^orders", "(?=x)"),
    )
    report = check_migration(facts)
    assert not report.safe
    for finding in report.findings:
        if finding.severity is not Severity.INFO:
            assert finding.fix, finding.code


def test_findings_come_blockers_first() -> None:
    report = check_migration(
        _facts(group=_group(_member("a", 0, instance="i", assignment_user_data=b"x")))
    )
    order = [f.severity for f in report.findings]
    assert order == sorted(order, key=[Severity.BLOCKER, Severity.WARNING, Severity.INFO].index)
    assert order[0] is Severity.BLOCKER


# ------------------------------------------------------------------- broker


def test_a_broker_without_the_consumer_protocol_blocks() -> None:
    assert "consumer-protocol-unsupported" in _codes(
        _facts(broker=_broker(heartbeat=None, group_version=None)), Severity.BLOCKER
    )


def test_group_version_zero_blocks() -> None:
    facts = _facts(broker=_broker(group_version=0))
    assert "group-version-disabled" in _codes(facts, Severity.BLOCKER)
    (finding,) = [f for f in check_migration(facts).findings if f.code == "group-version-disabled"]
    assert "group.version=1" in finding.fix


def test_a_broker_without_consumer_in_its_rebalance_protocols_blocks() -> None:
    facts = _facts(broker_configs=_configs(group_coordinator_rebalance_protocols="classic"))
    assert "consumer-protocol-not-enabled" in _codes(facts, Severity.BLOCKER)


def test_an_early_access_broker_warns() -> None:
    facts = _facts(broker=_broker(heartbeat=VersionRange(0, 0), group_version=None))
    assert _codes(facts, Severity.WARNING) == {"early-access-broker"}
    assert check_migration(facts).safe


# ------------------------------------------------------------------- policy


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_a_policy_without_upgrades_blocks_a_non_empty_classic_group(policy: str) -> None:
    facts = _facts(broker_configs=_configs(group_consumer_migration_policy=policy))
    assert "upgrade-refused-by-policy" in _codes(facts, Severity.BLOCKER)


def test_an_unknown_policy_value_behaves_as_disabled() -> None:
    facts = _facts(broker_configs=_configs(group_consumer_migration_policy="sideways"))
    assert "unknown-migration-policy" in _codes(facts, Severity.BLOCKER)


def test_the_upgrade_policy_allows_the_roll_but_warns_that_rollback_is_offline() -> None:
    facts = _facts(broker_configs=_configs(group_consumer_migration_policy="upgrade"))
    assert check_migration(facts).safe
    assert _codes(facts, Severity.WARNING) == {"rollback-offline-only"}


def test_an_empty_group_converts_under_any_policy() -> None:
    facts = _facts(
        group=_group(members=()),
        broker_configs=_configs(group_consumer_migration_policy="disabled"),
    )
    report = check_migration(facts)
    assert report.safe
    assert "empty-group-converts" in report.codes()


def test_an_unreadable_policy_is_assumed_default_and_said() -> None:
    configs = _configs()
    del configs[MIGRATION_POLICY]
    facts = _facts(broker_configs=configs, unavailable=("the settings of broker 1 (denied)",))
    report = check_migration(facts)
    assert report.safe
    assert _codes(facts, Severity.WARNING) == {"fact-unavailable"}
    (policy,) = [f for f in report.findings if f.code == "policy-allows-upgrade"]
    assert "assumed bidirectional" in policy.what


def test_disabled_policy_in_a_converted_group_warns_that_classic_members_cannot_rejoin() -> None:
    group = _group(
        _member("a", 0, protocol=MemberProtocol.CONSUMER, member_epoch=3),
        _member("b", 1, member_epoch=3),
        group_type=GroupType.CONSUMER,
        group_epoch=3,
        assignment_epoch=3,
    )
    facts = _facts(group=group, broker_configs=_configs(group_consumer_migration_policy="disabled"))
    assert {"classic-joins-refused", "rollback-offline-only"} <= _codes(facts, Severity.WARNING)


# -------------------------------------------------------------------- group


def test_a_group_of_another_protocol_type_blocks() -> None:
    facts = _facts(group=_group(protocol_type="connect"))
    assert "not-a-consumer-protocol-group" in _codes(facts, Severity.BLOCKER)


def test_a_group_larger_than_the_consumer_maximum_blocks() -> None:
    facts = _facts(broker_configs=_configs(group_consumer_max_size="1"))
    assert "group-too-large" in _codes(facts, Severity.BLOCKER)
    assert (
        "group-too-large"
        not in check_migration(_facts(broker_configs=_configs(group_consumer_max_size="2"))).codes()
    )


def test_assignment_user_data_blocks_and_names_the_members() -> None:
    group = _group(
        _member("a", 0, assignment_user_data=b"\x00\x01"),
        _member("b", 1, assignment_user_data=b""),
        assignor="capacity",
    )
    report = check_migration(_facts(group=group))
    (finding,) = [f for f in report.findings if f.code == "custom-assignor-user-data"]
    assert finding.severity is Severity.BLOCKER
    assert "a-id" in finding.what
    assert "b-id" not in finding.what
    assert "KAFKA-18134" in finding.why
    # A custom assignor is also one without a server-side counterpart.
    assert "custom-classic-assignor" in report.codes()


def test_subscription_user_data_alone_does_not_block() -> None:
    # cooperative-sticky and sticky put their generation or owned partitions there.
    group = _group(_member("a", 0, subscription_user_data=b"\x00\x00\x00\x05"))
    assert check_migration(_facts(group=group)).safe


def test_an_undecodable_payload_blocks() -> None:
    group = _group(_member("a", 0, payload_error="undecodable subscription"))
    assert "undecodable-payload" in _codes(_facts(group=group), Severity.BLOCKER)


def test_a_rebalancing_group_warns_that_the_facts_are_incomplete() -> None:
    facts = _facts(group=_group(state="PreparingRebalance"))
    assert _codes(facts, Severity.WARNING) == {"group-rebalancing"}


def test_a_rebalancing_group_without_a_described_assignor_gets_no_assignor_finding() -> None:
    # What Kafka describes mid-rebalance: no protocol name, no member assignments. The
    # empty name is not a custom assignor (a first version reported "assignor ''").
    members = (_member("a", subscribed_topics=frozenset()), _member("b"))
    facts = _facts(group=_group(*members, state="CompletingRebalance", assignor=""))
    report = check_migration(facts)
    assert _codes(facts, Severity.WARNING) == {"group-rebalancing"}
    assert not {"custom-classic-assignor", "assignment-movement", "eager-classic-members"} & set(
        report.codes()
    )


def test_a_missing_group_warns() -> None:
    facts = _facts(group=None)
    report = check_migration(facts)
    assert report.safe
    assert _codes(facts, Severity.WARNING) == {"group-not-found"}


def test_an_already_converted_group_lists_the_classic_members_left() -> None:
    group = _group(
        _member("a", 0, protocol=MemberProtocol.CONSUMER, member_epoch=3),
        _member("b", 1, member_epoch=3),
        group_type=GroupType.CONSUMER,
        group_epoch=3,
        assignment_epoch=3,
        assignor="uniform",
    )
    report = check_migration(_facts(group=group))
    assert report.safe
    (finding,) = [f for f in report.findings if f.code == "already-consumer-group"]
    assert "1 classic member" in finding.what
    assert "b-id" in finding.what


# ------------------------------------------------------------ static members


def test_static_members_warn_with_the_brokers_session_timeout() -> None:
    facts = _facts(group=_group(_member("a", 0, instance="pod-0"), _member("b", 1)))
    report = check_migration(facts)
    assert report.safe
    (finding,) = report.of(Severity.WARNING)
    assert finding.code == "static-members"
    assert "pod-0" in finding.what
    assert "45000 ms" in finding.why
    assert "UNRELEASED_INSTANCE_ID" in finding.why


def test_a_group_config_overrides_the_brokers_session_timeout() -> None:
    facts = _facts(
        group=_group(_member("a", 0, instance="pod-0")),
        group_configs={"consumer.session.timeout.ms": "60000"},
    )
    (finding,) = check_migration(facts).of(Severity.WARNING)
    assert "60000 ms" in finding.why


# ---------------------------------------------------------------- assignors


def test_an_unknown_remote_assignor_blocks() -> None:
    facts = _facts(remote_assignor="sticky")
    assert "unknown-remote-assignor" in _codes(facts, Severity.BLOCKER)
    assert check_migration(_facts(remote_assignor="range")).safe


@pytest.mark.parametrize(
    ("classic", "remote", "words"),
    [
        ("cooperative-sticky", "uniform", "sticky and balanced"),
        ("range", "range", "per topic as classic range"),
        ("roundrobin", "uniform", "expect some"),
        ("sticky", "range", "many partitions to move"),
    ],
)
def test_the_assignment_movement_is_explained(classic: str, remote: str, words: str) -> None:
    facts = _facts(group=_group(assignor=classic), remote_assignor=remote)
    (finding,) = [f for f in check_migration(facts).findings if f.code == "assignment-movement"]
    assert words in finding.why


def test_eager_classic_assignors_say_their_partitions_pause_at_each_step() -> None:
    assert (
        "eager-classic-members" in check_migration(_facts(group=_group(assignor="range"))).codes()
    )
    assert "eager-classic-members" not in check_migration(_facts()).codes()


def test_remote_assignors_reads_names_and_class_names() -> None:
    assert remote_assignors("uniform, range") == ("uniform", "range")
    assert remote_assignors(
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"
    ) == ("uniform", "range")
    assert remote_assignors(None) == ("uniform", "range")


# ------------------------------------------------------------------ regexes


def test_a_regex_re2_rejects_blocks() -> None:
    facts = _facts(regexes=("orders(?!-us).*",))
    report = check_migration(facts)
    (finding,) = [f for f in report.findings if f.code == "regex-rejected"]
    assert finding.severity is Severity.BLOCKER
    assert "INVALID_REGULAR_EXPRESSION" in finding.why


def test_a_partial_match_regex_that_drops_topics_blocks_and_suggests_a_rewrite() -> None:
    group = _group(
        _member("a", 0, subscribed_topics=frozenset({"orders", "orders-eu", "orders-us"}))
    )
    report = check_migration(_facts(group=group, regexes=("^orders",)))
    (finding,) = [f for f in report.findings if f.code == "regex-drops-topics"]
    assert finding.severity is Severity.BLOCKER
    assert "orders-eu" in finding.what
    assert "'^orders.*'" in finding.fix


def test_a_regex_matching_more_topics_than_consumed_now_warns() -> None:
    group = _group(_member("a", 0, subscribed_topics=frozenset({"orders", "orders-eu"})))
    facts = _facts(group=group, regexes=("^orders.*",))
    assert _codes(facts, Severity.WARNING) == {"regex-adds-topics"}
    (finding,) = check_migration(facts).of(Severity.WARNING)
    assert "orders-us" in finding.what


def test_a_full_match_regex_with_the_same_topics_is_info() -> None:
    group = _group(_member("a", 0, subscribed_topics=frozenset({"orders-eu", "orders-us"})))
    facts = _facts(group=group, regexes=("orders-(eu|us)",))
    assert check_migration(facts).safe
    assert "regex-same-topics" in check_migration(facts).codes()


def test_a_regex_for_an_empty_group_is_judged_against_partial_matching() -> None:
    facts = _facts(group=_group(members=()), regexes=("^pay",))
    assert "regex-drops-topics" in _codes(facts, Severity.BLOCKER)


# --------------------------------------------------------------------- plan


def test_the_plan_rolls_the_fewest_partitions_first_with_the_consumer_settings() -> None:
    group = _group(
        _member("big", 0, 1, 2),
        _member("small", 3, instance="pod-1"),
        _member("mid", 4, 5),
    )
    plan = plan_migration(_facts(group=group))
    assert [s.client_id for s in plan.steps] == ["small", "mid", "big"]
    assert [s.order for s in plan.steps] == [1, 2, 3]
    assert plan.steps[0].instance_id == "pod-1"
    assert plan.steps[0].partitions == 1
    assert dict(plan.set_keys) == {"group.protocol": "consumer", "group.remote.assignor": "uniform"}
    assert plan.remove_keys == CLASSIC_ONLY_KEYS
    assert not plan.blocked


def test_the_plan_keeps_range_for_a_range_group_and_honours_an_explicit_choice() -> None:
    assert (
        plan_migration(_facts(group=_group(assignor="range"))).set_keys["group.remote.assignor"]
        == "range"
    )
    chosen = plan_migration(_facts(group=_group(assignor="range"), remote_assignor="uniform"))
    assert chosen.set_keys["group.remote.assignor"] == "uniform"


def test_the_plan_rewrites_regexes_and_is_marked_blocked_when_the_check_blocks() -> None:
    group = _group(_member("a", 0, subscribed_topics=frozenset({"orders", "orders-eu"})))
    plan = plan_migration(_facts(group=group, regexes=("^orders",)))
    assert dict(plan.subscription_changes) == {"^orders": "^orders.*"}
    assert plan.blocked


def test_the_plan_leaves_a_regex_alone_when_full_matching_keeps_the_same_topics() -> None:
    # The members consume only "orders", which "^orders" also matches in full.
    plan = plan_migration(_facts(regexes=("^orders",)))
    assert dict(plan.subscription_changes) == {}
    assert not plan.blocked


def test_the_plan_of_a_converted_group_rolls_only_its_classic_members() -> None:
    group = _group(
        _member("a", 0, protocol=MemberProtocol.CONSUMER),
        _member("b", 1),
        group_type=GroupType.CONSUMER,
        group_epoch=2,
        assignment_epoch=2,
    )
    assert [s.client_id for s in plan_migration(_facts(group=group)).steps] == ["b"]
