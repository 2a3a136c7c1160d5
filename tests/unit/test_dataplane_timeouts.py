"""The data plane's request timeout follows kgroup's ``request.timeout.ms`` (issue 10).

librdkafka times requests out after its own ``socket.timeout.ms`` (60 s by
default); a fetch stuck on a half-open connection held a rejoined member's
consumption up for a minute. No broker: librdkafka's consumer is replaced by
a recorder of the configuration it is built with.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, ClassVar

import confluent_kafka
import pytest

from kgroup.config import ConsumerConfig
from kgroup.dataplane.librdkafka import DataPlane, socket_timeout_ms
from kgroup.errors import DataPlaneError
from kgroup.types import TopicPartition

BASE = {"bootstrap.servers": "localhost:9092", "group.id": "g"}


class _Recorder:
    built: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        _Recorder.built.append(dict(conf))

    def close(self) -> None:
        pass


def _librdkafka_conf(monkeypatch: pytest.MonkeyPatch, conf: dict[str, Any]) -> dict[str, Any]:
    _Recorder.built = []
    monkeypatch.setattr(confluent_kafka, "Consumer", _Recorder)
    DataPlane(ConsumerConfig.from_dict({**BASE, **conf})).close()
    assert len(_Recorder.built) == 1
    return _Recorder.built[0]


def test_the_data_plane_times_requests_out_after_request_timeout_ms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = _librdkafka_conf(monkeypatch, {"request.timeout.ms": 2000})
    assert built["socket.timeout.ms"] == "2000"


def test_the_data_plane_timeout_defaults_to_kgroups_default_request_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = _librdkafka_conf(monkeypatch, {})
    assert built["socket.timeout.ms"] == "30000"


def test_an_explicit_socket_timeout_ms_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _librdkafka_conf(monkeypatch, {"request.timeout.ms": 2000, "socket.timeout.ms": "7000"})
    assert built["socket.timeout.ms"] == "7000"


def test_the_derived_timeout_leaves_a_long_poll_fetch_a_second_of_room() -> None:
    config = ConsumerConfig.from_dict(
        {**BASE, "request.timeout.ms": 2000, "fetch.wait.max.ms": "5000"}
    )
    assert socket_timeout_ms(config) == 6000
    short = ConsumerConfig.from_dict({**BASE, "request.timeout.ms": 100})
    assert socket_timeout_ms(short) == 1500


def test_a_failed_lookup_keeps_librdkafkas_code() -> None:
    # No broker on the port: librdkafka fails the lookups with its local codes
    # (_ALL_BROKERS_DOWN, _TRANSPORT), which the DataPlaneError keeps for the
    # facades (confluent-kafka's code as is; aiokafka's timeout for no answer).
    with socket.create_server(("127.0.0.1", 0)) as gone:
        port = gone.getsockname()[1]
    plane = DataPlane(ConsumerConfig.from_dict({**BASE, "bootstrap.servers": f"127.0.0.1:{port}"}))
    try:
        tp = TopicPartition("t", 0)
        lookups: dict[str, Callable[[], object]] = {
            "watermarks": lambda: plane.watermarks(tp, cached=False, timeout=0.3),
            "offsets_for_times": lambda: plane.offsets_for_times({tp: 0}, timeout=0.3),
            "list_topics": lambda: plane.list_topics("t", timeout=0.3),
        }
        for name, lookup in lookups.items():
            with pytest.raises(DataPlaneError) as caught:
                lookup()
            code = caught.value.code
            assert code is not None, name
            assert confluent_kafka.KafkaError(code).str() in str(caught.value), (name, code)
    finally:
        plane.close()
