"""Fuzzing every reader of files a user hands us (issue 31): dump pickles and JSON, job logs
and recordings, mutated from valid files or built nested and oversized. Whatever the bytes,
a reader returns or raises its own one-line error, never another exception, and each case
ends within :data:`LIMIT` seconds."""

from __future__ import annotations

import io
import json
import pickle
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distmon.channel import Batch
from distmon.export.plain import render
from distmon.flightrecorder.fields import read_dump
from distmon.flightrecorder.loading import MAX_DEPTH, DumpError, load
from distmon.forensics.analysis import analyze
from distmon.forensics.logs import read_log
from distmon.monitor.recording.file import RecordingError, RecordingWriter, read_recording
from distmon.monitor.recording.readback import load as load_recording
from distmon.monitor.state.alerts import Alert, Change
from distmon.wire import Report, encode
from tests.support.nccl_dumps import Group, RankRecorder

LIMIT = 2.0
"""Seconds one fuzzed file may take to read, on a loaded 2-core machine."""
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def timed(read: object, *args: object) -> None:
    started = time.monotonic()
    read(*args)  # type: ignore[operator]
    assert time.monotonic() - started < LIMIT


def a_dump() -> dict[str, object]:
    r = RankRecorder(0)
    r.join(Group("0", "default_pg", [0, 1]))
    for _ in range(3):
        r.collective("0", "all_reduce")
    r.collective("0", "all_reduce", done=False)
    return r.dump()


PICKLE = pickle.dumps(a_dump(), protocol=2)
JSON = json.dumps(a_dump()).encode()

MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
    min_size=1,
    max_size=6,
)


def mutated(raw: bytes, mutations: list[tuple[str, float, bytes]]) -> bytes:
    out = bytearray(raw)
    for how, where, data in mutations:
        at = min(int(where * len(out)), max(0, len(out) - 1))
        if how == "flip" and out:
            out[at] ^= data[0] or 1
        elif how == "insert":
            out[at:at] = data
        else:
            del out[at : at + len(data)]
    return bytes(out)


def read_a_dump(raw: bytes) -> None:
    try:
        read_dump(load(raw), {})
    except DumpError as e:
        assert "\n" not in str(e)


@FUZZ
@given(MUTATIONS, st.sampled_from([PICKLE, JSON]))
def test_mutated_dumps_are_read_or_refused(mutations: list[tuple[str, float, bytes]], raw: bytes) -> None:
    timed(read_a_dump, mutated(raw, mutations))


STRUCTURE = st.sampled_from(
    [
        *(bytes([op]) for op in b"()]}\x85\x86\x87tldaesu012N\x94"),
        *(b"K\x01", b"\x8c\x01a", b"\x8a\x09" + b"\xff" * 9, b"G" + b"\x00" * 8, b"h\x00", b"q\x00"),
    ]
)


@FUZZ
@given(st.lists(STRUCTURE, max_size=300), st.integers(0, 3), st.integers(0, 200_000))
def test_built_pickles_nested_or_oversized_are_read_or_refused(program: list[bytes], wrap: int, depth: int) -> None:
    """Pickles written instruction by instruction: random structure, then a tuple, list or
    dict nested ``depth`` deep, or a list holding itself ``depth`` times."""
    nested = [
        b")" + b"\x85" * depth,
        b"(" * depth + b"K\x01" + b"l" * depth,
        b"(\x8c\x01a" * depth + b"N" + b"d" * depth,
        b"]\x94" + b"h\x00\x85a" * depth,
    ][wrap]
    raw = b"\x80\x02}\x8c\x09pg_status" + b"".join(program) + nested + b"s."
    timed(read_a_dump, raw)
    if depth > MAX_DEPTH and wrap != 3:
        with pytest.raises(DumpError):
            load(raw)


@FUZZ
@given(st.integers(1, 100_000), st.sampled_from([b"[", b'{"a":', b"[{}, "]))
def test_deep_json_is_read_or_refused(depth: int, opening: bytes) -> None:
    timed(read_a_dump, b'{"version": "2.10", "entries": ' + opening * depth)


WATCHDOG = (
    "[rank{rank}]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, "
    "NumelOut=4, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
)
LOG = "\n".join(
    [WATCHDOG.format(rank=r) for r in range(4)]
    + ["[rank2]:Traceback (most recent call last):", '[rank2]:  File "train.py", line 3, in <module>', "x"]
)


def read_a_log(text: str) -> None:
    read_log(io.StringIO(text))


@FUZZ
@given(MUTATIONS)
def test_mutated_logs_are_read(mutations: list[tuple[str, float, bytes]]) -> None:
    timed(read_a_log, mutated(LOG.encode(), mutations).decode("utf-8", "replace"))


PREFIXES = [WATCHDOG.format(rank=1)[:n] for n in (8, 60, 100, 150, 200)] + ["WorkNCCL(", "Timeout at NCCL work: "]


@settings(max_examples=20, deadline=None)
@given(st.integers(1_000, 64 * 1024), st.sampled_from(PREFIXES))
def test_long_lines_repeating_a_prefix_are_read_in_time(length: int, prefix: str) -> None:
    timed(read_a_log, (prefix * (length // len(prefix)) + "\n") * 3)


def a_recording(path: Path) -> bytes:
    writer = RecordingWriter(str(path))
    frames = [encode(Report("j", r, 4, "h", 100 + r, 1.7e9, 0, 1.0)) for r in range(4)]
    for i, frame in enumerate(frames):
        writer.message(1.7e9 + i, frame)
    writer.batch(1.7e9 + 5, Batch.of(frames))
    writer.alert(1.7e9 + 6, Change("raised", Alert("hang", "critical", [2], 1.7e9 + 6, "stuck", "evidence")))
    writer.dropped(1.7e9 + 7, Counter({"malformed": 2}))
    writer.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return a_recording(tmp_path_factory.mktemp("fuzz") / "valid.distmon")


def read_a_recording(path: str) -> None:
    try:
        _, records = read_recording(path)
        sum(1 for _ in records)
        records.trouble()
        render(load_recording(path))
    except RecordingError as e:
        assert "\n" not in str(e)


@FUZZ
@given(MUTATIONS)
def test_mutated_recordings_are_read_or_refused(
    recording: bytes, tmp_path_factory: pytest.TempPathFactory, mutations: list[tuple[str, float, bytes]]
) -> None:
    path = tmp_path_factory.mktemp("mutated") / "r.distmon"
    path.write_bytes(mutated(recording, mutations))
    timed(read_a_recording, str(path))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MUTATIONS, st.integers(0, 3))
def test_a_set_of_mutated_dumps_is_analysed(
    tmp_path_factory: pytest.TempPathFactory, mutations: list[tuple[str, float, bytes]], which: int
) -> None:
    folder = tmp_path_factory.mktemp("dumps")
    for rank in range(4):
        raw = [PICKLE, JSON][rank % 2]
        (folder / f"nccl_trace_rank_{rank}").write_bytes(mutated(raw, mutations) if rank == which else raw)
    timed(analyze, [str(folder)])
