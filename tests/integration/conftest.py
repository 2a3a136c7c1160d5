"""Fixtures shared by the integration tests.

The broker fixtures (``kafka_broker``, ``make_topic``, ...) come from kgroup's
pytest plugin; plain helper functions are in ``helpers.py``.
"""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Async tests run once on asyncio and once on trio; a module may narrow this."""
    backend: str = request.param
    return backend
