"""TaskGroupOwner: the life cycle KafkaClient and connect() share, without a broker."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from kgroup.transport._tasks import OwnedTaskGroup, TaskGroupOwner

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


class _Server(TaskGroupOwner[str]):
    """Runs one task that waits forever; records what its stop was told."""

    def __init__(self, fail_start: bool = False) -> None:
        self._tasks = OwnedTaskGroup()
        self._fail_start = fail_start
        self.task_cancelled = False
        self.stops: list[BaseException | None] = []

    async def _start(self, task_group: anyio.abc.TaskGroup) -> str:
        task_group.start_soon(self._run)
        if self._fail_start:
            raise ValueError("cannot start")
        return "running"

    async def _run(self) -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.task_cancelled = True
            raise

    async def _stop(self, exc: BaseException | None) -> None:
        self.stops.append(exc)
        await self._tasks.leave()


async def test_the_block_gets_what_start_returns_and_leaving_stops_the_tasks() -> None:
    server = _Server()
    async with server as value:
        assert value == "running"
        assert server.stops == []
    assert server.stops == [None]
    assert server.task_cancelled


async def test_a_failing_start_stops_with_its_error_and_propagates_it() -> None:
    server = _Server(fail_start=True)
    with pytest.raises(ValueError, match="cannot start"):
        async with server:
            pytest.fail("the block must not run when start fails")
    (stopped_with,) = server.stops
    assert isinstance(stopped_with, ValueError)
    assert server.task_cancelled


async def test_an_error_in_the_block_reaches_stop() -> None:
    server = _Server()
    with pytest.raises(KeyError):
        async with server:
            raise KeyError("boom")
    (stopped_with,) = server.stops
    assert isinstance(stopped_with, KeyError)
