"""The peer harness (``tests/peers``) with kgroup's members run as an application's install would.

Imported by the benchmarks that compare kgroup with other clients' processes;
they put ``tests/`` and ``tests/benchmarks/`` on ``sys.path`` first.
"""

from __future__ import annotations

from collections.abc import Sequence

import benchlib
from peers import DEFAULT_JVM_OPTIONS, PeerGroup


class InstalledPeers(PeerGroup):
    """Peers whose kgroup members run without the development environment's extras."""

    def command(
        self,
        kind: str,
        group: str,
        config: dict[str, str] | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
    ) -> list[str]:
        argv = super().command(kind, group, config, jvm_options)
        return benchlib.as_installed_argv(argv) if kind == "kgroup" else argv
