"""The two hand-written tables of Kafka error codes agree with Kafka's numbers.

The members' reactions key on :class:`kgroup.membership.common.errors.ErrorCode`
(membership may import only the standard library, so not kio), and the
simulated coordinator answers with its own :class:`kgroup.testing.sim.ErrorCode`
(the codes a coordinator sends, plus one the KIP-848 draft never numbered).
Neither may drift from the wire: kio's ``ErrorCode`` is generated from Kafka's
own message definitions, so each name must carry kio's number.
"""

from __future__ import annotations

import enum

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode

from kgroup.membership.common.errors import ErrorCode as MemberErrorCode
from kgroup.testing.sim import ErrorCode as SimErrorCode

# Codes the simulator needs that no Kafka release defines (see docs/simulation.md).
_SIM_ONLY = {"INVALID_ASSIGNMENT"}


def _kafka_number(name: str) -> int:
    return int(KafkaErrorCode[name.lower()])


@pytest.mark.parametrize("code", list(MemberErrorCode), ids=lambda c: c.name)
def test_member_error_codes_carry_kafkas_numbers(code: MemberErrorCode) -> None:
    assert int(code) == _kafka_number(code.name)


@pytest.mark.parametrize(
    "code", [c for c in SimErrorCode if c.name not in _SIM_ONLY], ids=lambda c: c.name
)
def test_simulated_coordinator_error_codes_carry_kafkas_numbers(code: enum.IntEnum) -> None:
    assert int(code) == _kafka_number(code.name)


def test_simulator_only_codes_collide_with_no_kafka_code() -> None:
    kafka_numbers = {int(c) for c in KafkaErrorCode}
    for name in _SIM_ONLY:
        assert int(SimErrorCode[name]) not in kafka_numbers
