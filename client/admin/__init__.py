"""Group tooling: read groups, lag, broker features and configs; check and plan a migration;
reset offsets, delete groups and offsets.

Async functions over an entered :class:`kgroup.transport.KafkaClient`, returning
frozen dataclasses (the ``kgroup groups`` and ``kgroup migrate`` commands are
built on them)::

    async with KafkaClient("localhost:9092") as client:
        for listing in await list_groups(client):
            print(listing.group_id, listing.group_type.value, listing.state)
        group = await describe_group(client, "orders")
        lag = await group_lag(client, "orders")
        queue = await share_group_offsets(client, "orders-queue")  # start offsets, lag
        facts = await gather_migration_facts(client, "orders", regexes=["^orders"])
        report = check_migration(facts)       # pure: findings, report.safe
        plan = plan_migration(facts, report)  # pure: rolling order, settings

Only :func:`reset_offsets`, :func:`delete_groups` and :func:`delete_offsets`
write offsets, and only to a group without live members (``kgroup groups
reset-offsets | delete | delete-offsets``); :func:`alter_share_group_configs`
writes a group's configs (``kgroup groups configure``); the rest never joins or commits.
"""

from kgroup.admin import model
from kgroup.admin.gather import gather_migration_facts
from kgroup.admin.groups import (
    broker_configs,
    broker_info,
    committed_offsets,
    describe_configs,
    describe_group,
    end_offsets,
    group_configs,
    group_lag,
    list_groups,
)
from kgroup.admin.migration import (
    Finding,
    MemberStep,
    MigrationFacts,
    MigrationPlan,
    MigrationReport,
    Severity,
    check_migration,
    plan_migration,
)
from kgroup.admin.model import *  # noqa: F403
from kgroup.admin.regex import RegexVerdict, evaluate_regex
from kgroup.admin.share import alter_share_group_configs, share_group_offsets
from kgroup.admin.writes import (
    OffsetReset,
    ResetKind,
    ResetTarget,
    delete_groups,
    delete_offsets,
    parse_duration,
    plan_offset_reset,
    reset_offsets,
)
from kgroup.protocol.requests.broker_features import BrokerFeatures
from kgroup.protocol.requests.describe_configs import (
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)
from kgroup.protocol.requests.list_offsets import IsolationLevel

__all__ = [
    "BrokerFeatures",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "Finding",
    "IsolationLevel",
    "MemberStep",
    "MigrationFacts",
    "MigrationPlan",
    "MigrationReport",
    "OffsetReset",
    "RegexVerdict",
    "ResetKind",
    "ResetTarget",
    "Severity",
    "alter_share_group_configs",
    "broker_configs",
    "broker_info",
    "check_migration",
    "committed_offsets",
    "delete_groups",
    "delete_offsets",
    "describe_configs",
    "describe_group",
    "end_offsets",
    "evaluate_regex",
    "gather_migration_facts",
    "group_configs",
    "group_lag",
    "list_groups",
    "parse_duration",
    "plan_migration",
    "plan_offset_reset",
    "reset_offsets",
    "share_group_offsets",
]
__all__ += model.__all__
