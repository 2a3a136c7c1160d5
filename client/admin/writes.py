"""Changing groups: reset committed offsets, delete groups, delete committed offsets.

As ``kafka-consumer-groups.sh`` does, offsets are reset only while a group has
no member. The coordinator itself does not enforce it: Kafka 4.4 accepts an
admin's commit (no member id, epoch -1) into a Stable group of either type, and
the member's next commit silently overwrites the reset. So
:func:`reset_offsets` describes the group first and refuses before writing
anything.
"""

from __future__ import annotations

import datetime
import enum
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import anyio
from kio.schema.errors import ErrorCode

from kgroup.admin.groups import _with_coordinator, committed_offsets, describe_group
from kgroup.admin.model import GroupDescription
from kgroup.errors import (
    BrokerError,
    ConfigError,
    GroupIdNotFoundError,
    KafkaProtocolError,
    NonEmptyGroupError,
    broker_error,
    raise_for_error,
)
from kgroup.protocol.requests import delete_groups as delete_groups_request
from kgroup.protocol.requests import list_offsets, offset_commit
from kgroup.protocol.requests import offset_delete as offset_delete_request
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicPartition

__all__ = [
    "OffsetReset",
    "ResetKind",
    "ResetTarget",
    "delete_groups",
    "delete_offsets",
    "parse_duration",
    "plan_offset_reset",
    "reset_offsets",
]

# An admin's commit: no member, no epoch (the coordinator's "not a member" commit).
_ADMIN_MEMBER: Final = ""
_ADMIN_EPOCH: Final = -1


class ResetKind(enum.Enum):
    """Where ``reset-offsets`` moves each partition (kafka-consumer-groups.sh's options)."""

    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    SHIFT = "shift-by"
    TIMESTAMP = "to-datetime"
    """``value`` is milliseconds since the epoch (``--to-datetime`` and ``--by-duration``)."""


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """A reset: its kind and the number it needs (offset, shift, or timestamp in ms)."""

    kind: ResetKind
    value: int = 0


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """One partition of a reset plan.

    Attributes:
        partition: the partition.
        current: the group's committed offset, or None when it has none.
        new: the offset the reset commits, within the log's start and end.
    """

    partition: TopicPartition
    current: int | None
    new: int


_DURATION: Final = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> datetime.timedelta:
    """An ISO-8601 duration in days and time (``P1DT2H``, ``PT30M``, ``PT0.5S``), as
    ``--by-duration`` takes it (Java's ``Duration.parse``).

    Raises:
        ConfigError: ``text`` is not such a duration.
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(g) for g in ("days", "hours", "minutes", "seconds")):
        raise ConfigError(
            f"--by-duration {text!r}: expected an ISO-8601 duration such as PT1H, P1DT12H or PT30M"
        )
    delta = datetime.timedelta(
        days=int(match.group("days") or 0),
        hours=int(match.group("hours") or 0),
        minutes=int(match.group("minutes") or 0),
        seconds=float(match.group("seconds") or 0),
    )
    return -delta if match.group("sign") == "-" else delta


def _refuse_live_members(group_id: str, group: GroupDescription | None) -> None:
    if group is None or not group.members:
        return
    raise NonEmptyGroupError(
        int(ErrorCode.non_empty_group),
        "NON_EMPTY_GROUP",
        False,
        f"group {group_id!r} has {len(group.members)} live member(s) (state {group.state}): "
        "offsets can be reset only while the group is empty (a running member would "
        "overwrite the reset with its next commit); stop its consumers first",
    )


async def _describe_or_none(client: KafkaClient, group_id: str) -> GroupDescription | None:
    try:
        return await describe_group(client, group_id)
    except GroupIdNotFoundError:
        # No group yet: a reset creates its offsets, as kafka-consumer-groups.sh does.
        return None


async def _offsets_at(
    client: KafkaClient, partitions: Collection[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """Each partition's offset at ``timestamp`` (EARLIEST, LATEST or ms), asked of its leader."""
    cluster = await client.metadata(sorted({tp.topic for tp in partitions}))
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        info = cluster.topics.get(tp.topic)
        part = None if info is None else info.partitions.get(tp.partition)
        if part is None:
            raise ConfigError(f"{tp.topic}:{tp.partition} does not exist in the cluster")
        by_leader.setdefault(part.leader, []).append(tp)
    answers: dict[TopicPartition, int] = {}

    async def ask(leader: int, tps: list[TopicPartition]) -> None:
        response = await client.request(
            lambda v: list_offsets.build(v, tps, timestamp=timestamp), node=leader
        )
        for tp, listed in list_offsets.parse(list_offsets.narrow(response)).items():
            raise_for_error(listed.error_code)
            answers[tp] = listed.offset

    async with anyio.create_task_group() as tasks:
        for leader, tps in by_leader.items():
            tasks.start_soon(ask, leader, tps)
    return answers


