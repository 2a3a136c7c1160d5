"""The context-manager behaviour every broker handle shares."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["StartsOnEnter"]


class StartsOnEnter:
    """``with handle:`` starts the handle and closes it on the way out, error or not."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
