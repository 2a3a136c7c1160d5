"""``kgroup groups`` and ``kgroup migrate``: group tooling on the command line.

::

    kgroup groups list [--type TYPE ...] [--state STATE ...]
    kgroup groups describe (GROUP | --all-groups)
    kgroup groups lag (GROUP | --all-groups)
    kgroup groups reset-offsets GROUP (--topic T[:P,P...] ... | --all-topics) TARGET [--execute]
    kgroup groups delete GROUP ...
    kgroup groups delete-offsets GROUP --topic T[:P,P...] ...
    kgroup groups configure GROUP (--set KEY=VALUE | --delete KEY) ...
    kgroup migrate check GROUP [--regex PATTERN ...] [--remote-assignor NAME] [--strict]
    kgroup migrate plan GROUP [--regex PATTERN ...] [--remote-assignor NAME]

Each takes ``--bootstrap-servers`` (default ``$KAFKA_BOOTSTRAP_SERVERS``, else the
broker ``kgroup broker up`` started), ``--command-config FILE`` (a properties file
of security settings, as ``kafka-consumer-groups.sh`` takes) and ``--json`` for
scripts. ``describe``, ``lag`` and ``--all-groups`` cover share groups too (KIP-932:
members, start offset and lag per partition); ``configure`` sets a share group's
configs (``share.auto.offset.reset`` ...). ``migrate check`` exits 0 when nothing
blocks the roll (with ``--strict``: nothing to warn about either), 1 otherwise;
``migrate plan`` exits 1 when the check has blockers.
Connection and broker errors exit 2 (``kgroup.cli.main``).

The commands are built on :mod:`kgroup.admin`, imported when a command runs so
that ``kgroup --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import logging
import textwrap
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from kgroup.cli.common import EXIT_FAILED, load_command_config, resolve_bootstrap_servers
from kgroup.config_keys import CLIENT_ID
from kgroup.config_security import SecurityConfig
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.admin import (
        GroupDescription,
        GroupLag,
        GroupListing,
        MemberDescription,
        MigrationPlan,
        MigrationReport,
        ShareGroupOffsets,
    )
    from kgroup.admin.writes import OffsetReset
    from kgroup.transport import KafkaClient

__all__ = [
    "add_group_commands",
    "add_migrate_commands",
    "configure_changes",
    "describe_text",
    "format_assignment",
    "jsonable",
    "lag_text",
    "list_text",
    "parse_config_setting",
    "parse_topic_partitions",
    "plan_text",
    "report_text",
    "reset_text",
    "share_describe_text",
    "share_lag_text",
]

_T = TypeVar("_T")
_V = TypeVar("_V")

_OK = 0
_NOT_SAFE = 1
_FAILED = EXIT_FAILED
_WIDTH = 100
_GROUP_TYPES = ("classic", "consumer", "share", "streams")
# kgroup.admin.share.SHARE_GROUP_CONFIGS, spelled here so that `kgroup --help` does
# not import the admin layer (tests/unit checks the two agree).
_SHARE_KEYS = (
    "share.auto.offset.reset",
    "share.record.lock.duration.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.isolation.level",
    "share.delivery.count.limit",
    "share.partition.max.record.locks",
    "share.assignment.interval.ms",
    "share.renew.acknowledge.enable",
)
_ALL_GROUPS_AT_ONCE = 8
"""Groups ``--all-groups`` asks about at once: fast on a large cluster, gentle on it."""


# ------------------------------------------------------------------ plumbing


def _run(args: argparse.Namespace, work: Callable[[KafkaClient], Awaitable[_T]]) -> _T:
    # anyio and the transport (kio) load only when a command talks to a broker:
    # `kgroup --help` and the other commands stay fast.
    import anyio  # noqa: PLC0415

    from kgroup.transport import KafkaClient  # noqa: PLC0415

    settings: dict[str, str] = {}
    if getattr(args, "command_config", None):
        settings = load_command_config(args.command_config)
    servers = resolve_bootstrap_servers(args.bootstrap_servers or settings.get("bootstrap.servers"))
    # One validated security config, as a consumer builds it from the same keys.
    security = SecurityConfig.from_config(settings)
    if not getattr(args, "verbose", False):
        # Connection progress is not the answer; -v shows it.
        logging.getLogger("kgroup.transport").setLevel(logging.WARNING)

    async def main() -> _T:
        async with KafkaClient(
            servers,
            client_id=settings.get(CLIENT_ID.name, CLIENT_ID.default),
            request_timeout=args.timeout,
            security=security,
        ) as client:
            return await work(client)

    return anyio.run(main)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: dataclasses as objects, enums as their values, sets
    as sorted lists, partitions as ``{"topic", "partition"}``, bytes as hex."""
    if isinstance(value, TopicPartition):
        return {"topic": value.topic, "partition": value.partition}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        # Derived values a script wants without recomputing them.
        for name in ("lag", "safe", "total", "is_static"):
            attr = getattr(type(value), name, None)
            if isinstance(attr, property):
                out[name] = jsonable(getattr(value, name))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return [jsonable(v) for v in sorted(value)]
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _emit(args: argparse.Namespace, value: _V, text: Callable[[_V], str]) -> None:
    """Print ``value`` as JSON under ``--json``, else as the command's text rendering."""
    print(json.dumps(jsonable(value), indent=2, sort_keys=False) if args.json else text(value))


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    body = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(row[i]) for row in body) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in body
    )


