"""The data plane: librdkafka (confluent-kafka) in assign mode.

This is the only module of kgroup that imports ``confluent_kafka``. It owns one
``confluent_kafka.Consumer`` per kgroup consumer and drives it only with
``incremental_assign`` / ``incremental_unassign``, ``pause`` / ``resume``,
``seek`` and ``position``: kgroup's membership layer decides the assignment and
kgroup commits offsets itself, so librdkafka's own group machinery stays idle
(no ``subscribe()``, no auto-commit, no offset store).
"""

from kgroup.dataplane.librdkafka import DataPlane, Record, validate_passthrough

__all__ = ["DataPlane", "Record", "validate_passthrough"]
