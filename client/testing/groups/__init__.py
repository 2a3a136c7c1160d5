"""One model of Kafka's group coordinators, for the tests: ``kgroup.testing.groups``.

:mod:`.consumer` is the KIP-848 consumer group (epochs, target assignment,
reconciliation, classic members of a converted group) and :mod:`.classic` the
classic group (JoinGroup / SyncGroup rounds, static members), both following
Apache Kafka 4.x's group coordinator. They are pure: time comes in as an
argument, timers go out through a ``schedule`` callable, and topics are read
through a :class:`~.catalog.TopicCatalog`. The simulator
(:mod:`kgroup.testing.sim`) runs them in virtual time with its faults; the
fake broker (:mod:`kgroup.testing.fake`) puts the wire in front of them.
"""

from kgroup.testing.groups.catalog import TopicCatalog
from kgroup.testing.groups.classic import (
    ClassicCoordinatorConfig,
    ClassicGroupCoordinator,
    ClassicGroupState,
    ExportedMember,
)
from kgroup.testing.groups.consumer import (
    AssignmentState,
    ConsumerGroupCoordinator,
    CoordinatorConfig,
    CoordinatorObserver,
    ErrorCode,
    MemberRecord,
    PersistedGroup,
    PersistedMember,
)
from kgroup.testing.groups.errors import ScenarioError, SimulationError

__all__ = [
    "AssignmentState",
    "ClassicCoordinatorConfig",
    "ClassicGroupCoordinator",
    "ClassicGroupState",
    "ConsumerGroupCoordinator",
    "CoordinatorConfig",
    "CoordinatorObserver",
    "ErrorCode",
    "ExportedMember",
    "MemberRecord",
    "PersistedGroup",
    "PersistedMember",
    "ScenarioError",
    "SimulationError",
    "TopicCatalog",
]
