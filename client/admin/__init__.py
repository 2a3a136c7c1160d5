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

from typing import TYPE_CHECKING

from kgroup._lazy import lazy_attributes
from kgroup.admin import model
from kgroup.admin.model import *  # noqa: F403

if TYPE_CHECKING:
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

# What an attribute of the package comes from, imported on first use: the group
# look of an idle consumer (kgroup.runtime.group_look) reads describe_group_once,
# and importing every tool with it (the RE2 engine among them) cost the member
# 4 MiB of resident memory it never used.
_LAZY: dict[str, str] = {
    "BrokerFeatures": "kgroup.protocol.requests.broker_features",
    "ConfigEntry": "kgroup.protocol.requests.describe_configs",
    "ConfigResource": "kgroup.protocol.requests.describe_configs",
    "ConfigResourceType": "kgroup.protocol.requests.describe_configs",
    "ConfigSource": "kgroup.protocol.requests.describe_configs",
    "Finding": "kgroup.admin.migration",
    "IsolationLevel": "kgroup.protocol.requests.list_offsets",
    "MemberStep": "kgroup.admin.migration",
    "MigrationFacts": "kgroup.admin.migration",
    "MigrationPlan": "kgroup.admin.migration",
    "MigrationReport": "kgroup.admin.migration",
    "OffsetReset": "kgroup.admin.writes",
    "RegexVerdict": "kgroup.admin.regex",
    "ResetKind": "kgroup.admin.writes",
    "ResetTarget": "kgroup.admin.writes",
    "Severity": "kgroup.admin.migration",
    "alter_share_group_configs": "kgroup.admin.share",
    "broker_configs": "kgroup.admin.groups",
    "broker_info": "kgroup.admin.groups",
    "check_migration": "kgroup.admin.migration",
    "committed_offsets": "kgroup.admin.groups",
    "delete_groups": "kgroup.admin.writes",
    "delete_offsets": "kgroup.admin.writes",
    "describe_configs": "kgroup.admin.groups",
    "describe_group": "kgroup.admin.groups",
    "end_offsets": "kgroup.admin.groups",
    "evaluate_regex": "kgroup.admin.regex",
    "gather_migration_facts": "kgroup.admin.gather",
    "group_configs": "kgroup.admin.groups",
    "group_lag": "kgroup.admin.groups",
    "list_groups": "kgroup.admin.groups",
    "parse_duration": "kgroup.admin.writes",
    "plan_migration": "kgroup.admin.migration",
    "plan_offset_reset": "kgroup.admin.writes",
    "reset_offsets": "kgroup.admin.writes",
    "share_group_offsets": "kgroup.admin.share",
}


__getattr__ = lazy_attributes(globals(), _LAZY)


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
