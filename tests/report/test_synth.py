"""The synthetic telemetry generator: valid events, reproducible, the ground truth it promises."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from kgroup.errors import ConfigError
from kgroup.report.synth import SynthConfig, generate, main
from kgroup.telemetry import EventKind, decode

SMALL = SynthConfig(members=5, partitions=20, hours=0.3, churn_per_hour=30, seed=3, files=2)


def read_all(out: Path) -> list[str]:
    return [
        line
        for path in sorted((out / "telemetry").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_every_line_is_a_telemetry_event_and_each_emitter_counts_up(tmp_path: Path) -> None:
    result = generate(SMALL, tmp_path)
    lines = read_all(tmp_path)
    assert len(lines) == result.events > 0
    events = [decode(line) for line in lines]
    kinds = Counter(e.kind for e in events)
    for kind in (
        EventKind.MEMBER_JOINED,
        EventKind.FETCH_STARTED,
        EventKind.FETCH_STOPPED,
        EventKind.COMMIT,
        EventKind.CALLBACK,
        EventKind.REBALANCE_STARTED,
        EventKind.REBALANCE_ENDED,
        EventKind.EPOCH_CHANGED,
    ):
        assert kinds[kind] > 0, kind
    # Like a real emitter: per member, seq runs 0, 1, 2, ... in time order.
    by_member: dict[str, list[tuple[float, int]]] = {}
    for e in events:
        by_member.setdefault(e.header.member_id, []).append((e.header.ts, e.header.seq))
    for stamps in by_member.values():
        stamps.sort(key=lambda s: s[1])
        assert [seq for _, seq in stamps] == list(range(len(stamps)))
        assert [ts for ts, _ in stamps] == sorted(ts for ts, _ in stamps)


def test_same_seed_same_files(tmp_path: Path) -> None:
    generate(SMALL, tmp_path / "a")
    generate(SMALL, tmp_path / "b")
    generate(dataclasses.replace(SMALL, seed=4), tmp_path / "c")
    assert read_all(tmp_path / "a") == read_all(tmp_path / "b")
    assert read_all(tmp_path / "a") != read_all(tmp_path / "c")


def test_injected_overlaps_are_written_as_ground_truth(tmp_path: Path) -> None:
    result = generate(dataclasses.replace(SMALL, inject_double_ownership=1), tmp_path)
    assert result.injected
    truth = json.loads((tmp_path / "injected.json").read_text())
    assert truth == [dataclasses.asdict(o) for o in result.injected]
    for overlap in result.injected:
        assert overlap.start < overlap.end
        assert overlap.faulty_member != overlap.new_owner
    assert json.loads((tmp_path / "injected.json").read_text()) != []


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigError, match="--members must be >= 1.*--hours must be > 0"):
        SynthConfig(members=0, hours=0)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--out", str(tmp_path), "--members", "3", "--partitions", "6", "--hours", "0.1"])
    assert code == 0
    assert "events" in capsys.readouterr().out
    assert read_all(tmp_path)
    assert main(["--out", str(tmp_path), "--members", "0"]) == 2
