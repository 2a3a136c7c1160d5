"""The migration pre-flight checker and planner: pure functions over gathered facts.

:func:`kgroup.admin.gather_migration_facts` reads what a classic-to-consumer
upgrade depends on from the cluster into :class:`MigrationFacts`;
:func:`check_migration` turns the facts into findings (blocker / warning /
info, each with what, why and what to do) and :func:`plan_migration` into a
rolling order with the settings each member needs. Neither does I/O, so every
rule is unit-tested on hand-made facts.

The rules follow Apache Kafka 4.x's group coordinator: a ConsumerGroupHeartbeat
at epoch 0 converts a non-empty classic group only if the broker's
``group.consumer.migration.policy`` allows upgrades, the group's protocol type
is ``consumer``, it has at most ``group.consumer.max.size`` members, every
embedded subscription and assignment parses, and no assignment carries user
data (a custom assignor, KAFKA-18134). Otherwise the heartbeat is refused with
GROUP_ID_NOT_FOUND. Empty groups convert either way.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from kgroup.admin.model import BrokerInfo, GroupDescription, GroupType, MemberDescription
from kgroup.admin.regex import RegexVerdict, evaluate_regex
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import frozen_map

__all__ = [
    "BROKER_KEYS",
    "CLASSIC_ONLY_KEYS",
    "CONSUMER_ASSIGNORS",
    "CONSUMER_HEARTBEAT_INTERVAL",
    "CONSUMER_MAX_SIZE",
    "CONSUMER_SESSION_TIMEOUT",
    "GROUP_VERSION",
    "MIGRATION_POLICY",
    "REBALANCE_PROTOCOLS",
    "Finding",
    "MemberStep",
    "MigrationFacts",
    "MigrationPlan",
    "MigrationReport",
    "Severity",
    "check_migration",
    "plan_migration",
    "remote_assignors",
]

MIGRATION_POLICY: Final = "group.consumer.migration.policy"
CONSUMER_MAX_SIZE: Final = "group.consumer.max.size"
CONSUMER_ASSIGNORS: Final = "group.consumer.assignors"
REBALANCE_PROTOCOLS: Final = "group.coordinator.rebalance.protocols"
CONSUMER_SESSION_TIMEOUT: Final = "group.consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL: Final = "group.consumer.heartbeat.interval.ms"
GROUP_SESSION_TIMEOUT: Final = "consumer.session.timeout.ms"
GROUP_HEARTBEAT_INTERVAL: Final = "consumer.heartbeat.interval.ms"
GROUP_VERSION: Final = "group.version"

BROKER_KEYS: Final = (
    MIGRATION_POLICY,
    CONSUMER_MAX_SIZE,
    CONSUMER_ASSIGNORS,
    REBALANCE_PROTOCOLS,
    CONSUMER_SESSION_TIMEOUT,
    CONSUMER_HEARTBEAT_INTERVAL,
)
"""The broker settings the checker reads from the group's coordinator."""

CLASSIC_ONLY_KEYS: Final = (
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
)
"""Client settings that belong to the classic protocol; Java and kgroup refuse them
with ``group.protocol=consumer`` (the broker owns timeouts and assignment there)."""

_UPGRADE_POLICIES: Final = frozenset({"bidirectional", "upgrade"})
_DOWNGRADE_POLICIES: Final = frozenset({"bidirectional", "downgrade"})
_KNOWN_POLICIES: Final = frozenset({"bidirectional", "upgrade", "downgrade", "disabled"})
_DEFAULT_POLICY: Final = "bidirectional"
_DEFAULT_ASSIGNORS: Final = ("uniform", "range")
_EAGER_ASSIGNORS: Final = frozenset({"range", "roundrobin", "sticky"})
_STICKY_ASSIGNORS: Final = frozenset({"sticky", "cooperative-sticky"})
_BUILTIN_CLASSIC: Final = frozenset({"range", "roundrobin", "sticky", "cooperative-sticky"})


