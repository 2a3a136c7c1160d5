"""The hand-written tables of Kafka error codes agree with Kafka's, and with each other.

The codes kgroup tells apart are :class:`kgroup.error_codes.ErrorCode` (the
standard library only, so the membership machines may import it, so not kio);
the test harness's group model answers with the same table, plus one code the
KIP-848 draft never numbered. The table may not drift from the wire: kio's
``ErrorCode`` is generated from Kafka's own message definitions, so each name
must carry kio's number, and kgroup's retriable flag must be Kafka's.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode

from kgroup import error_codes, errors
from kgroup.error_codes import ErrorCode, Trait, codes_with, error_name
from kgroup.testing import sim
from kgroup.testing.groups import consumer

# Codes the simulator needs that no Kafka release defines (see docs/simulation.md).
_SIM_ONLY = {"INVALID_ASSIGNMENT": consumer.INVALID_ASSIGNMENT}


def _kafka(name: str) -> KafkaErrorCode:
    return KafkaErrorCode[name.lower()]


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_error_codes_carry_kafkas_numbers(code: ErrorCode) -> None:
    assert int(code) == int(_kafka(code.name))


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_error_codes_are_retriable_as_kafka_says(code: ErrorCode) -> None:
    assert (Trait.RETRIABLE in code.traits) == _kafka(code.name).retriable


def test_the_simulated_coordinator_answers_from_the_one_table() -> None:
    # So its codes carry Kafka's numbers by the tests above.
    assert consumer.ErrorCode is ErrorCode
    assert sim.ErrorCode is ErrorCode


def test_simulator_only_codes_collide_with_no_kafka_code() -> None:
    kafka_numbers = {int(c) for c in KafkaErrorCode}
    for name, number in _SIM_ONLY.items():
        assert number not in kafka_numbers
        assert name not in ErrorCode.__members__


@pytest.mark.parametrize(
    "code", [c for c in ErrorCode if c in errors.ERROR_CLASSES], ids=lambda c: c.name
)
def test_a_codes_class_is_retriable_as_its_code(code: ErrorCode) -> None:
    cls = errors.ERROR_CLASSES[code]
    assert issubclass(cls, errors.RetriableBrokerError) == (Trait.RETRIABLE in code.traits)


def test_a_code_has_one_class() -> None:
    with pytest.raises(TypeError, match="NOT_COORDINATOR already has NotCoordinatorError"):

        class _Again(errors.RetriableBrokerError, code=ErrorCode.NOT_COORDINATOR):
            pass

    assert errors.ERROR_CLASSES[ErrorCode.NOT_COORDINATOR] is errors.NotCoordinatorError


def test_codes_with_takes_every_trait_asked_and_none_refused() -> None:
    assert codes_with(Trait.COORDINATOR_MOVED) == {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
    assert codes_with(Trait.FENCED | Trait.FATAL) == {ErrorCode.FENCED_INSTANCE_ID}
    assert codes_with(Trait.FENCED, without=Trait.FATAL) == {
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_MEMBER_EPOCH,
        ErrorCode.ILLEGAL_GENERATION,
    }


def test_a_code_not_in_the_table_is_named_by_its_number() -> None:
    assert error_name(16) == "NOT_COORDINATOR"
    assert error_name(9999) == "UNKNOWN_ERROR_9999"


def test_the_table_imports_only_the_standard_library() -> None:
    # The membership machines import it, and they may import nothing else.
    tree = ast.parse(Path(error_codes.__file__).read_text())
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert imported
    assert [
        name for name in imported if name.partition(".")[0] not in sys.stdlib_module_names
    ] == []