async def _partitions_of(
    client: KafkaClient, group_id: str, topics: Mapping[str, Collection[int]] | None
) -> list[TopicPartition]:
    if topics is None:
        # --all-topics: every partition the group has an offset for.
        return sorted(await committed_offsets(client, group_id))
    cluster = await client.metadata(sorted(topics))
    found: list[TopicPartition] = []
    for topic, wanted in topics.items():
        info = cluster.topics.get(topic)
        if info is None:
            raise ConfigError(f"topic {topic!r} does not exist")
        for p in wanted or range(info.partition_count):
            if p not in info.partitions:
                raise ConfigError(f"topic {topic!r} has no partition {p}")
            found.append(TopicPartition(topic, p))
    return sorted(found)


async def plan_offset_reset(
    client: KafkaClient,
    group_id: str,
    target: ResetTarget,
    topics: Mapping[str, Collection[int]] | None = None,
) -> tuple[OffsetReset, ...]:
    """The reset of ``group_id``'s offsets to ``target``, without writing anything.

    ``topics``: topic to partitions (empty: all of the topic's); None: every
    partition the group has committed. Every new offset lies within the log's
    start and end offsets; a timestamp after the last record gives the end.

    Raises:
        NonEmptyGroupError: the group has live members (nothing is planned then).
        ConfigError: a topic or partition does not exist, or a shift meets a
            partition with no committed offset.
        BrokerError, TransportError: the broker refused or could not be reached.
    """
    _refuse_live_members(group_id, await _describe_or_none(client, group_id))
    partitions = await _partitions_of(client, group_id, topics)
    if not partitions:
        return ()
    committed = await committed_offsets(client, group_id)
    start = await _offsets_at(client, partitions, list_offsets.EARLIEST)
    end = await _offsets_at(client, partitions, list_offsets.LATEST)
    at_time: dict[TopicPartition, int] = {}
    if target.kind is ResetKind.TIMESTAMP:
        at_time = await _offsets_at(client, partitions, target.value)
    plan: list[OffsetReset] = []
    for tp in partitions:
        current = committed.get(tp)
        if target.kind is ResetKind.EARLIEST:
            wanted = start[tp]
        elif target.kind is ResetKind.LATEST:
            wanted = end[tp]
        elif target.kind is ResetKind.OFFSET:
            wanted = target.value
        elif target.kind is ResetKind.SHIFT:
            if current is None:
                raise ConfigError(
                    f"cannot shift {tp.topic}:{tp.partition}: group {group_id!r} has no "
                    "committed offset for it (reset it with --to-earliest or --to-offset)"
                )
            wanted = current + target.value
        else:
            # -1: no record at or after the time; the consumer would start at the end.
            wanted = end[tp] if at_time[tp] < 0 else at_time[tp]
        plan.append(OffsetReset(tp, current, max(start[tp], min(end[tp], wanted))))
    return tuple(plan)