class Severity(enum.Enum):
    """How much a finding matters to the roll."""

    BLOCKER = "blocker"
    """The upgrade will be refused, or data would go unconsumed: do not roll."""
    WARNING = "warning"
    """The roll works, but something behaves differently: read before rolling."""
    INFO = "info"
    """What the checker saw and how the roll will go."""


_ORDER: Final = {Severity.BLOCKER: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One result of the pre-flight check.

    Attributes:
        severity: blocker, warning or info.
        code: a stable identifier for scripts (``custom-assignor-user-data`` ...).
        what: what was found.
        why: why it matters to the upgrade.
        fix: what to do about it (empty for an info that needs nothing).
    """

    severity: Severity
    code: str
    what: str
    why: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class MigrationFacts:
    """Everything the checker looks at, gathered from the cluster (or written by a test).

    Attributes:
        group_id: the group to migrate.
        group: its description; None when the coordinator knows no such group.
        broker: the coordinator's API versions and feature levels.
        broker_configs: the coordinator's values of :data:`BROKER_KEYS` (a key
            that could not be read is absent).
        group_configs: the group's own overrides (``consumer.session.timeout.ms`` ...).
        topics: the cluster's topic names (internal topics excluded).
        regexes: the regexes the members subscribe with (a classic group's
            description lists only the topics they resolved to).
        remote_assignor: the ``group.remote.assignor`` the members will set;
            None for the broker's default.
        unavailable: facts that could not be read, each with the reason.
    """

    group_id: str
    group: GroupDescription | None
    broker: BrokerInfo
    broker_configs: Mapping[str, str | None] = field(default_factory=frozen_map)
    group_configs: Mapping[str, str | None] = field(default_factory=frozen_map)
    topics: frozenset[str] = frozenset()
    regexes: tuple[str, ...] = ()
    remote_assignor: str | None = None
    unavailable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """The findings of :func:`check_migration`, blockers first."""

    group_id: str
    findings: tuple[Finding, ...]

    def of(self, severity: Severity) -> tuple[Finding, ...]:
        """The findings of one severity."""
        return tuple(f for f in self.findings if f.severity is severity)

    @property
    def safe(self) -> bool:
        """Whether nothing blocks the roll (warnings may remain)."""
        return not self.of(Severity.BLOCKER)

    def codes(self) -> frozenset[str]:
        """The codes of every finding."""
        return frozenset(f.code for f in self.findings)


@dataclass(frozen=True, slots=True)
class MemberStep:
    """One member to restart with new settings, in rolling order.

    Attributes:
        order: its place in the roll (1 first).
        member_id: its current member id.
        instance_id: its ``group.instance.id`` (keep it), or None.
        client_id: its ``client.id``, to find the process.
        client_host: where it runs.
        partitions: how many partitions it owns now.
    """

    order: int
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    partitions: int


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """How to roll a group to the consumer protocol.

    Attributes:
        group_id: the group.
        steps: the classic members in the order to restart them.
        set_keys: the settings every restarted member needs.
        remove_keys: the settings to delete from every restarted member.
        subscription_changes: regex rewrites (old pattern to new pattern).
        notes: what to watch between steps, and how to roll back.
        blocked: whether the check found blockers (resolve them first).
    """

    group_id: str
    steps: tuple[MemberStep, ...]
    set_keys: Mapping[str, str]
    remove_keys: tuple[str, ...]
    subscription_changes: Mapping[str, str] = field(default_factory=frozen_map)
    notes: tuple[str, ...] = ()
    blocked: bool = False


# ------------------------------------------------------------------ helpers


def remote_assignors(value: str | None) -> tuple[str, ...]:
    """The server-side assignor names in a ``group.consumer.assignors`` value, in order.

    The value lists names (``uniform,range``) or, on older brokers, class names
    (``org.apache.kafka.coordinator.group.assignor.UniformAssignor``), which read
    as the assignor's name (``uniform``). None (the value could not be read)
    reads as Kafka's default, uniform then range.
    """
    if value is None:
        return _DEFAULT_ASSIGNORS
    names: list[str] = []
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            continue
        if "." in item:
            simple = item.rsplit(".", 1)[1]
            item = (
                simple.removesuffix("Assignor").lower() if simple.endswith("Assignor") else simple
            )
        names.append(item)
    return tuple(names)


def _policy(facts: MigrationFacts) -> str | None:
    value = facts.broker_configs.get(MIGRATION_POLICY)
    return None if value is None else value.strip().lower()


def _members_text(members: Iterable[MemberDescription], limit: int = 5) -> str:
    names = [m.instance_id or m.member_id for m in members]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _is_classic_to_upgrade(group: GroupDescription | None) -> bool:
    """A non-empty classic group: the upgrade rules apply to it."""
    return group is not None and group.group_type is GroupType.CLASSIC and not group.is_empty


def _chosen_remote(facts: MigrationFacts) -> str:
    """The server-side assignor the roll will use: the one asked for, else the
    broker's default (the first of ``group.consumer.assignors``)."""
    if facts.remote_assignor:
        return facts.remote_assignor
    available = remote_assignors(facts.broker_configs.get(CONSUMER_ASSIGNORS))
    return available[0] if available else _DEFAULT_ASSIGNORS[0]


