"""Each consumer config key is defined once, in kgroup.config_keys, and read from there.

What is held to the registry: the docs table (every key has a row showing
its default), ConsumerConfig (its attributes default to the keys' defaults
and from_dict reads every owned key), the membership machines' configs
(their defaults are the keys' defaults: membership cannot import the
registry) and the sessions (they hand the member what the config holds).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from kgroup import config_keys as keys
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.membership import ClassicMemberConfig, MemberConfig
from kgroup.runtime import classic_session, consumer_session
from kgroup.types import Backoff

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BASE = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}

# Membership config field -> the key it comes from, per protocol.
COMMON_FIELDS = {
    "instance_id": keys.GROUP_INSTANCE_ID,
    "rack_id": keys.CLIENT_RACK,
    "max_poll_interval_ms": keys.MAX_POLL_INTERVAL_MS,
    "auto_commit": keys.ENABLE_AUTO_COMMIT,
    "retry_backoff_ms": keys.RETRY_BACKOFF_MS,
    "retry_backoff_max_ms": keys.RETRY_BACKOFF_MAX_MS,
}
CONSUMER_FIELDS = {
    **COMMON_FIELDS,
    "server_assignor": keys.GROUP_REMOTE_ASSIGNOR,
    "session_timeout_ms": keys.CONSUMER_SESSION_TIMEOUT_MS,
}
CLASSIC_FIELDS = {
    **COMMON_FIELDS,
    "session_timeout_ms": keys.SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": keys.HEARTBEAT_INTERVAL_MS,
}


def docs_rows() -> dict[str, list[str]]:
    """The configuration table of docs/configuration.md: key -> its cells."""
    text = DOCS.read_text()
    section = text[text.index("| key |") :]
    section = section[: section.index("\n\n")]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \|", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in line.strip("|").split(" | ")]
    return rows


@pytest.mark.parametrize("key", keys.KEYS, ids=lambda k: k.name)
def test_every_key_is_documented_with_its_default(key: keys.ConfigKey[Any]) -> None:
    rows = docs_rows()
    assert key.name in rows, f"{key.name} has no row in the configuration table of {DOCS.name}"
    assert rows[key.name][1] == key.shown_default, (
        f"{DOCS.name} shows {key.name}'s default as {rows[key.name][1]!r}, "
        f"the registry's is {key.shown_default!r}"
    )


def test_defaults_mentioned_in_the_docs_prose_are_the_keys_defaults() -> None:
    # "`session.timeout.ms` (default 45000)" anywhere in docs/ or the README.
    mention = re.compile(r"`([a-z.]+)` \(default ([^,)]+)")
    found = 0
    for path in [*sorted(DOCS.parent.glob("*.md")), DOCS.parents[1] / "README.md"]:
        for name, shown in mention.findall(path.read_text()):
            if name in {k.name for k in keys.KEYS}:
                found += 1
                expected = keys.key(name).shown_default.strip("`")
                assert shown.strip("` ") == expected, f"{path.name}: {name} (default {shown})"
    assert found  # the pattern still finds the mentions it is there for


def test_keys_are_defined_once() -> None:
    names = [k.name for k in keys.KEYS]
    assert len(names) == len(set(names))
    attrs = [k.attr for k in keys.KEYS if k.attr is not None]
    assert len(attrs) == len(set(attrs))
    assert all(keys.key(name).name == name for name in names)
    with pytest.raises(KeyError):
        keys.key("no.such.key")


def test_config_attributes_default_to_the_keys_defaults() -> None:
    fields = {f.name: f for f in dataclasses.fields(ConsumerConfig)}
    for key in keys.KEYS:
        if key.owner is not keys.Owner.CONFIG:
            assert key.attr is None, f"{key.name} is not ConsumerConfig's but names an attribute"
            continue
        assert key.attr in fields, f"{key.name}: ConsumerConfig has no attribute {key.attr}"
        if not key.required:
            assert fields[key.attr].default == key.default, key.name


def test_from_dict_gives_every_absent_key_its_default() -> None:
    config = ConsumerConfig.from_dict(BASE)
    for key in keys.KEYS:
        if key.attr is not None and not key.required:
            assert getattr(config, key.attr) == key.default, key.name
    assert config.metadata_max_age == keys.METADATA_MAX_AGE_MS.default / 1000


@pytest.mark.parametrize(
    ("extra", "seconds"),
    [
        ({"topic.metadata.refresh.interval.ms": "2000"}, 2.0),
        ({"topic.metadata.refresh.interval.ms": 2000, "metadata.max.age.ms": 1000}, 1.0),
        ({"topic.metadata.refresh.interval.ms": 900_000}, 300.0),
        ({"topic.metadata.refresh.interval.ms": -1}, 300.0),  # librdkafka: no refresh
    ],
)
def test_librdkafkas_refresh_interval_shortens_the_metadata_age(
    extra: dict[str, object], seconds: float
) -> None:
    assert ConsumerConfig.from_dict({**BASE, **extra}).metadata_max_age == seconds


def test_from_dict_reads_every_owned_key() -> None:
    # A value other than the default for every key: each attribute must show it.
    given: dict[str, object] = {
        "group.protocol": "auto",
        "group.instance.id": "i-1",
        "group.remote.assignor": "range",
        "group.consumer.session.timeout.ms": 12_345,
        "enable.auto.commit": "false",
        "auto.commit.interval.ms": "777",
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 9_999,
        "client.rack": "r1",
        "client.id": "me",
        "request.timeout.ms": 4_321,
        "retry.backoff.ms": 7,
        "retry.backoff.max.ms": 70,
    }
    classic: dict[str, object] = {
        "group.protocol": "classic",
        "partition.assignment.strategy": "roundrobin",
        "session.timeout.ms": 20_000,
        "heartbeat.interval.ms": 2_000,
    }
    seen: dict[str, object] = {}
    for conf in (given, classic):
        config = ConsumerConfig.from_dict({**BASE, **conf})
        for name in conf:
            key = keys.key(name)
            assert key.attr is not None
            seen[name] = getattr(config, key.attr)
            assert seen[name] == key.read(conf) != key.default, name
    owned = {
        k.name
        for k in keys.KEYS
        if k.owner is keys.Owner.CONFIG and not k.required and k is not keys.CLIENT_ASSIGNORS
    }
    assert owned == set(seen), "a ConsumerConfig key this test does not set"


@pytest.mark.parametrize(
    ("member_config", "fields", "required"),
    [
        (MemberConfig, CONSUMER_FIELDS, {"group_id": "g", "member_id": "m"}),
        (ClassicMemberConfig, CLASSIC_FIELDS, {"group_id": "g"}),
    ],
    ids=["consumer", "classic"],
)
def test_member_config_defaults_are_the_keys_defaults(
    member_config: Any, fields: dict[str, keys.ConfigKey[Any]], required: dict[str, str]
) -> None:
    # kgroup.membership may not import the registry, so its defaults (for
    # tests and the simulator) are held to it here.
    member = member_config(**required)
    for name, key in fields.items():
        assert getattr(member, name) == key.default, f"{member_config.__name__}.{name}"


def test_backoff_defaults_are_the_keys_defaults() -> None:
    expected = Backoff.from_ms(keys.RETRY_BACKOFF_MS.default, keys.RETRY_BACKOFF_MAX_MS.default)
    assert Backoff() == expected
    assert Backoff.from_config({}) == expected


class _Host:
    """Enough of a driver to construct a session (nothing runs)."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.request_timeout = 1.0
        self.backoff = Backoff()

    def wake(self) -> None:
        pass