async def reset_offsets(
    client: KafkaClient, group_id: str, plan: Iterable[OffsetReset]
) -> tuple[OffsetReset, ...]:
    """Commit ``plan``'s new offsets for ``group_id`` as an admin; returns the plan.

    The group is described again just before the commit: it must still be empty.
    A member that joins between that check and the commit is not caught (the
    coordinator accepts the commit), as with kafka-consumer-groups.sh: stop the
    consumers before resetting.

    Raises:
        NonEmptyGroupError: the group has live members (nothing is written).
        BrokerError: the coordinator refused the commit of some partition (the
            first refusal, naming the partitions): GROUP_AUTHORIZATION_FAILED ...
        TransportError: the coordinator could not be reached.
    """
    resets = tuple(plan)
    _refuse_live_members(group_id, await _describe_or_none(client, group_id))
    if not resets:
        return resets
    offsets = {r.partition: r.new for r in resets}
    cluster = await client.metadata(sorted({tp.topic for tp in offsets}))
    topic_ids = {name: info.topic_id for name, info in cluster.topics.items()}
    names = {info.topic_id: name for name, info in cluster.topics.items()}

    async def attempt() -> dict[TopicPartition, BrokerError]:
        coordinator = await client.coordinator(group_id)
        response = await client.request(
            lambda v: offset_commit.build(
                v,
                group_id=group_id,
                member_id=_ADMIN_MEMBER,
                member_epoch=_ADMIN_EPOCH,
                instance_id=None,
                offsets=offsets,
                topic_ids=topic_ids,
            ),
            node=coordinator.node_id,
        )
        return offset_commit.parse(offset_commit.narrow(response), names)

    failed = await _with_coordinator(client, group_id, attempt)
    if failed:
        first = next(iter(failed.values()))
        where = ", ".join(f"{tp.topic}:{tp.partition}" for tp in sorted(failed))
        raise type(first)(
            first.code,
            first.name,
            first.retriable,
            f"the coordinator refused the reset of group {group_id!r} for {where}",
        )
    return resets


async def delete_groups(
    client: KafkaClient, group_ids: Iterable[str]
) -> dict[str, BrokerError | None]:
    """Delete each group (its committed offsets with it); by group, None when deleted,
    else the broker's refusal (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND ...).

    Raises:
        TransportError: a coordinator could not be reached.
    """
    results: dict[str, BrokerError | None] = {}
    for group_id in group_ids:

        async def attempt(group_id: str = group_id) -> int:
            coordinator = await client.coordinator(group_id)
            response = await client.request(
                lambda v: delete_groups_request.build(v, [group_id]), node=coordinator.node_id
            )
            codes = delete_groups_request.parse(delete_groups_request.narrow(response))
            code = codes.get(group_id)
            if code is None:
                raise KafkaProtocolError(f"DeleteGroups answered without group {group_id!r}")
            # Coordinator moves come back as errors here; raise them so they are retried.
            if code in (
                ErrorCode.not_coordinator,
                ErrorCode.coordinator_not_available,
                ErrorCode.coordinator_load_in_progress,
            ):
                raise_for_error(code)
            return code

        code = await _with_coordinator(client, group_id, attempt)
        results[group_id] = None if code == ErrorCode.none else broker_error(code)
    return results


async def delete_offsets(
    client: KafkaClient, group_id: str, partitions: Collection[TopicPartition]
) -> dict[TopicPartition, BrokerError | None]:
    """Delete ``group_id``'s committed offsets of ``partitions``; by partition, None when
    deleted, else the broker's refusal (GROUP_SUBSCRIBED_TO_TOPIC while a member
    subscribes to the topic).

    Raises:
        BrokerError: the whole request was refused (GROUP_ID_NOT_FOUND ...).
        TransportError: the coordinator could not be reached.
    """

    async def attempt() -> dict[TopicPartition, int]:
        coordinator = await client.coordinator(group_id)
        response = await client.request(
            lambda v: offset_delete_request.build(v, group_id, partitions),
            node=coordinator.node_id,
        )
        return offset_delete_request.parse(offset_delete_request.narrow(response))

    codes = await _with_coordinator(client, group_id, attempt)
    return {
        tp: None if code == ErrorCode.none else broker_error(code) for tp, code in codes.items()
    }