def format_assignment(partitions: Iterable[TopicPartition]) -> str:
    """``orders:0,1,2 payments:3``: partitions grouped by topic, sorted; ``-`` for none."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return "-"
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items())


def _dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


# -------------------------------------------------------------- kgroup groups


def _groups_list(args: argparse.Namespace) -> int:
    from kgroup.admin import GroupType, list_groups  # noqa: PLC0415 - see the module doc

    types = [GroupType(t) for t in args.type or ()]
    listings: tuple[GroupListing, ...] = _run(
        args, lambda client: list_groups(client, types=types, states=args.state or ())
    )
    _emit(args, listings, list_text)
    return _OK


def list_text(listings: Sequence[GroupListing]) -> str:
    """Groups as ``kgroup groups list`` prints them: one row each, or ``no groups``."""
    if not listings:
        return "no groups"
    return _table(
        ("GROUP", "TYPE", "PROTOCOL-TYPE", "STATE", "COORDINATOR"),
        (
            (g.group_id, g.group_type.value, _dash(g.protocol_type), g.state, str(g.coordinator))
            for g in listings
        ),
    )


def describe_text(
    group: GroupDescription, unowned: Collection[TopicPartition] | None = None
) -> str:
    """A group as ``kgroup groups describe`` prints it: a summary, then a member table
    (with epochs and targets for a consumer group, assignor user data for a classic one).

    ``unowned``: partitions of the members' subscriptions that nobody holds in a
    settled group, shown as a warning (a stuck group: see docs/reliability.md).
    """
    lines = [
        f"Group {group.group_id}: {group.group_type.value} group, state {group.state}, "
        f"protocol type {_dash(group.protocol_type)}",
    ]
    if unowned:
        lines.append(
            f"  WARNING: {len(unowned)} partition(s) of the group's subscription owned by "
            f"nobody while the group is settled: {format_assignment(unowned)}. Nothing "
            "assigns them until a member joins or leaves; kgroup members rejoin to repair "
            "it (docs/reliability.md, 'Partitions owned by nobody')"
        )
    details = [f"assignor {_dash(group.assignor)}", f"coordinator {group.coordinator}"]
    if group.group_epoch is not None:
        details.insert(
            0, f"group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}"
        )
    lines.append("  " + ", ".join(details))
    consumer, classic = len(group.consumer_members), len(group.classic_members)
    lines.append(
        f"  {len(group.members)} member(s): {consumer} on the consumer protocol, {classic} classic"
    )
    if not group.members:
        return "\n".join(lines)
    lines.append("")
    # Both kinds share the identity columns; a consumer group adds epochs and targets,
    # a classic one the assignor's user data.
    headers: tuple[str, ...] = ("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "PROTOCOL")
    extra: Callable[[MemberDescription], tuple[str, ...]]
    if group.group_epoch is not None:
        headers += ("EPOCH", "ASSIGNMENT", "TARGET")

        def extra(m: MemberDescription) -> tuple[str, ...]:
            target = m.target_assignment
            return (
                _dash(m.member_epoch),
                format_assignment(m.assignment),
                "=" if target == m.assignment else format_assignment(target or ()),
            )
    else:
        headers += ("ASSIGNMENT", "USER-DATA")

        def extra(m: MemberDescription) -> tuple[str, ...]:
            user_data = m.assignment_user_data
            return (
                format_assignment(m.assignment),
                f"{len(user_data)} bytes" if user_data else "-",
            )

    rows = [
        (m.member_id, _dash(m.instance_id), m.client_id, m.client_host, m.protocol.value, *extra(m))
        for m in group.members
    ]
    lines.append(_table(headers, rows))
    regexes = [(m.member_id, m.subscribed_regex) for m in group.members if m.subscribed_regex]
    for member_id, regex in regexes:
        lines.append(f"  {member_id} subscribes to the regex {regex!r}")
    broken = [m for m in group.members if m.payload_error]
    for m in broken:
        lines.append(f"  {m.member_id}: undecodable embedded payload: {m.payload_error}")
    return "\n".join(lines)


async def _consumer_group_ids(client: KafkaClient) -> list[str]:
    """The ids ``--all-groups`` covers: consumer groups of either protocol, as
    kafka-consumer-groups.sh lists them, and share groups, as kafka-share-groups.sh
    does (not streams or Connect groups)."""
    from kgroup.admin import GroupType, list_groups  # noqa: PLC0415 - see the module doc

    return [
        g.group_id
        for g in await list_groups(client)
        if g.group_type in (GroupType.CONSUMER, GroupType.SHARE)
        or (g.group_type is GroupType.CLASSIC and g.protocol_type in ("consumer", ""))
    ]


async def _each_group(client: KafkaClient, work: Callable[[str], Awaitable[_T]]) -> list[_T]:
    """``work`` of every consumer and share group, in group id order, a few at a time.

    A group deleted between the listing and its turn is left out: it no longer exists.
    """
    import anyio  # noqa: PLC0415 - see the module doc

    from kgroup.errors import GroupIdNotFoundError  # noqa: PLC0415

    ids = await _consumer_group_ids(client)
    found: dict[str, _T] = {}
    limiter = anyio.CapacityLimiter(_ALL_GROUPS_AT_ONCE)

    async def one(group_id: str) -> None:
        async with limiter:
            with contextlib.suppress(GroupIdNotFoundError):
                found[group_id] = await work(group_id)

    async with anyio.create_task_group() as tasks:
        for group_id in ids:
            tasks.start_soon(one, group_id)
    return [found[g] for g in ids if g in found]


def _group_or_all(args: argparse.Namespace) -> None:
    if (args.group is None) == (not args.all_groups):
        from kgroup.errors import ConfigError  # noqa: PLC0415

        raise ConfigError("name a GROUP or pass --all-groups (one of the two)")


_Described: TypeAlias = (
    "tuple[GroupDescription, frozenset[TopicPartition] | None] | ShareGroupOffsets"
)
"""What describe found: a consumer or classic group with its unowned partitions, or a
share group with its start offsets and lag."""


def _groups_describe(args: argparse.Namespace) -> int:
    from kgroup.admin import GroupType, describe_group  # noqa: PLC0415 - see the module doc
    from kgroup.admin.share import share_group_offsets  # noqa: PLC0415

    _group_or_all(args)

    async def one(client: KafkaClient, group_id: str) -> _Described:
        group = await describe_group(client, group_id)
        if group.group_type is GroupType.SHARE:
            # A share group has no committed offsets to compare: its start offset and
            # lag per partition say where it stands, so describe shows them.
            return await share_group_offsets(client, group_id)
        topics = sorted({t for m in group.members for t in m.subscribed_topics})
        counts: dict[str, int] = {}
        if topics:
            meta = await client.metadata(topics)
            counts = {name: info.partition_count for name, info in meta.topics.items()}
        return group, group.unowned_partitions(counts)

    async def work(client: KafkaClient) -> list[_Described]:
        if args.all_groups:
            return await _each_group(client, lambda g: one(client, g))
        return [await one(client, args.group)]

    described = _run(args, work)

    def data(value: _Described) -> Any:
        if isinstance(value, tuple):
            group, unowned = value
            out = jsonable(group)
            assert isinstance(out, dict)
            out["unowned_partitions"] = None if unowned is None else jsonable(sorted(unowned))
            return out
        # A share group: the description's fields, then each partition's start offset
        # and lag (every member may fetch from any of its partitions: no owner column).
        out = jsonable(value.group)
        assert isinstance(out, dict)
        out["unowned_partitions"] = None
        out["partitions"] = jsonable(value.partitions)
        out["total_lag"] = value.total
        return out

    def text(value: _Described) -> str:
        if isinstance(value, tuple):
            return describe_text(*value)
        return share_describe_text(value)

    if args.json:
        values = [data(d) for d in described]
        print(json.dumps(values if args.all_groups else values[0], indent=2, sort_keys=False))
    elif args.all_groups and not described:
        print("no consumer or share groups")
    else:
        print("\n\n".join(text(d) for d in described))
    return _OK


def _share_partitions_table(offsets: ShareGroupOffsets) -> str:
    return _table(
        ("TOPIC", "PARTITION", "START-OFFSET", "LOG-END", "LAG"),
        (
            (
                p.partition.topic,
                str(p.partition.partition),
                _dash(p.start_offset),
                _dash(p.log_end),
                _dash(p.lag),
            )
            for p in offsets.partitions
        ),
    )


def share_describe_text(offsets: ShareGroupOffsets) -> str:
    """A share group as ``kgroup groups describe`` prints it: a summary, a member table
    (epoch, subscription, assignment), then each partition's start offset and lag."""
    group = offsets.group
    lines = [
        f"Group {group.group_id}: share group, state {group.state}",
        f"  group epoch {group.group_epoch}, assignment epoch {group.assignment_epoch}, "
        f"assignor {_dash(group.assignor)}, coordinator {group.coordinator}",
        f"  {len(group.members)} member(s), total lag {offsets.total}",
    ]
    if group.members:
        lines.append("")
        lines.append(
            _table(
                ("MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "SUBSCRIBED", "ASSIGNMENT"),
                (
                    (
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        _dash(m.member_epoch),
                        ",".join(sorted(m.subscribed_topics)) or "-",
                        format_assignment(m.assignment),
                    )
                    for m in group.members
                ),
            )
        )
    lines.append("")
    if offsets.partitions:
        lines.append(_share_partitions_table(offsets))
    else:
        lines.append("  no partition has share state yet (no member fetched)")
    return "\n".join(lines)


def share_lag_text(offsets: ShareGroupOffsets) -> str:
    """A share group's lag as ``kgroup groups lag`` prints it: a summary, then each
    partition's start offset, log end and lag."""
    group = offsets.group
    head = (
        f"Group {group.group_id}: share group, state {group.state}, "
        f"{len(group.members)} member(s), total lag {offsets.total}"
    )
    if not offsets.partitions:
        return head + "\n  no partition has share state yet (no member fetched)"
    return head + "\n\n" + _share_partitions_table(offsets)


def lag_text(lag: GroupLag) -> str:
    """A group's lag as ``kgroup groups lag`` prints it: a summary, then one row per partition."""
    group = lag.group
    head = (
        f"Group {group.group_id}: {group.group_type.value} group, state {group.state}, "
        f"{len(group.members)} member(s), total lag {lag.total}"
    )
    if not lag.partitions:
        return head + "\n  no partitions assigned and no offsets committed"
    rows = (
        (
            p.partition.topic,
            str(p.partition.partition),
            _dash(p.committed),
            _dash(p.log_end),
            _dash(p.lag),
            _dash(p.member_id),
            _dash(p.instance_id),
            _dash(p.client_id),
            _dash(p.client_host),
        )
        for p in lag.partitions
    )
    table = _table(
        (
            "TOPIC",
            "PARTITION",
            "COMMITTED",
            "LOG-END",
            "LAG",
            "MEMBER-ID",
            "INSTANCE-ID",
            "CLIENT-ID",
            "HOST",
        ),
        rows,
    )
    return head + "\n\n" + table


def _groups_lag(args: argparse.Namespace) -> int:
    from kgroup.admin import GroupType, describe_group, group_lag  # noqa: PLC0415
    from kgroup.admin.share import share_group_offsets  # noqa: PLC0415

    _group_or_all(args)

    async def one(client: KafkaClient, group_id: str) -> GroupLag | ShareGroupOffsets:
        # A share group has no committed offsets: its lag counts from its start offset.
        if (await describe_group(client, group_id)).group_type is GroupType.SHARE:
            return await share_group_offsets(client, group_id)
        return await group_lag(client, group_id)

    def text(lag: GroupLag | ShareGroupOffsets) -> str:
        from kgroup.admin import GroupLag  # noqa: PLC0415

        return lag_text(lag) if isinstance(lag, GroupLag) else share_lag_text(lag)

    if not args.all_groups:
        _emit(args, _run(args, lambda client: one(client, args.group)), text)
        return _OK
    lags: list[GroupLag | ShareGroupOffsets] = _run(
        args, lambda client: _each_group(client, lambda g: one(client, g))
    )
    if args.json:
        print(json.dumps(jsonable(lags), indent=2, sort_keys=False))
    else:
        print("\n\n".join(text(lag) for lag in lags) if lags else "no consumer or share groups")
    return _OK


# --------------------------------------------------------- groups that write


def parse_topic_partitions(text: str) -> tuple[str, tuple[int, ...]]:
    """argparse ``type=`` for ``--topic T[:P,P...]``: the topic and its partitions
    (empty: all of them)."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P..., got {text!r}")
    if not sep:
        return topic, ()
    try:
        partitions = tuple(sorted({int(p) for p in parts.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected TOPIC:P,P... with partition numbers, got {text!r}"
        ) from None
    if not partitions or min(partitions) < 0:
        raise argparse.ArgumentTypeError(f"expected partition numbers >= 0, got {text!r}")
    return topic, partitions


def _topics(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    topics: dict[str, tuple[int, ...]] = {}
    for topic, partitions in args.topic or ():
        # Two --topic options for one topic add up; one of them naming all wins.
        known = topics.get(topic)
        merged = (
            () if known == () or not partitions else tuple(sorted({*(known or ()), *partitions}))
        )
        topics[topic] = merged
    return topics


def _reset_target(args: argparse.Namespace) -> Any:
    import datetime  # noqa: PLC0415 - only this command needs it

    from kgroup.admin.writes import ResetKind, ResetTarget, parse_duration  # noqa: PLC0415
    from kgroup.errors import ConfigError  # noqa: PLC0415

    if args.to_earliest:
        return ResetTarget(ResetKind.EARLIEST)
    if args.to_latest:
        return ResetTarget(ResetKind.LATEST)
    if args.to_offset is not None:
        return ResetTarget(ResetKind.OFFSET, args.to_offset)
    if args.shift_by is not None:
        return ResetTarget(ResetKind.SHIFT, args.shift_by)
    if args.to_datetime is not None:
        try:
            when = datetime.datetime.fromisoformat(args.to_datetime)
        except ValueError:
            raise ConfigError(
                f"--to-datetime {args.to_datetime!r}: expected ISO-8601, such as "
                "2026-01-31T12:00:00Z or 2026-01-31T12:00:00+01:00"
            ) from None
        if when.tzinfo is None:
            # No zone given: UTC, so that the same command means the same time on every host.
            when = when.replace(tzinfo=datetime.UTC)
        return ResetTarget(ResetKind.TIMESTAMP, int(when.timestamp() * 1000))
    now = datetime.datetime.now(datetime.UTC)
    when = now - parse_duration(args.by_duration)
    return ResetTarget(ResetKind.TIMESTAMP, int(when.timestamp() * 1000))


def reset_text(group_id: str, plan: Sequence[OffsetReset], executed: bool) -> str:
    """A reset plan as ``kgroup groups reset-offsets`` prints it, with what was done."""
    if not plan:
        return f"Group {group_id}: no partition to reset"
    verdict = "reset" if executed else "dry run, nothing written (add --execute to reset)"
    table = _table(
        ("TOPIC", "PARTITION", "CURRENT", "NEW"),
        (
            (r.partition.topic, str(r.partition.partition), _dash(r.current), str(r.new))
            for r in plan
        ),
    )
    return f"Group {group_id}: {len(plan)} partition(s), {verdict}\n\n{table}"


def _groups_reset_offsets(args: argparse.Namespace) -> int:
    from kgroup.admin.writes import plan_offset_reset, reset_offsets  # noqa: PLC0415

    target = _reset_target(args)
    topics = None if args.all_topics else _topics(args)

    async def work(client: KafkaClient) -> tuple[OffsetReset, ...]:
        plan = await plan_offset_reset(client, args.group, target, topics)
        if args.execute:
            return await reset_offsets(client, args.group, plan)
        return plan

    plan = _run(args, work)
    if args.json:
        print(
            json.dumps(
                {"group_id": args.group, "executed": args.execute, "partitions": jsonable(plan)},
                indent=2,
            )
        )
    else:
        print(reset_text(args.group, plan, args.execute))
    return _OK


def _groups_delete(args: argparse.Namespace) -> int:
    from kgroup.admin.writes import delete_groups  # noqa: PLC0415 - see the module doc

    results = _run(args, lambda client: delete_groups(client, args.groups))
    if args.json:
        print(
            json.dumps(
                [
                    {"group_id": g, "deleted": e is None, "error": None if e is None else str(e)}
                    for g, e in results.items()
                ],
                indent=2,
            )
        )
    else:
        for group_id, error in results.items():
            print(f"{group_id}: " + ("deleted" if error is None else f"not deleted: {error}"))
    return _OK if all(e is None for e in results.values()) else _FAILED


def _groups_delete_offsets(args: argparse.Namespace) -> int:
    from kgroup.admin.writes import delete_offsets  # noqa: PLC0415 - see the module doc

    topics = _topics(args)

    async def work(client: KafkaClient) -> dict[TopicPartition, Any]:
        cluster = await client.metadata(sorted(topics))
        partitions = [
            TopicPartition(topic, p)
            for topic, ps in topics.items()
            if topic in cluster.topics
            for p in (ps or range(cluster.topics[topic].partition_count))
        ]
        missing = sorted(set(topics) - set(cluster.topics))
        if missing:
            from kgroup.errors import ConfigError  # noqa: PLC0415

            raise ConfigError(f"no such topic: {', '.join(missing)}")
        return await delete_offsets(client, args.group, partitions)

    results = _run(args, work)
    if args.json:
        print(
            json.dumps(
                [
                    {**jsonable(tp), "deleted": e is None, "error": None if e is None else str(e)}
                    for tp, e in sorted(results.items())
                ],
                indent=2,
            )
        )
    else:
        print(
            _table(
                ("TOPIC", "PARTITION", "RESULT"),
                (
                    (tp.topic, str(tp.partition), "deleted" if e is None else f"not deleted: {e}")
                    for tp, e in sorted(results.items())
                ),
            )
        )
    return _OK if all(e is None for e in results.values()) else _FAILED


def parse_config_setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as ``(KEY, VALUE)`` (argparse's type for ``--set``).

    Raises:
        argparse.ArgumentTypeError: no ``=``, or an empty key or value.
    """
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected KEY=VALUE, such as share.auto.offset.reset=earliest "
            "(use --delete KEY to go back to the broker's default)"
        )
    return key, value