@pytest.mark.parametrize(
    ("module", "member_class", "fields", "conf"),
    [
        (
            consumer_session,
            "ConsumerMember",
            CONSUMER_FIELDS,
            {
                "group.protocol": "consumer",
                "group.instance.id": "i-1",
                "client.rack": "r1",
                "group.remote.assignor": "range",
                "group.consumer.session.timeout.ms": 12_345,
                "max.poll.interval.ms": 9_999,
                "enable.auto.commit": False,
                "retry.backoff.ms": 7,
                "retry.backoff.max.ms": 70,
            },
        ),
        (
            classic_session,
            "ClassicMember",
            CLASSIC_FIELDS,
            {
                "group.protocol": "classic",
                "group.instance.id": "i-1",
                "client.rack": "r1",
                "session.timeout.ms": 20_000,
                "heartbeat.interval.ms": 2_000,
                "max.poll.interval.ms": 9_999,
                "enable.auto.commit": False,
                "retry.backoff.ms": 7,
                "retry.backoff.max.ms": 70,
            },
        ),
    ],
    ids=["consumer", "classic"],
)
def test_sessions_hand_the_member_what_the_config_holds(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    member_class: str,
    fields: dict[str, keys.ConfigKey[Any]],
    conf: dict[str, object],
) -> None:
    built: list[Any] = []
    real = getattr(module, member_class)

    def spy(member_config: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(member_config)
        return real(member_config, *args, **kwargs)

    monkeypatch.setattr(module, member_class, spy)
    config = ConsumerConfig.from_dict({**BASE, **conf})
    session_class = (
        module.ConsumerSession
        if config.group_protocol is GroupProtocol.CONSUMER
        else module.ClassicSession
    )
    session_class(_Host(config))
    (member_config,) = built
    for name, key in fields.items():
        assert key.attr is not None
        value = getattr(config, key.attr)
        assert value != key.default, f"the test should set {key.name}"
        assert getattr(member_config, name) == value, name
