"""Runtime tests: the real consumers, runtime and members against kgroup.testing.fake.

Every test runs on asyncio and trio. Waiting is on conditions with deadlines:
either the broker's state (``broker.wait_until``, woken by every request it
handles) or the consumers' own (``helpers.drive``: the application
polls, which is where callbacks run, until the condition holds).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from kgroup.testing.fake import FakeBroker

_groups = itertools.count()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.fixture
async def broker(anyio_backend: str) -> AsyncIterator[FakeBroker]:
    async with FakeBroker() as fake:
        yield fake


@pytest.fixture
def group_id() -> str:
    return f"group-{next(_groups)}"