def configure_changes(
    settings: Sequence[tuple[str, str]], deletions: Sequence[str]
) -> dict[str, str | None]:
    """The changes ``--set`` and ``--delete`` ask for, in order (None: delete).

    Raises:
        ConfigError: nothing to change, or a key named twice.
    """
    from kgroup.errors import ConfigError  # noqa: PLC0415

    changes: dict[str, str | None] = {}
    for key, value in [*settings, *((k, None) for k in deletions)]:
        if key in changes:
            raise ConfigError(f"{key} is named twice: set or delete each key once")
        changes[key] = value
    if not changes:
        raise ConfigError("nothing to change: pass --set KEY=VALUE or --delete KEY")
    return changes


def _groups_configure(args: argparse.Namespace) -> int:
    from kgroup.admin.share import alter_share_group_configs  # noqa: PLC0415

    changes = configure_changes(args.set or (), args.delete or ())

    async def work(client: KafkaClient) -> None:
        await alter_share_group_configs(client, args.group, changes)

    _run(args, work)
    if args.json:
        print(json.dumps({"group_id": args.group, "changes": changes}, indent=2))
    else:
        for key, value in changes.items():
            done = f"set {key}={value}" if value is not None else f"deleted {key} (broker default)"
            print(f"Group {args.group}: {done}")
    return _OK


