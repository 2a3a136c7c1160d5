"""The consumer front ends' input checks, without a broker."""

from __future__ import annotations

import re

import pytest

from kgroup import ConfigError, GroupProtocol, InvalidSubscriptionError, TopicPartition
from kgroup._frontend import build_config, check_regex, commit_offsets_arg, parse_subscription
from kgroup.listener import listener_method
from kgroup.membership import CallbackKind


def test_names_subscription() -> None:
    assert parse_subscription(["b", "a", "a"], None) == (frozenset({"a", "b"}), None)
    assert parse_subscription("orders", None) == (frozenset({"orders"}), None)


@pytest.mark.parametrize(
    ("topics", "pattern"),
    [
        (None, "orders-.*"),
        (re.compile("orders-.*"), None),
        ("^orders-.*", None),
        (["^orders-.*"], None),
        (None, re.compile("orders-.*")),
    ],
)
def test_regex_subscription_forms(topics: object, pattern: object) -> None:
    names, regex = parse_subscription(topics, pattern)  # type: ignore[arg-type]
    assert names == frozenset()
    assert regex is not None
    assert regex.endswith("orders-.*")


def test_names_and_regex_do_not_mix() -> None:
    with pytest.raises(InvalidSubscriptionError, match="not both"):
        parse_subscription(["a", "^b.*"], None)
    with pytest.raises(InvalidSubscriptionError, match="at most one regex"):
        parse_subscription(["^a.*"], "b.*")
    with pytest.raises(InvalidSubscriptionError, match="non-empty"):
        parse_subscription([""], None)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("^[bad", "missing ]"),
        ("^orders-(?=eu).*", "invalid perl operator"),  # lookahead: RE2 has none
        (r"^(a)\1$", "invalid escape"),  # backreference
    ],
)
def test_under_the_consumer_protocol_a_regex_re2_refuses_is_refused_naming_why(
    pattern: str, why: str
) -> None:
    with pytest.raises(InvalidSubscriptionError, match="not valid RE2") as raised:
        check_regex(pattern, GroupProtocol.CONSUMER)
    assert repr(pattern) in str(raised.value)
    assert why in str(raised.value)


def test_re2_only_syntax_is_accepted_under_the_consumer_protocol() -> None:
    # \p{L}: a Unicode class RE2 (and RE2/J) reads and Python's re does not.
    check_regex(r"^\p{L}+$", GroupProtocol.CONSUMER)


@pytest.mark.parametrize("protocol", [GroupProtocol.CLASSIC, GroupProtocol.AUTO])
def test_under_the_classic_protocol_the_members_own_engine_judges(
    protocol: GroupProtocol,
) -> None:
    # A classic member resolves its regex with Python's re: lookahead works there.
    check_regex("^orders-(?!test).*", protocol)
    with pytest.raises(InvalidSubscriptionError, match=r"'\^\[bad' is not valid"):
        check_regex("^[bad", protocol)


def test_classic_and_auto_resolve_the_assignment_strategy_up_front() -> None:
    base = {"bootstrap.servers": "localhost:9092", "group.id": "g"}
    assert build_config(base).group_id == "g"
    for protocol in ("classic", "auto"):
        config = build_config({**base, "group.protocol": protocol})
        assert config.group_protocol.value == protocol
        assert config.partition_assignment_strategy == ()  # range,cooperative-sticky
        with pytest.raises(ConfigError, match="unknown assignor 'fancy'"):
            build_config(
                {**base, "group.protocol": protocol, "partition.assignment.strategy": "fancy"}
            )


def test_commit_arguments() -> None:
    tp = TopicPartition("t", 0)
    assert commit_offsets_arg(None, None) is None
    assert commit_offsets_arg({tp: 5}, None) == {tp: 5}
    with pytest.raises(ValueError, match=">= 0"):
        commit_offsets_arg({tp: -1}, None)
    with pytest.raises(TypeError, match="TopicPartition"):
        commit_offsets_arg({("t", 0): 1}, None)


def test_listener_methods_are_optional_and_lost_falls_back_to_revoked() -> None:
    calls: list[str] = []

    class OnlyRevoked:
        def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            calls.append("revoked")

    listener = OnlyRevoked()
    assert listener_method(listener, CallbackKind.ASSIGNED) is None
    method = listener_method(listener, CallbackKind.LOST)
    assert method is not None
    method(frozenset())
    assert calls == ["revoked"]
    assert listener_method(None, CallbackKind.REVOKED) is None
