"""What a consumer-protocol consumer imports: not the classic protocol's session.

A member's memory is mostly the modules it imported (the footprint benchmark's
RSS target is 1.5x librdkafka's); the classic session, its request modules,
the Python assignors and the leader's duties load only when a consumer needs
them. Checked in a fresh interpreter, since this one has imported everything.
"""

from __future__ import annotations

import subprocess
import sys

CLASSIC_ONLY = (
    "kgroup.runtime.classic_session",
    "kgroup.runtime.leader",
    "kgroup.assignors",
    "kgroup.protocol.requests.join_group",
    "kgroup.protocol.classic_payload",
)


def _imported_after(code: str) -> set[str]:
    script = code + "\nimport sys\nprint(*sorted(sys.modules))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(result.stdout.split())


def test_a_consumer_protocol_consumer_does_not_import_the_classic_session() -> None:
    modules = _imported_after(
        "import kgroup, kgroup.aio, kgroup.sync\n"
        "from kgroup.config import ConsumerConfig\n"
        "from kgroup.runtime import choice\n"
        "config = ConsumerConfig.from_dict(\n"
        "    {'bootstrap.servers': 'h:9092', 'group.id': 'g', 'group.protocol': 'consumer'}\n"
        ")\n"
        "choice.check_protocol_config(config)\n"
        "choice.session_class(config.group_protocol)\n"
    )
    assert "kgroup.runtime.consumer_session" in modules
    assert not [m for m in CLASSIC_ONLY if m in modules]


def test_a_classic_consumer_imports_it_when_the_config_is_checked() -> None:
    # group.protocol=classic or auto resolves partition.assignment.strategy at
    # construction, so an unknown assignor still fails there.
    modules = _imported_after(
        "from kgroup.config import ConsumerConfig\n"
        "from kgroup.runtime import choice\n"
        "config = ConsumerConfig.from_dict(\n"
        "    {'bootstrap.servers': 'h:9092', 'group.id': 'g', 'group.protocol': 'auto'}\n"
        ")\n"
        "choice.check_protocol_config(config)\n"
    )
    assert all(m in modules for m in CLASSIC_ONLY)


def test_a_consumer_does_not_import_hypothesis_through_kio() -> None:
    # kio's phantom types import Hypothesis (and with it pytest, trio, attrs,
    # Pygments) whenever it is installed: twice a consumer's Python objects.
    modules = _imported_after("import kgroup.aio, kgroup.sync\nimport kio.schema.errors\n")
    assert "kio.static._phantom" in modules
    assert not [m for m in ("hypothesis", "pytest", "trio", "pygments") if m in modules]


def test_hypothesis_still_imports_afterwards_and_a_test_run_keeps_kio_strategies() -> None:
    later = _imported_after("import kgroup.aio\nimport hypothesis.strategies as st\n")
    assert "hypothesis.strategies" in later
    # Under pytest kio registers its strategies as it always did (st.from_type(i32)).
    under_pytest = _imported_after(
        "import pytest\nimport kgroup.aio\nimport hypothesis.strategies as st\n"
        "from kio.static.primitive import i32\nassert st.from_type(i32).example() is not None\n"
    )
    assert "kio.static._phantom" in under_pytest