# ------------------------------------------------------------- kgroup migrate


def _gather(args: argparse.Namespace) -> Any:
    from kgroup.admin import gather_migration_facts  # noqa: PLC0415 - see the module doc

    return _run(
        args,
        lambda client: gather_migration_facts(
            client,
            args.group,
            regexes=tuple(args.regex or ()),
            remote_assignor=args.remote_assignor,
        ),
    )


def _wrap(label: str, text: str) -> list[str]:
    return textwrap.wrap(
        text, width=_WIDTH, initial_indent=f"  {label:<5} ", subsequent_indent=" " * 8
    )


def report_text(report: MigrationReport) -> str:
    """The check's findings as text: a verdict line, then each finding, blockers first."""
    from kgroup.admin import Severity  # noqa: PLC0415 - see the module doc

    counts = ", ".join(
        f"{len(report.of(s))} {s.value}"
        + ("s" if len(report.of(s)) != 1 and s is not Severity.INFO else "")
        for s in Severity
    )
    verdict = "safe to roll" if report.safe else "NOT safe to roll"
    lines = [
        f"Migration check of group {report.group_id} to the consumer protocol: {verdict} ({counts})"
    ]
    for finding in report.findings:
        lines.append("")
        lines.append(f"[{finding.severity.value.upper()}] {finding.code}")
        lines.extend(_wrap("what:", finding.what))
        lines.extend(_wrap("why:", finding.why))
        if finding.fix:
            lines.extend(_wrap("fix:", finding.fix))
    return "\n".join(lines)