def _suggested_remote(facts: MigrationFacts) -> str:
    """The ``group.remote.assignor`` to recommend: the one asked for; range for a group
    on classic range (closest layout); else the broker's default."""
    if facts.remote_assignor:
        return facts.remote_assignor
    available = remote_assignors(facts.broker_configs.get(CONSUMER_ASSIGNORS))
    group = facts.group
    if group is not None and group.assignor == "range" and "range" in available:
        return "range"
    return available[0] if available else _DEFAULT_ASSIGNORS[0]


# ------------------------------------------------------------------- checks


def _check_unavailable(facts: MigrationFacts) -> list[Finding]:
    return [
        Finding(
            Severity.WARNING,
            "fact-unavailable",
            f"Could not read: {reason}.",
            "The checks that depend on it assume Kafka's defaults, which may not be this "
            "cluster's settings.",
            "Run the check with a principal allowed to describe the cluster and the group "
            "(DescribeConfigs on the cluster, Describe on the group).",
        )
        for reason in facts.unavailable
    ]


def _check_broker(facts: MigrationFacts) -> list[Finding]:
    broker = facts.broker
    node = f"node {broker.node.node_id}"
    heartbeat = broker.api_range(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    if heartbeat is None:
        return [
            Finding(
                Severity.BLOCKER,
                "consumer-protocol-unsupported",
                f"The group's coordinator ({node}) does not support ConsumerGroupHeartbeat.",
                "The consumer protocol (KIP-848) needs Apache Kafka 4.0 or newer; this broker "
                "is older, or the consumer protocol is switched off.",
                "Upgrade the brokers to Kafka 4.x (and make sure group.version is 1 or more) "
                "before rolling any member.",
            )
        ]
    findings: list[Finding] = []
    level = broker.feature_level(GROUP_VERSION)
    knows_feature = GROUP_VERSION in broker.supported_features or GROUP_VERSION in (
        broker.finalized_features
    )
    if knows_feature and level < 1:
        findings.append(
            Finding(
                Severity.BLOCKER,
                "group-version-disabled",
                f"The cluster's finalized group.version is {level}.",
                "group.version 1 is what enables the consumer protocol on Kafka 4.x brokers; "
                "at 0 every ConsumerGroupHeartbeat is refused with UNSUPPORTED_VERSION.",
                "Enable it: kafka-features.sh --bootstrap-server HOST:PORT upgrade "
                "--feature group.version=1",
            )
        )
    protocols = facts.broker_configs.get(REBALANCE_PROTOCOLS)
    if protocols is not None and "consumer" not in {
        p.strip().lower() for p in protocols.split(",")
    }:
        findings.append(
            Finding(
                Severity.BLOCKER,
                "consumer-protocol-not-enabled",
                f"{REBALANCE_PROTOCOLS} is {protocols!r} on {node}.",
                "Without 'consumer' in that list the coordinator refuses consumer-protocol "
                "members.",
                f"Add consumer to {REBALANCE_PROTOCOLS} on every broker and restart them.",
            )
        )
    if heartbeat.max < 1:
        findings.append(
            Finding(
                Severity.WARNING,
                "early-access-broker",
                f"{node} supports ConsumerGroupHeartbeat only up to v{heartbeat.max}.",
                "Brokers before Kafka 4.0 ran the consumer protocol as early access: no "
                "client-chosen member ids, and the migration fixes of 4.x (KAFKA-18134, "
                "KAFKA-19546, KAFKA-20273) are missing.",
                "Upgrade the brokers to Kafka 4.x before migrating production groups.",
            )
        )
    if not findings:
        findings.append(
            Finding(
                Severity.INFO,
                "broker-ready",
                f"The coordinator ({node}) speaks ConsumerGroupHeartbeat v{heartbeat.min}-"
                f"v{heartbeat.max}; group.version is {level if knows_feature else 'not used'}.",
                "The brokers accept consumer-protocol members.",
            )
        )
    return findings


def _check_policy(facts: MigrationFacts) -> list[Finding]:
    policy = _policy(facts)
    shown = policy if policy is not None else f"unknown (assumed {_DEFAULT_POLICY})"
    effective = policy if policy is not None else _DEFAULT_POLICY
    group = facts.group
    if group is None or group.is_empty:
        return [
            Finding(
                Severity.INFO,
                "empty-group-converts",
                f"The group has no members; {MIGRATION_POLICY} is {shown}.",
                "The migration policy governs non-empty groups only: an empty group (its "
                "committed offsets included) converts to whichever protocol the first member "
                "speaks.",
            )
        ]
    findings: list[Finding] = []
    if effective not in _KNOWN_POLICIES:
        findings.append(
            Finding(
                Severity.BLOCKER,
                "unknown-migration-policy",
                f"{MIGRATION_POLICY} is {policy!r}, not a value Kafka knows.",
                "The coordinator treats an unknown policy as disabled: it refuses to convert a "
                "non-empty group either way.",
                f"Set {MIGRATION_POLICY}=bidirectional (or upgrade) on every broker.",
            )
        )
        return findings
    if group.group_type is GroupType.CLASSIC:
        if effective in _UPGRADE_POLICIES:
            findings.append(
                Finding(
                    Severity.INFO,
                    "policy-allows-upgrade",
                    f"{MIGRATION_POLICY} is {shown}.",
                    "The first consumer-protocol member converts the group online.",
                )
            )
        else:
            findings.append(
                Finding(
                    Severity.BLOCKER,
                    "upgrade-refused-by-policy",
                    f"{MIGRATION_POLICY} is {effective} on the coordinator.",
                    "The coordinator refuses the first consumer-protocol heartbeat of a "
                    "non-empty classic group with GROUP_ID_NOT_FOUND; a rolled member cannot "
                    "join.",
                    f"Set {MIGRATION_POLICY}=bidirectional (or upgrade) on every broker, or "
                    "migrate offline: stop every member, then start them all on the consumer "
                    "protocol (an empty group converts under any policy).",
                )
            )
    elif effective == "disabled" and group.classic_members:
        findings.append(
            Finding(
                Severity.WARNING,
                "classic-joins-refused",
                f"{MIGRATION_POLICY} is disabled and the consumer group still has classic members.",
                "With the policy disabled, a classic member that restarts cannot rejoin the "
                "consumer group (KAFKA-20640).",
                "Roll the remaining classic members to the consumer protocol without restarting "
                "them as classic members.",
            )
        )
    if effective not in _DOWNGRADE_POLICIES:
        findings.append(
            Finding(
                Severity.WARNING,
                "rollback-offline-only",
                f"{MIGRATION_POLICY} is {effective}: online downgrades are refused.",
                "Rolling back by restarting members as classic ones will not convert the group "
                "back while consumer-protocol members remain; the classic members join the "
                "consumer group instead, and after the last consumer-protocol member leaves "
                "the group stays a consumer group.",
                "Plan a rollback as an offline one (stop every member, start them as classic), "
                f"or set {MIGRATION_POLICY}=bidirectional.",
            )
        )
    return findings


def _check_group(facts: MigrationFacts) -> list[Finding]:
    group = facts.group
    if group is None:
        return [
            Finding(
                Severity.WARNING,
                "group-not-found",
                f"The coordinator knows no group {facts.group_id!r}.",
                "Members on the consumer protocol would start a new, empty group: without "
                "committed offsets they begin at auto.offset.reset.",
                "Check the group id with `kgroup groups list`.",
            )
        ]
    if group.group_type is GroupType.CONSUMER:
        classic = group.classic_members
        text = (
            f"{len(classic)} classic member(s) remain: {_members_text(classic)}"
            if classic
            else "every member speaks the consumer protocol"
        )
        return [
            Finding(
                Severity.INFO,
                "already-consumer-group",
                f"The group is already a consumer group (epoch {group.group_epoch}); {text}.",
                "An earlier consumer-protocol member converted it; classic members take part "
                "as followers of the coordinator's assignment.",
                "Roll the remaining classic members (`kgroup migrate plan`)." if classic else "",
            )
        ]
    if group.group_type is not GroupType.CLASSIC:
        return [
            Finding(
                Severity.BLOCKER,
                "not-a-classic-group",
                f"The group is a {group.group_type.value} group.",
                "Only classic consumer groups migrate to the consumer protocol.",
                "Use another group id for consumers.",
            )
        ]
    if group.is_empty:
        return []
    findings: list[Finding] = []
    if group.protocol_type != "consumer":
        findings.append(
            Finding(
                Severity.BLOCKER,
                "not-a-consumer-protocol-group",
                f"The group's protocol type is {group.protocol_type!r}, not 'consumer'.",
                "The coordinator converts only groups of consumers (Kafka Connect workers and "
                "other classic users have their own protocol types); it refuses with "
                "GROUP_ID_NOT_FOUND.",
                "Do not migrate this group; it is not a consumer group.",
            )
        )
        return findings
    max_size = facts.broker_configs.get(CONSUMER_MAX_SIZE)
    if max_size is not None and max_size.strip().isdigit() and len(group.members) > int(max_size):
        findings.append(
            Finding(
                Severity.BLOCKER,
                "group-too-large",
                f"The group has {len(group.members)} members; {CONSUMER_MAX_SIZE} is {max_size}.",
                "The coordinator refuses to convert a classic group larger than the consumer "
                "group maximum.",
                f"Raise {CONSUMER_MAX_SIZE} on every broker to at least {len(group.members)}, "
                "or shrink the group before the roll.",
            )
        )
    if group.state != "Stable":
        findings.append(
            Finding(
                Severity.WARNING,
                "group-rebalancing",
                f"The group is {group.state}, not Stable.",
                "While it rebalances the broker describes neither the assignor nor the "
                "members' assignments, so the assignor and user-data checks are skipped; "
                "rolling during a rebalance adds another one.",
                "Run the check again once the group is Stable.",
            )
        )
    broken = [m for m in group.members if m.payload_error is not None]
    if broken:
        findings.append(
            Finding(
                Severity.BLOCKER,
                "undecodable-payload",
                f"The embedded subscription or assignment of {_members_text(broken)} does not "
                f"parse: {broken[0].payload_error}.",
                "The coordinator refuses to convert a group whose embedded consumer protocol is "
                "malformed.",
                "Find the client that writes these bytes (client id "
                f"{broken[0].client_id!r}) and replace it with a standard Kafka consumer.",
            )
        )
    with_data = [m for m in group.members if m.assignment_user_data]
    if with_data:
        findings.append(
            Finding(
                Severity.BLOCKER,
                "custom-assignor-user-data",
                f"The assignments of {_members_text(with_data)} carry assignor user data "
                f"(assignor {group.assignor!r}).",
                "Kafka refuses to convert a group whose assignments carry user data "
                "(KAFKA-18134): a custom assignor's state has no place in the consumer "
                "protocol, where the broker assigns. The first rolled member would get "
                "GROUP_ID_NOT_FOUND.",
                "First roll every member to a built-in assignor that sends no assignment user "
                "data (partition.assignment.strategy=cooperative-sticky, or range), keeping "
                "the classic protocol; check again; then roll to the consumer protocol. Or "
                "migrate offline: stop every member, start them on the consumer protocol.",
            )
        )
    return findings


def _check_static(facts: MigrationFacts) -> list[Finding]:
    group = facts.group
    if group is None:
        return []
    static = [m for m in group.classic_members if m.is_static]
    if not static:
        return []
    timeout = facts.group_configs.get(GROUP_SESSION_TIMEOUT) or facts.broker_configs.get(
        CONSUMER_SESSION_TIMEOUT
    )
    within = f" ({timeout} ms here)" if timeout else ""
    return [
        Finding(
            Severity.WARNING,
            "static-members",
            f"{len(static)} static member(s): {_members_text(static)}.",
            "A static member keeps its partitions across a restart only within the broker's "
            f"consumer session timeout{within}, not its own session.timeout.ms. On the consumer "
            "protocol a second member with the same group.instance.id is refused "
            "(UNRELEASED_INSTANCE_ID) instead of fencing the old one, and a static classic "
            "member that replaces the last consumer-protocol member converts the group back.",
            "Restart each static member in place with the same group.instance.id: stop the "
            "old process before starting the new one, and keep the restart shorter than the "
            "session timeout.",
        )
    ]


def _check_assignor(facts: MigrationFacts) -> list[Finding]:
    available = remote_assignors(facts.broker_configs.get(CONSUMER_ASSIGNORS))
    chosen = _chosen_remote(facts)
    findings: list[Finding] = []
    if chosen not in available:
        findings.append(
            Finding(
                Severity.BLOCKER,
                "unknown-remote-assignor",
                f"group.remote.assignor={chosen} is not one of the broker's assignors "
                f"({', '.join(available)}).",
                "The coordinator refuses a heartbeat naming an assignor it does not have "
                "(UNSUPPORTED_ASSIGNOR).",
                f"Use one of {', '.join(available)}, or leave group.remote.assignor unset.",
            )
        )
        return findings
    group = facts.group
    if group is None or group.group_type is not GroupType.CLASSIC or group.is_empty:
        return findings
    classic = group.assignor
    if group.state != "Stable" or not classic:
        # A classic group describes its assignor only while Stable (Kafka's ClassicGroup
        # summary): mid-rebalance the name is empty, and judging '' as a custom assignor
        # would be a false warning. group-rebalancing already asks for a second run.
        return findings
    how = _assignment_movement(classic, chosen)
    if classic not in _BUILTIN_CLASSIC:
        findings.append(
            Finding(
                Severity.WARNING,
                "custom-classic-assignor",
                f"The group uses the assignor {classic!r}, which has no server-side counterpart.",
                "On the consumer protocol the broker assigns with its own assignor "
                f"({chosen}); the custom assignment logic stops applying when the group "
                "converts.",
                "Check that the application does not depend on the custom layout (co-location, "
                "capacity weights ...) before rolling.",
            )
        )
    else:
        findings.append(
            Finding(
                Severity.INFO,
                "assignment-movement",
                f"Classic assignor {classic!r} gives way to the broker's {chosen!r}.",
                how,
                ""
                if chosen == _suggested_remote(facts)
                else f"Consider group.remote.assignor={_suggested_remote(facts)}.",
            )
        )
    if classic in _EAGER_ASSIGNORS:
        findings.append(
            Finding(
                Severity.INFO,
                "eager-classic-members",
                f"The classic members use the eager assignor {classic!r}.",
                "Until it is rolled, each eager member gives up all its partitions whenever the "
                "coordinator asks it to rejoin, so its partitions pause at every step of the "
                "roll.",
            )
        )
    return findings


def _assignment_movement(classic: str, remote: str) -> str:
    if remote == "uniform":
        if classic in _STICKY_ASSIGNORS:
            return (
                "uniform is sticky and balanced like the classic sticky assignors: the members' "
                "current assignments become the starting target, and partitions move only to "
                "rebalance."
            )
        return (
            "uniform balances partitions across all members and topics and then keeps them in "
            "place; coming from a per-topic layout (range) or round robin, expect some "
            "partitions to move at the first rebalance after the conversion."
        )
    if remote == "range":
        if classic == "range":
            return (
                "The server-side range assignor lays partitions out per topic as classic range "
                "does; partitions move only where the member order changes (new member ids)."
            )
        return (
            "range lays partitions out per topic in member order, ignoring current owners: "
            "expect many partitions to move at the first rebalance after the conversion."
        )
    return (
        f"The broker's {remote} assignor computes the target from the current assignment; how "
        "much moves depends on that assignor."
    )


@dataclass(frozen=True, slots=True)
class _RegexEffect:
    verdict: RegexVerdict
    dropped: frozenset[str]
    added: frozenset[str]


def _regex_effect(facts: MigrationFacts, pattern: str) -> _RegexEffect:
    """What rolling changes for a regex subscription: topics consumed now that the
    broker's full match drops, and topics it adds."""
    verdict = evaluate_regex(pattern, facts.topics)
    group = facts.group
    if group is not None and group.members:
        # What the members consume now, among the topics this regex can have given them
        # (a partial match is the widest rule any classic client used).
        current = frozenset(t for m in group.members for t in m.subscribed_topics)
        before = current & verdict.partial_match
    else:
        # Nobody to ask: judge against what a partial-matching classic client resolves.
        before = verdict.partial_match
    return _RegexEffect(verdict, before - verdict.full_match, verdict.full_match - before)


def _check_regexes(facts: MigrationFacts) -> list[Finding]:
    findings: list[Finding] = []
    group = facts.group
    for pattern in facts.regexes:
        effect = _regex_effect(facts, pattern)
        verdict, dropped, added = effect.verdict, effect.dropped, effect.added
        if verdict.error is not None:
            findings.append(
                Finding(
                    Severity.BLOCKER,
                    "regex-rejected",
                    f"RE2 refuses the subscription regex {pattern!r}: {verdict.error}.",
                    "The broker compiles consumer-protocol regexes with RE2/J, which has no "
                    "lookaround or backreferences; the heartbeat is refused with "
                    "INVALID_REGULAR_EXPRESSION.",
                    "Rewrite the regex in RE2 syntax (https://github.com/google/re2/wiki/Syntax).",
                )
            )
            continue
        fix = (
            f"Subscribe with {verdict.suggestion!r}, which matches the same topics in full."
            if verdict.suggestion
            else "Anchor the regex so that it matches whole topic names (add .* where a "
            "prefix or suffix was meant)."
        )
        if dropped:
            findings.append(
                Finding(
                    Severity.BLOCKER,
                    "regex-drops-topics",
                    f"Under the consumer protocol {pattern!r} no longer matches "
                    f"{', '.join(sorted(dropped))}.",
                    "The broker matches a regex against whole topic names (RE2/J full match); "
                    "classic clients such as librdkafka matched it anywhere in the name. Those "
                    "topics would stop being consumed.",
                    fix,
                )
            )
        if added:
            findings.append(
                Finding(
                    Severity.WARNING,
                    "regex-adds-topics",
                    f"Under the consumer protocol {pattern!r} also matches "
                    f"{', '.join(sorted(added))}, which the members do not consume now.",
                    "The broker resolves the regex against every topic of the cluster, including "
                    "topics the classic members had not picked up.",
                    "Narrow the regex if those topics are not meant to be consumed.",
                )
            )
        if not dropped and not added:
            findings.append(
                Finding(
                    Severity.INFO,
                    "regex-same-topics",
                    f"{pattern!r} matches the same {len(verdict.full_match)} topic(s) under the "
                    "consumer protocol.",
                    "RE2 accepts it and full matching picks the topics the members consume now.",
                )
            )
    if group is not None:
        for member in group.consumer_members:
            if member.subscribed_regex is not None:
                findings.append(
                    Finding(
                        Severity.INFO,
                        "consumer-member-regex",
                        f"Consumer-protocol member {member.member_id} subscribes with "
                        f"{member.subscribed_regex!r} (accepted by the broker).",
                        "The broker resolves it in full-match mode.",
                    )
                )
    return findings


def _check_timeouts(facts: MigrationFacts) -> list[Finding]:
    session = facts.group_configs.get(GROUP_SESSION_TIMEOUT) or facts.broker_configs.get(
        CONSUMER_SESSION_TIMEOUT
    )
    interval = facts.group_configs.get(GROUP_HEARTBEAT_INTERVAL) or facts.broker_configs.get(
        CONSUMER_HEARTBEAT_INTERVAL
    )
    if session is None and interval is None:
        return []
    return [
        Finding(
            Severity.INFO,
            "broker-side-timeouts",
            f"Consumer-protocol members get session timeout {session or '?'} ms and heartbeat "
            f"interval {interval or '?'} ms from the broker.",
            "Under the consumer protocol the coordinator sets both (group config "
            f"{GROUP_SESSION_TIMEOUT}, else broker {CONSUMER_SESSION_TIMEOUT}); the members' "
            "session.timeout.ms and heartbeat.interval.ms no longer apply.",
            "Remove session.timeout.ms and heartbeat.interval.ms from the members' settings.",
        )
    ]


_CHECKS: Final = (
    _check_unavailable,
    _check_broker,
    _check_group,
    _check_policy,
    _check_assignor,
    _check_static,
    _check_regexes,
    _check_timeouts,
)


def check_migration(facts: MigrationFacts) -> MigrationReport:
    """Every finding about rolling ``facts.group_id`` to the consumer protocol, blockers first."""
    findings = [finding for check in _CHECKS for finding in check(facts)]
    # A group that cannot be converted at all makes the remaining group checks moot,
    # but they still say what else to fix, so all are kept; order by severity only.
    findings.sort(key=lambda f: _ORDER[f.severity])
    return MigrationReport(facts.group_id, tuple(findings))


# ------------------------------------------------------------------- plan


def plan_migration(facts: MigrationFacts, report: MigrationReport | None = None) -> MigrationPlan:
    """The rolling order and the settings each member needs.

    Classic members are restarted one at a time, those owning the fewest
    partitions first (the smallest hand-over while the conversion is new), static
    members keeping their ``group.instance.id``. ``report`` (default: checked
    now) marks the plan blocked when it has blockers.
    """
    checked = report if report is not None else check_migration(facts)
    group = facts.group
    classic = [] if group is None else list(group.classic_members)
    classic.sort(key=lambda m: (len(m.assignment), m.client_host, m.client_id, m.member_id))
    steps = tuple(
        MemberStep(
            order=i,
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            partitions=len(m.assignment),
        )
        for i, m in enumerate(classic, start=1)
    )
    set_keys = {"group.protocol": "consumer", "group.remote.assignor": _suggested_remote(facts)}
    changes: dict[str, str] = {}
    for pattern in facts.regexes:
        effect = _regex_effect(facts, pattern)
        if effect.dropped and effect.verdict.suggestion is not None:
            changes[pattern] = effect.verdict.suggestion
    notes = [
        "Every member must use the same group.remote.assignor (or leave it unset).",
        "Keep group.instance.id on static members; stop the old process before starting "
        "the new one.",
        "After each restart wait until `kgroup groups describe "
        f"{facts.group_id}` shows the member with protocol consumer, the group Stable and "
        "every partition owned, and `kgroup groups lag` is not growing; then roll the next.",
        "The first restarted member converts the group; classic members then follow the "
        "coordinator's assignment until they are rolled.",
        "To roll back, restart members with group.protocol=classic and their old "
        "partition.assignment.strategy (one classic assignor name shared by all); when the "
        "last consumer-protocol member leaves, the group converts back (policy "
        "bidirectional or downgrade).",
    ]
    return MigrationPlan(
        group_id=facts.group_id,
        steps=steps,
        set_keys=frozen_map(set_keys),
        remove_keys=CLASSIC_ONLY_KEYS,
        subscription_changes=frozen_map(changes),
        notes=tuple(notes),
        blocked=not checked.safe,
    )
