"""Turning ``partition.assignment.strategy`` into assignor instances."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kgroup.assignors.classic import ConsumerPartitionAssignor
from kgroup.assignors.range import RangeAssignor
from kgroup.assignors.roundrobin import RoundRobinAssignor
from kgroup.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from kgroup.errors import ConfigError

__all__ = ["BUILTIN_ASSIGNORS", "resolve_assignors"]

BUILTIN_ASSIGNORS: dict[str, Callable[[], ConsumerPartitionAssignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
"""The built-in classic assignors by name."""

# The Java client also accepts its class names; configs copied from Java keep working.
_JAVA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

_KEY = "partition.assignment.strategy"

AssignorSpec = str | Sequence[str | ConsumerPartitionAssignor | type[ConsumerPartitionAssignor]]


def _from_name(name: str) -> ConsumerPartitionAssignor:
    key = _JAVA_CLASS_NAMES.get(name, name)
    factory = BUILTIN_ASSIGNORS.get(key)
    if factory is None:
        valid = ", ".join(BUILTIN_ASSIGNORS)
        raise ConfigError(
            f"{_KEY}: unknown assignor {name!r}; valid names are {valid} "
            "(or pass an assignor instance or class)"
        )
    return factory()


def _check(candidate: object, what: str) -> ConsumerPartitionAssignor:
    if not isinstance(candidate, ConsumerPartitionAssignor):
        raise ConfigError(
            f"{_KEY}: {what} is not a ConsumerPartitionAssignor (it needs name, "
            "supported_protocols, subscription_user_data, assign and on_assignment)"
        )
    return candidate


def resolve_assignors(spec: AssignorSpec) -> list[ConsumerPartitionAssignor]:
    """The assignors named by ``spec``, in preference order, as instances.

    ``spec`` is ``partition.assignment.strategy``: a comma-separated string of
    names (``"cooperative-sticky, range"``), or a list whose items are names,
    assignor instances, or assignor classes (instantiated with no arguments).
    Names are the built-ins' (``range``, ``roundrobin``, ``sticky``,
    ``cooperative-sticky``) or the Java client's class names for them.

    Raises:
        ConfigError: an unknown name (the message lists the valid ones), an
            object that is not an assignor, an empty list, or two assignors with
            the same name.
    """
    items: Sequence[object]
    if isinstance(spec, str):
        items = [part.strip() for part in spec.split(",") if part.strip()]
    else:
        items = list(spec)
    if not items:
        raise ConfigError(f"{_KEY}: at least one assignor is required")
    resolved: list[ConsumerPartitionAssignor] = []
    for item in items:
        if isinstance(item, str):
            resolved.append(_from_name(item.strip()))
        elif isinstance(item, type):
            try:
                instance = item()
            except TypeError as error:
                raise ConfigError(
                    f"{_KEY}: class {item.__qualname__} cannot be created without arguments "
                    f"({error}); pass an instance instead"
                ) from error
            resolved.append(_check(instance, f"class {item.__qualname__}"))
        else:
            resolved.append(_check(item, repr(item)))
    names = [a.name for a in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(
            f"{_KEY}: assignor names must be unique, got {', '.join(duplicates)} twice"
        )
    return resolved