def _migrate_check(args: argparse.Namespace) -> int:
    from kgroup.admin import Severity, check_migration  # noqa: PLC0415 - see the module doc

    report = check_migration(_gather(args))
    _emit(args, report, report_text)
    if not report.safe or (args.strict and report.of(Severity.WARNING)):
        return _NOT_SAFE
    return _OK


def plan_text(plan: MigrationPlan) -> str:
    """The rolling plan as text: warnings, settings, order, what to watch."""
    lines = [
        f"Rolling plan for group {plan.group_id}: {len(plan.steps)} classic member(s) to "
        "restart on the consumer protocol"
    ]
    if plan.blocked:
        lines.append(
            f"!! The check found blockers: run `kgroup migrate check {plan.group_id}` and "
            "resolve them before rolling."
        )
    lines.append("")
    lines.append("Settings for every restarted member:")
    lines.extend(f"  set     {k}={v}" for k, v in plan.set_keys.items())
    lines.extend(f"  remove  {k}" for k in plan.remove_keys)
    for old, new in plan.subscription_changes.items():
        lines.append(f"  subscribe with {new!r} instead of {old!r}")
    lines.append("")
    if plan.steps:
        lines.append("Order (one at a time):")
        for step in plan.steps:
            who = f"instance {step.instance_id}, " if step.instance_id else ""
            lines.append(
                f"  {step.order}. {step.member_id} ({who}client {step.client_id} on "
                f"{step.client_host}, {step.partitions} partition(s))"
            )
    else:
        lines.append("No classic member to restart.")
    lines.append("")
    lines.append("Between steps and after:")
    for note in plan.notes:
        lines.extend(
            textwrap.wrap(note, width=_WIDTH, initial_indent="  - ", subsequent_indent="    ")
        )
    return "\n".join(lines)


