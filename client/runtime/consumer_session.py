"""The consumer protocol's session (KIP-848): a ConsumerMember and its heartbeats.

Performs what only the consumer protocol's member asks for:

- ``SendHeartbeat``: a ConsumerGroupHeartbeat to the coordinator (moves of the
  coordinator are followed within the request timeout); its response or
  failure goes back to the member;
- ``RequestMetadata``: a metadata refresh, reported as ``MetadataUpdated``
  (the member resolves topic ids of its assignment with it).

Named topics' ids are looked up before a subscription reaches the member, so
the first assignment resolves at once (see :meth:`ConsumerSession.subscribe`).
"""

from __future__ import annotations

import logging
import time
import uuid

import anyio
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.errors import (
    KafkaProtocolError,
    KgroupError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from kgroup.membership import (
    CommitCompleted,
    ConsumerMember,
    ConsumerMemberAction,
    ConsumerMemberEvent,
    FailureKind,
    HeartbeatFailed,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    MemberConfig,
    MemberState,
    MetadataUpdated,
    RequestMetadata,
    SendHeartbeat,
    SubscriptionChanged,
)
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import consumer_group_heartbeat
from kgroup.runtime import topic_watch
from kgroup.runtime._log import log
from kgroup.runtime.coordinator import Answered, CallFailed, coordinator_call
from kgroup.runtime.interfaces import Host, SubscriptionChange
from kgroup.runtime.session import SESSION_MARGIN_MS, FinishedCommit, SessionBase
from kgroup.telemetry.recorder import ConsumerTelemetry
from kgroup.transport import ClusterMetadata, KafkaClient
from kgroup.transport.client import COORDINATOR_MOVED

__all__ = ["ConsumerSession", "commit_done_event", "consumer_member_config"]


def consumer_member_config(config: ConsumerConfig, member_id: str) -> MemberConfig:
    """The member's configuration the session builds its member with (pure: the
    simulator builds its members with it too, so they run the runtime's values)."""
    return MemberConfig(
        group_id=config.group_id,
        member_id=member_id,
        instance_id=config.group_instance_id,
        rack_id=config.client_rack,
        server_assignor=config.group_remote_assignor,
        max_poll_interval_ms=config.max_poll_interval_ms,
        auto_commit=config.enable_auto_commit,
        retry_backoff_ms=config.retry_backoff_ms,
        retry_backoff_max_ms=config.retry_backoff_max_ms,
        session_timeout_ms=config.consumer_session_timeout_ms,
        session_margin_ms=SESSION_MARGIN_MS,
    )


def commit_done_event(commit: FinishedCommit) -> CommitCompleted:
    """What the consumer member hears of a commit it asked for (any error included)."""
    return CommitCompleted(commit.token, commit.error)


class ConsumerSession(SessionBase[ConsumerMemberEvent, ConsumerMemberAction]):
    """Drives one :class:`~kgroup.membership.ConsumerMember` for a driver (see the module)."""

    group_protocol = GroupProtocol.CONSUMER
    stable_state = MemberState.STABLE

    def __init__(self, host: Host) -> None:
        config = host.config
        # The driver's telemetry learns the member's states from the member.
        telemetry: ConsumerTelemetry | None = getattr(host, "telemetry", None)
        self.member = ConsumerMember(
            consumer_member_config(config, str(uuid.uuid4())), listener=telemetry
        )
        super().__init__(host, self.member)
        self._accepted = False
        # An idle member's heartbeats repeat, and so do their answers: the last
        # request built and the last response read are reused for equal ones
        # (the connection's FrameCodec hands back the same response for the same bytes).
        self._built: tuple[NegotiatedVersions, HeartbeatRequest, RequestPayload] | None = None
        self._read: tuple[object, HeartbeatResponse] | None = None

    @property
    def generation_or_epoch(self) -> int:
        """The member epoch."""
        return self.member.member_epoch

    @property
    def may_fall_back(self) -> bool:
        """No heartbeat of this member was accepted yet."""
        return not self._accepted

    def _perform(self, action: ConsumerMemberAction) -> None:
        if isinstance(action, SendHeartbeat):
            if not self._send_now(action):
                self._host.spawn_answer(self._send_heartbeat, action)
        elif isinstance(action, RequestMetadata):
            self._host.spawn(self._refresh_metadata)
        # AssignorOnAssignment: no Python consumer-protocol assignor is configurable yet.

    async def subscribe(self, change: SubscriptionChange) -> None:
        """Look up the named topics' ids first, then give the change to the member."""
        # The member joins as soon as it sees the subscription. Learning the
        # topic ids of the named topics first means the first assignment
        # resolves at once: acknowledging a partly resolved assignment tells
        # the broker the unresolved partitions are not owned, and it may hand
        # them to another member while their assigned callback is still queued.
        if isinstance(change, SubscriptionChanged) and change.topics:
            if topic_watch.described_lately(self._host.client, change.topics):
                # The subscription's denial check described them a moment ago.
                self._post_metadata(self._host.client.cluster)
            else:
                with anyio.move_on_after(self._host.request_timeout):
                    await self._metadata(sorted(change.topics))
        self._events.post(change)

    def rediscovery_delay(self) -> float:
        """The member paces its own heartbeats: look the coordinator up at once."""
        return 0.0

    def commit_done(self, commit: FinishedCommit) -> None:
        """Report the commit before a revocation to the member."""
        self._events.post(commit_done_event(commit))

    # -------------------------------------------------------------- requests

    def _send_now(self, action: SendHeartbeat) -> bool:
        """Send the heartbeat from the driver's step, without a task, when the
        coordinator's connection is open (see :meth:`BrokerConnection.send_now`);
        its answer is posted from the connection's read callback. False: nothing
        sent, the task of :meth:`_send_heartbeat` does it (a lookup, a connect, a
        connection that cannot, a client whose ``coordinator_request`` is its own).
        """
        host = self._host
        client = host.client
        if (
            not isinstance(client, KafkaClient)
            or type(client).coordinator_request is not KafkaClient.coordinator_request
        ):
            return False
        conn = client.coordinator_connection_now(host.config.group_id)
        if conn is None:
            return False
        timeout = host.request_timeout
        # Compared with time.monotonic() only (see _heard): anyio's clock looks
        # the backend up on every read.
        deadline = time.monotonic() + timeout
        sent = host.expect_answer()

        def on_done(payload: ResponsePayload | None, error: KgroupError | None) -> None:
            try:
                self._heard(action, payload, error, deadline)
            finally:
                host.answered(sent)

        try:
            payload = self._build(conn.versions, action.request)
            if conn.send_now(payload, on_done, timeout=timeout):
                return True
        except UnsupportedVersionError:
            pass  # the task's request reports it to the member
        host.answered(sent, timed=False)
        return False

    def _heard(
        self,
        action: SendHeartbeat,
        payload: ResponsePayload | None,
        error: KgroupError | None,
        deadline: float,
    ) -> None:
        """The answer to a heartbeat :meth:`_send_now` sent, as :func:`coordinator_call`
        would have reported it (a coordinator that moved is followed by the task)."""
        host = self._host
        event: ConsumerMemberEvent
        if payload is not None:
            try:
                answer = consumer_group_heartbeat.narrow(payload)
            except KafkaProtocolError as exc:
                self._post_heartbeat(
                    action, HeartbeatFailed(action.seq, FailureKind.DISCONNECTED, str(exc))
                )
                return
            left = deadline - time.monotonic()
            if int(answer.error_code) in COORDINATOR_MOVED and left > 0:
                # coordinator_request looks it up again and resends, within the
                # heartbeat's own time.
                host.client.mark_coordinator_stale(host.config.group_id)
                host.spawn_answer(self._send_heartbeat, action, left)
                return
            response = self._parse(answer)
            self._accepted = self._accepted or response.error_code == 0
            event = HeartbeatResponseReceived(action.seq, response)
        elif isinstance(error, RequestTimeoutError):
            event = HeartbeatFailed(action.seq, FailureKind.TIMEOUT, str(error))
        else:
            # A lost connection (the pool opens a new one for the next request),
            # a malformed response: as coordinator_call reports them.
            event = HeartbeatFailed(action.seq, FailureKind.DISCONNECTED, str(error))
        self._post_heartbeat(action, event)

    def _post_heartbeat(self, action: SendHeartbeat, event: ConsumerMemberEvent) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "group %s heartbeat %s -> %s", self._host.config.group_id, action.request, event
            )
        self._events.post(event)

    async def _send_heartbeat(self, action: SendHeartbeat, timeout: float | None = None) -> None:
        host = self._host
        request = action.request
        outcome = await coordinator_call(
            host.client,
            host.config.group_id,
            lambda versions: self._build(versions, request),
            consumer_group_heartbeat.narrow,
            timeout=host.request_timeout if timeout is None else timeout,
            follow_moves=True,
        )
        event: ConsumerMemberEvent
        if isinstance(outcome, Answered):
            response = self._parse(outcome.response)
            self._accepted = self._accepted or response.error_code == 0
            event = HeartbeatResponseReceived(action.seq, response)
        elif isinstance(outcome, CallFailed):
            event = HeartbeatFailed(action.seq, outcome.kind, outcome.detail)
        else:
            # FindCoordinator's own error (authorization ...): the member reacts as
            # to the same code in a heartbeat response.
            event = HeartbeatResponseReceived(
                action.seq,
                HeartbeatResponse(error_code=outcome.code, error_message=outcome.message),
            )
        self._post_heartbeat(action, event)

    def _build(self, versions: NegotiatedVersions, request: HeartbeatRequest) -> RequestPayload:
        built = self._built
        if built is not None and built[0] is versions and built[1] == request:
            return built[2]
        payload = consumer_group_heartbeat.build(versions, request)
        self._built = (versions, request, payload)
        return payload

    def _parse(self, answer: consumer_group_heartbeat.Response) -> HeartbeatResponse:
        read = self._read
        if read is not None and read[0] is answer:
            return read[1]
        response = consumer_group_heartbeat.parse(answer)
        self._read = (answer, response)
        return response

    async def _refresh_metadata(self) -> None:
        await self._metadata(None)

    async def _metadata(self, topics: list[str] | None) -> None:
        try:
            cluster = await self._host.client.metadata(topics)
        except KgroupError as exc:
            log.info(
                "group %s: metadata for %s failed: %s",
                self._host.config.group_id,
                "all topics" if topics is None else topics,
                exc,
            )
            return
        self._post_metadata(cluster)

    def _post_metadata(self, cluster: ClusterMetadata) -> None:
        self._events.post(MetadataUpdated({t.topic_id: t.name for t in cluster.topics.values()}))
