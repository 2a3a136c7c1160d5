"""Fuzz kgroup's response decoding: ``python -m kgroup.protocol.fuzz --seconds 60``.

For every API and version kgroup negotiates (:data:`~kgroup.protocol.apis.SUPPORTED_VERSIONS`),
valid response frames are generated from kio's schema and then broken: random
bytes, truncations, bit flips, bytes overwritten with extreme lengths (``ff ff ff ff``,
``7f ff ff ff``, long varints), insertions, deletions and splices of two frames.
Each frame goes through :func:`~kgroup.protocol.framing.decode_response`; the
only acceptable outcomes are a decoded response or
:class:`~kgroup.errors.MalformedResponseError`.

A decoder that aborts takes its process with it, so the long run happens in a
worker subprocess: before decoding each frame the worker copies it into a
memory-mapped file, and if the worker dies the parent reads the frame that
killed it from there, prints it in hex and starts a new worker. At the end the
parent prints how many frames were tried and what became of them, and exits
non-zero if anything but a typed error came out (or a worker died).

The generator and the mutations are plain functions over :class:`random.Random`
so the unit suite can use them too (``tests/unit/test_fuzz_decoding.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import mmap
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from kio.static.protocol import ResponsePayload

from kgroup.errors import MalformedResponseError
from kgroup.protocol import structure
from kgroup.protocol.apis import SUPPORTED_VERSIONS, ApiKey, response_class
from kgroup.protocol.framing import decode_response, response_header_class

__all__ = [
    "CORRELATION_ID",
    "Outcome",
    "Target",
    "mutate",
    "random_body",
    "random_frame",
    "targets",
    "try_frame",
]

CORRELATION_ID: Final = 7
"""The correlation id of every generated frame (and the one decoding expects)."""

_INTERESTING: Final = (
    b"\xff\xff\xff\xff",  # -1: null, or 4 GiB as unsigned
    b"\x7f\xff\xff\xff",  # the largest int32
    b"\x80\x00\x00\x00",  # the smallest int32
    b"\xff\xff",
    b"\x7f\xff",
    b"\x00\x00",
    b"\x9a\xff\xff\xff\x74",  # an unsigned varint of ~3.1e10 (issue 10's abort)
    b"\xff\xff\xff\xff\x0f",  # the largest 5-byte unsigned varint
    b"\xff\xff\xff\xff\xff\xff",  # a varint that never ends within five bytes
    b"\x80",
    b"\x00",
    b"\x01",
    b"\xfe",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """One API version whose responses are fuzzed."""

    api: ApiKey
    version: int

    @property
    def response_cls(self) -> type[ResponsePayload]:
        return response_class(self.api, self.version)

    def __str__(self) -> str:
        return f"{self.api.api_name} v{self.version}"


def targets() -> list[Target]:
    """Every API version kgroup negotiates."""
    return [
        Target(api, version)
        for api, supported in SUPPORTED_VERSIONS.items()
        for version in range(supported.min, supported.max + 1)
    ]


# --- valid frames from the schema --------------------------------------------------------


_KNOWN_CODES: Final = sorted(structure._KNOWN_ERROR_CODES)


def _random_text(rnd: random.Random) -> bytes:
    size = rnd.choice((0, 1, 3, 8, 20))
    alphabet = "abcxyz-_.0123456789é€"
    return "".join(rnd.choice(alphabet) for _ in range(size)).encode()


def _random_value(op: structure._Op, rnd: random.Random, depth: int, unknown: bool) -> bytes:
    kind, arg, nullable, _ = op
    if kind == structure._FIXED:
        return rnd.randbytes(arg)
    if kind == structure._BOOL:
        return bytes([rnd.randint(0, 1)])
    if kind == structure._ERROR_CODE:
        code = 0 if rnd.random() < 0.7 else rnd.choice(_KNOWN_CODES)
        return struct.pack(">h", code)
    if kind == structure._TIMESTAMP:
        if nullable and rnd.random() < 0.2:
            return struct.pack(">q", -1)
        return struct.pack(">q", rnd.randint(0, 2**41))
    if kind in (structure._LEN16, structure._LEN32, structure._LENV):
        if nullable and rnd.random() < 0.2:
            return {structure._LEN16: b"\xff\xff", structure._LEN32: b"\xff\xff\xff\xff"}.get(
                kind, b"\x00"
            )
        data = _random_text(rnd) if arg or kind == structure._LEN16 else rnd.randbytes(4)
        if kind == structure._LEN16:
            return struct.pack(">h", len(data)) + data
        if kind == structure._LEN32:
            return struct.pack(">i", len(data)) + data
        return structure.encode_uvarint(len(data) + 1) + data
    if kind == structure._ENTITY:
        return _random_entity(arg, rnd, depth + 1, unknown)
    if kind in (structure._ARR32, structure._ARRV):
        if nullable and rnd.random() < 0.2:
            return b"\xff\xff\xff\xff" if kind == structure._ARR32 else b"\x00"
        count = 0 if depth > 3 else rnd.choice((0, 1, 2, 3, 5))
        items = b"".join(_random_value(arg, rnd, depth + 1, unknown) for _ in range(count))
        prefix = (
            struct.pack(">i", count)
            if kind == structure._ARR32
            else structure.encode_uvarint(count + 1)
        )
        return prefix + items
    raise AssertionError(f"unknown operation kind {kind}")


def _random_entity(
    schema: structure._Schema, rnd: random.Random, depth: int, unknown: bool
) -> bytes:
    if schema.nullable:
        if rnd.random() < 0.2:
            return b"\xff"
        head = b"\x01"
    else:
        head = b""
    body = b"".join(_random_value(op, rnd, depth, unknown) for op in schema.ops)
    if not schema.flexible:
        return head + body
    fields: list[tuple[int, bytes]] = [
        # Inside a known tag's value, an unknown one cannot be skipped (see structure).
        (tag, _random_value(schema.tagged[tag], rnd, depth, False))
        for tag in sorted(schema.tagged)
        if rnd.random() < 0.3
    ]
    if unknown and rnd.random() < 0.3:
        # A tag a newer broker might send: decoding must skip it.
        fields.append((rnd.randint(max(schema.tagged, default=0) + 1, 300), rnd.randbytes(3)))
    tagged = structure.encode_uvarint(len(fields))
    for tag, value in fields:
        tagged += structure.encode_uvarint(tag) + structure.encode_uvarint(len(value)) + value
    return head + body + tagged


def random_body(cls: type[ResponsePayload], rnd: random.Random, *, unknown: bool = False) -> bytes:
    """A random, valid encoding of a ``cls`` response body.

    ``unknown`` adds, now and then, tagged fields the schema lacks (which Kafka
    readers skip; kio alone refuses them, kgroup's decoding skips them).
    """
    return _random_entity(structure._compile(cls, False, False, True), rnd, 0, unknown)


def random_frame(target: Target, rnd: random.Random, *, unknown: bool = False) -> bytes:
    """A valid response frame of ``target``: size prefix, header, random body
    (``unknown``: see :func:`random_body`)."""
    cls = target.response_cls
    header = struct.pack(">i", CORRELATION_ID)
    if response_header_class(cls).__flexible__:
        header += b"\x00"  # no tagged fields
    payload = header + random_body(cls, rnd, unknown=unknown)
    if target.api == ApiKey.API_VERSIONS and target.version > 0:
        # UNSUPPORTED_VERSION is read as v0 on purpose; keep generated frames on
        # the version they claim to be.
        payload = payload[:4] + b"\x00\x00" + payload[6:]
    return struct.pack(">i", len(payload)) + payload


# --- breaking them ---------------------------------------------------------------------


def _truncate(frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    return frame[: rnd.randrange(len(frame))] if frame else frame


def _truncate_keep_prefix(frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    # Cut the body but make the size prefix agree, so decoding gets past framing.
    payload = frame[4:]
    cut = payload[: rnd.randrange(len(payload) + 1)]
    return struct.pack(">i", len(cut)) + cut


def _flip_bits(frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(rnd.randint(1, 4)):
        if data:
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    return bytes(data)


def _overwrite(frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    # Extreme lengths and varints where a length may be: after the size prefix.
    value = rnd.choice(_INTERESTING)
    at = rnd.randrange(4, max(5, len(frame)))
    return frame[:at] + value + frame[at + len(value) :]


def _insert(frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    at = rnd.randrange(len(frame) + 1)
    return frame[:at] + rnd.choice((rnd.randbytes(rnd.randint(1, 8)), *_INTERESTING)) + frame[at:]


def _delete(frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    if not frame:
        return frame
    at = rnd.randrange(len(frame))
    return frame[:at] + frame[at + rnd.randint(1, 8) :]


def _splice(frame: bytes, rnd: random.Random, other: bytes) -> bytes:
    return frame[: rnd.randrange(len(frame) + 1)] + other[rnd.randrange(len(other) + 1) :]


def _random_bytes(_frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    return rnd.randbytes(rnd.choice((0, 1, 3, 4, 8, 16, 64, 256)))


def _random_payload(_frame: bytes, rnd: random.Random, _other: bytes) -> bytes:
    # Random bytes behind a matching size prefix and the expected correlation id.
    body = struct.pack(">i", CORRELATION_ID) + rnd.randbytes(rnd.choice((0, 1, 2, 5, 17, 64)))
    return struct.pack(">i", len(body)) + body


_MUTATIONS: Final[Sequence[Callable[[bytes, random.Random, bytes], bytes]]] = (
    _truncate,
    _truncate_keep_prefix,
    _flip_bits,
    _overwrite,
    _overwrite,
    _insert,
    _delete,
    _splice,
    _random_bytes,
    _random_payload,
)


def _fix_prefix(frame: bytes) -> bytes:
    return struct.pack(">i", max(0, len(frame) - 4)) + frame[4:] if len(frame) >= 4 else frame


def mutate(frame: bytes, rnd: random.Random, other: bytes = b"") -> bytes:
    """``frame`` broken by one to three random mutations (``other`` feeds splices).

    Most of the time the size prefix is then made to match the new length, so
    that the mutation reaches the body instead of stopping at the framing check.
    """
    for _ in range(rnd.randint(1, 3)):
        frame = rnd.choice(_MUTATIONS)(frame, rnd, other or frame)
    if rnd.random() < 0.8:
        frame = _fix_prefix(frame)
    return frame


class Outcome:
    """What decoding a frame gave: one of these names."""

    DECODED: Final = "decoded"
    MALFORMED: Final = "malformed"


def try_frame(frame: bytes, target: Target) -> str:
    """Decode ``frame`` as ``target``'s response: :attr:`Outcome.DECODED` or
    :attr:`Outcome.MALFORMED`; anything else the decoder raises propagates."""
    try:
        decode_response(frame, target.response_cls, CORRELATION_ID)
    except MalformedResponseError:
        return Outcome.MALFORMED
    return Outcome.DECODED


# --- the long run --------------------------------------------------------------------------

_SLOT: Final = 1 << 16
"""Bytes of the memory-mapped slot holding the frame being decoded."""
_SLOT_HEADER: Final = struct.Struct(">qhhi")  # frames tried, api key, version, frame length


def _worker(until: float, seed: int, slot_path: str) -> None:
    rnd = random.Random(seed)
    every = targets()
    # Generating a valid frame costs more than decoding one; mutate a pool of
    # them, renewing one member of the pool per round.
    pool = [random_frame(t, rnd, unknown=rnd.random() < 0.5) for t in every for _ in range(4)]
    pool_targets = [t for t in every for _ in range(4)]
    counts = {Outcome.DECODED: 0, Outcome.MALFORMED: 0, "unexpected": 0}
    unexpected: list[str] = []
    tried = 0
    with open(slot_path, "r+b") as file, mmap.mmap(file.fileno(), _SLOT) as slot:
        # At least one round, however late the worker started.
        while tried == 0 or time.time() < until:
            renew = rnd.randrange(len(pool))
            pool[renew] = random_frame(pool_targets[renew], rnd, unknown=rnd.random() < 0.5)
            for _ in range(50):
                index = rnd.randrange(len(pool))
                target, frame = pool_targets[index], pool[index]
                if rnd.random() < 0.95:
                    frame = mutate(frame, rnd, rnd.choice(pool))
                frame = frame[: _SLOT - _SLOT_HEADER.size]
                tried += 1
                _SLOT_HEADER.pack_into(slot, 0, tried, int(target.api), target.version, len(frame))
                slot[_SLOT_HEADER.size : _SLOT_HEADER.size + len(frame)] = frame
                try:
                    counts[try_frame(frame, target)] += 1
                except Exception as exc:
                    counts["unexpected"] += 1
                    if len(unexpected) < 20:
                        unexpected.append(f"{target}: {frame.hex()}: {exc!r}")
    print(json.dumps({"tried": tried, "counts": counts, "unexpected": unexpected}))


def _crashed_frame(slot_path: str) -> tuple[int, str]:
    """How many frames a dead worker had tried, and the one it died on."""
    with open(slot_path, "rb") as file:
        data = file.read(_SLOT)
    tried, api, version, size = _SLOT_HEADER.unpack_from(data, 0)
    frame = data[_SLOT_HEADER.size : _SLOT_HEADER.size + size]
    try:
        name = ApiKey(api).api_name
    except ValueError:
        name = f"api key {api}"
    return tried, f"{name} v{version}: {frame.hex()}"


def _run(seconds: float, seed: int) -> int:
    totals = {Outcome.DECODED: 0, Outcome.MALFORMED: 0, "unexpected": 0}
    tried = 0
    crashes: list[str] = []
    unexpected: list[str] = []
    started = time.monotonic()
    # Workers get the wall-clock end, so that their start-up counts against it.
    until = time.time() + seconds
    with tempfile.TemporaryDirectory(prefix="kgroup-fuzz-") as tmp:
        slot_path = os.path.join(tmp, "slot")
        worker_seed = seed
        while until - time.time() > 0.5:
            Path(slot_path).write_bytes(b"\0" * _SLOT)
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kgroup.protocol.fuzz",
                    "--worker",
                    "--until",
                    f"{until:.3f}",
                    "--seed",
                    str(worker_seed),
                    "--slot",
                    slot_path,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            worker_seed += 1
            if proc.returncode != 0:
                worker_tried, frame = _crashed_frame(slot_path)
                tried += worker_tried
                crash = f"worker exited {proc.returncode} on {frame}"
                crashes.append(crash + "\n" + proc.stderr[-2000:])
                print("CRASH:", crash, file=sys.stderr)
                continue
            report = json.loads(proc.stdout.strip().splitlines()[-1])
            tried += report["tried"]
            for key, value in report["counts"].items():
                totals[key] += value
            unexpected.extend(report["unexpected"])
    elapsed = time.monotonic() - started
    print(
        f"fuzzed decode_response for {elapsed:.1f}s over {len(targets())} API versions: "
        f"{tried} frames tried, {totals[Outcome.DECODED]} decoded, "
        f"{totals[Outcome.MALFORMED]} MalformedResponseError, "
        f"{totals['unexpected']} other exceptions, {len(crashes)} worker crashes"
    )
    for line in unexpected[:20]:
        print("UNEXPECTED:", line)
    for crash in crashes:
        print("CRASHED:", crash)
    return 1 if crashes or totals["unexpected"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m kgroup.protocol.fuzz --seconds 60 [--seed N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m kgroup.protocol.fuzz", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--slot", help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    if args.worker:
        _worker(args.until, seed, args.slot)
        return 0
    print(f"seed {seed}")
    return _run(args.seconds, seed)


if __name__ == "__main__":
    sys.exit(main())