def _migrate_plan(args: argparse.Namespace) -> int:
    from kgroup.admin import plan_migration  # noqa: PLC0415 - see the module doc

    plan = plan_migration(_gather(args))
    _emit(args, plan, plan_text)
    return _NOT_SAFE if plan.blocked else _OK


# ------------------------------------------------------------------- parsers


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        help="brokers to ask (default $KAFKA_BOOTSTRAP_SERVERS, else the `kgroup broker up` one)",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="properties file with security.protocol, ssl.*, sasl.* (as kafka-consumer-groups.sh)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per request (default 30)"
    )


def _group_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", nargs="?", help="the group id")
    parser.add_argument(
        "--all-groups",
        action="store_true",
        help="every consumer group of either protocol and every share group instead of "
        "one (JSON: a list)",
    )


def add_group_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kgroup groups``: list, describe, lag, reset-offsets, delete,
    delete-offsets, configure."""
    groups = subparsers.add_parser(
        "groups",
        help="list, describe and measure groups; reset their offsets, delete them",
        description="Inspect consumer groups of both protocols and, while they have no "
        "members, reset or delete their offsets, like kafka-consumer-groups.sh.",
    )
    commands = groups.add_subparsers(dest="groups_command", metavar="COMMAND", required=True)

    listing = commands.add_parser("list", help="every group: type, protocol type, state")
    listing.add_argument(
        "--type", action="append", choices=_GROUP_TYPES, help="only groups of this type"
    )
    listing.add_argument("--state", action="append", help="only groups in this state (Stable ...)")
    _common(listing)
    listing.set_defaults(func=_groups_list)

    describe = commands.add_parser(
        "describe",
        help="a group's state, epochs and members with their protocol and assignment",
    )
    _group_argument(describe)
    _common(describe)
    describe.set_defaults(func=_groups_describe)

    lag = commands.add_parser(
        "lag", help="committed offset, log end offset and lag of every partition of a group"
    )
    _group_argument(lag)
    _common(lag)
    lag.set_defaults(func=_groups_lag)

    reset = commands.add_parser(
        "reset-offsets",
        help="move a group's committed offsets (dry run unless --execute); the group must be empty",
        description="Plan, and with --execute commit, new offsets for a group, as "
        "kafka-consumer-groups.sh --reset-offsets. Refused while the group has live members.",
    )
    reset.add_argument("group", help="the group id")
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic",
        action="append",
        type=parse_topic_partitions,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    which.add_argument(
        "--all-topics", action="store_true", help="every partition the group has committed"
    )
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    to.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)"
    )
    to.add_argument(
        "--to-datetime",
        metavar="ISO-8601",
        help="the first offset at or after this time (UTC when no zone is given)",
    )
    to.add_argument(
        "--by-duration", metavar="DURATION", help="the first offset this long ago (PT1H, P1D)"
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the plan")
    _common(reset)
    reset.set_defaults(func=_groups_reset_offsets)

    delete = commands.add_parser(
        "delete", help="delete groups and their offsets (refused while a group has members)"
    )
    delete.add_argument("groups", nargs="+", metavar="GROUP", help="the group ids")
    _common(delete)
    delete.set_defaults(func=_groups_delete)

    delete_offsets = commands.add_parser(
        "delete-offsets",
        help="delete a group's committed offsets of some topics (refused for a topic "
        "a member subscribes to)",
    )
    delete_offsets.add_argument("group", help="the group id")
    delete_offsets.add_argument(
        "--topic",
        action="append",
        required=True,
        type=parse_topic_partitions,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    _common(delete_offsets)
    delete_offsets.set_defaults(func=_groups_delete_offsets)

    configure = commands.add_parser(
        "configure",
        help="set or delete a group's configs (share.auto.offset.reset=earliest ...)",
        description="Set group-level configs (KIP-848 / KIP-932) with IncrementalAlterConfigs, "
        "all at once or none, like kafka-configs.sh --entity-type groups --alter. A share "
        "group's keys: " + ", ".join(_SHARE_KEYS) + ". The broker refuses an unknown key "
        "or a value outside its bounds (exit 2, with its reason).",
    )
    configure.add_argument("group", help="the group id (it need not exist yet)")
    configure.add_argument(
        "--set",
        action="append",
        type=parse_config_setting,
        metavar="KEY=VALUE",
        help="set KEY to VALUE (repeatable)",
    )
    configure.add_argument(
        "--delete",
        action="append",
        metavar="KEY",
        help="remove the group's override of KEY: the broker's default applies (repeatable)",
    )
    _common(configure)
    configure.set_defaults(func=_groups_configure)


def add_migrate_commands(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register ``kgroup migrate check | plan``."""
    migrate = subparsers.add_parser(
        "migrate",
        help="check and plan moving a classic group to the consumer protocol",
        description="Pre-flight checks and a rolling plan for moving a classic consumer group "
        "to the consumer protocol (KIP-848) online. See docs/migration.md.",
    )
    commands = migrate.add_subparsers(dest="migrate_command", metavar="COMMAND", required=True)
    for name, func, text in (
        (
            "check",
            _migrate_check,
            "everything that would make the upgrade fail or behave "
            "differently (exit 0 only when it is safe)",
        ),
        ("plan", _migrate_plan, "the rolling order and the settings each member needs"),
    ):
        command = commands.add_parser(name, help=text, description=text[0].upper() + text[1:])
        command.add_argument("group", help="the group id")
        command.add_argument(
            "--regex",
            action="append",
            metavar="PATTERN",
            help="a regex the members subscribe with (repeatable): checked against RE2 and "
            "the cluster's topics",
        )
        command.add_argument(
            "--remote-assignor",
            metavar="NAME",
            help="the group.remote.assignor the members will use (default: the broker's)",
        )
        if name == "check":
            command.add_argument(
                "--strict", action="store_true", help="also exit 1 when there are warnings"
            )
        _common(command)
        command.set_defaults(func=func)
