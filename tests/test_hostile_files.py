"""Crafted recordings: `distmon report` and `distmon replay` fail with one line and exit 2,
reading at most one record into memory, whatever the file claims; cut anywhere, a recording
reads up to its last whole record."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import msgpack
import pytest
from support.simulate import SimJob

from distmon.channel import Batch, Relay
from distmon.monitor import postmortem
from distmon.monitor.alerts import Alert, Change
from distmon.monitor.postmortem import load
from distmon.monitor.recording import (
    AlertEvent,
    BatchRecord,
    Message,
    RecordingError,
    RecordingWriter,
    read_recording,
)
from distmon.wire import Report, encode

HEADER = msgpack.packb({"format": "distmon-recording", "version": 1, "created": 1_700_000_000.0})
HEADER_V2 = msgpack.packb({"format": "distmon-recording", "version": 2, "created": 1_700_000_000.0})
PEAK_MB = 150
"""More than the Python interpreter and distmon's imports, far less than any claim below."""
PEAK = """
import json, resource, subprocess, sys
argv = [sys.executable, "-m", "distmon", *sys.argv[1:]]
done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"code": done.returncode, "stderr": done.stderr, "peak_mb": peak}))
"""


def run_measured(*args: str) -> dict:
    """A distmon command, its exit code, stderr and peak memory (MB)."""
    result = subprocess.run([sys.executable, "-c", PEAK, *args], capture_output=True, text=True, timeout=60)
    return json.loads(result.stdout)


def message(t: float = 1_700_000_001.0) -> bytes:
    report = Report(job="j", rank=0, world=1, host="h", pid=1, t=t, n=0, interval=1.0)
    return msgpack.packb(["m", t, encode(report)])


CRAFTED = {
    "deep nesting": (HEADER + message() + b"\x91" * 200_000, "nested too deep"),
    "a map of four billion entries": (HEADER + b"\xdf\xff\xff\xff\xff" + b"\xc0" * 1000, "max_map_len"),
    "an array of four billion items": (HEADER + b"\xdd\xff\xff\xff\xff" + b"\xc0" * 1000, "max_array_len"),
    "a two-megabyte string": (HEADER + b"\xdb\x00\x20\x00\x00" + b"x" * 3_000_000, "max_str_len"),
    "a two-gigabyte string": (HEADER + b"\xdb\x7f\xff\xff\xff" + b"x" * 10_000_000, "a record over"),
    "a two-megabyte payload": (
        HEADER + b"\x93\xa1m\xcb" + b"\x00" * 8 + b"\xc6\x00\x20\x00\x00" + b"\x00" * 2**21,
        "max_bin_len",
    ),
    "a two-gigabyte payload": (HEADER + b"\xc6\x7f\xff\xff\xff" + b"\x00" * 10_000_000, "a record over"),
    "a million empty maps": (HEADER + b"\xdd\x00\x0f\x42\x40" + b"\x80" * 1_000_000, "max_array_len"),
    "a time beyond any clock": (HEADER + message(1e300), "a record at time"),
    "a time that is not a number": (HEADER + msgpack.packb(["m", float("nan"), b""]), "a record at time"),
    "a header from no clock": (msgpack.packb({"format": "distmon-recording", "version": 1, "created": "x"}), "header"),
}


def deflated(*parts: bytes, end: bool = False) -> bytes:
    """``parts`` through one zlib stream, flushed as the writer does, ended if ``end``."""
    deflate = zlib.compressobj()
    out = b"".join(deflate.compress(part) for part in parts)
    return out + deflate.flush(zlib.Z_FINISH if end else zlib.Z_SYNC_FLUSH)


NOISE = random.Random(18).randbytes(6 * 2**20)
"""Bytes that do not compress: a claim inside them reaches the reader's limits, not its
compression-bomb check."""
V2 = HEADER_V2 + deflated(message())
CRAFTED_V2 = {
    "v2: a bomb of zeros": (HEADER_V2 + deflated(*[b"\x00" * 2**20] * 300), "compression bomb"),
    "v2: a bomb of records": (
        HEADER_V2 + deflated(*[msgpack.packb(["d", 1_700_000_000.0, {}]) * 50_000] * 300),
        "compression bomb",
    ),
    "v2: a bomb in one record": (HEADER_V2 + deflated(b"\xc6\x7f\xff\xff\xff", *[b"\x00" * 2**20] * 300), "bomb"),
    "v2: a two-gigabyte payload": (HEADER_V2 + deflated(b"\xc6\x7f\xff\xff\xff" + NOISE), "a record over"),
    "v2: a two-megabyte payload": (
        HEADER_V2 + deflated(b"\x93\xa1m\xcb" + b"\x00" * 8 + b"\xc6\x00\x20\x00\x00" + NOISE[: 2**21]),
        "max_bin_len",
    ),
    "v2: a map of four billion entries": (
        HEADER_V2 + deflated(b"\xdf\xff\xff\xff\xff" + b"\xc0" * 1000),
        "max_map_len",
    ),
    "v2: deep nesting": (HEADER_V2 + deflated(message() + b"\x91" * 200_000), "nested too deep"),
    "v2: a time beyond any clock": (HEADER_V2 + deflated(message(1e300)), "a record at time"),
    "v2: garbage after the header": (HEADER_V2 + b"garbage " * 1000, "incorrect header check"),
    "v2: uncompressed records after the header": (HEADER_V2 + message() * 100, "incorrect header check"),
    "v2: garbage inside the stream": (V2 + NOISE[:100_000], "is damaged at record 1 (by byte"),
    "v2: bytes after the end": (HEADER_V2 + deflated(message(), end=True) + message(), "bytes follow the end"),
    "v2: a header from no clock": (
        msgpack.packb({"format": "distmon-recording", "version": 2, "created": -1}) + deflated(message()),
        "header",
    ),
}


@pytest.mark.parametrize("command", ["report", "replay"])
@pytest.mark.parametrize("case", [*CRAFTED, *CRAFTED_V2])
def test_a_crafted_recording_is_one_line_exit_2_and_bounded_memory(tmp_path: Path, command: str, case: str) -> None:
    content, reason = {**CRAFTED, **CRAFTED_V2}[case]
    path = tmp_path / "crafted.distmon"
    path.write_bytes(content)
    result = run_measured(command, str(path))
    assert result["code"] == 2, result["stderr"]
    lines = result["stderr"].strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], result["stderr"]
    assert lines[0].startswith(f"distmon {command}: {path}")
    assert result["peak_mb"] < PEAK_MB


def test_a_claim_longer_than_the_file_is_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "torn.distmon"
    path.write_bytes(HEADER + message() + b"\xdb\x7f\xff\xff\xff" + b"x" * 3_000_000)
    result = run_measured("report", str(path))
    assert result["code"] == 0, result["stderr"]
    assert result["peak_mb"] < PEAK_MB


def test_absurd_counts_inside_valid_records_are_kept_out(tmp_path: Path) -> None:
    """A recording whose messages claim absurd ranks and world sizes, and drop counts that
    are not counts: reported like any other, the claims refused and counted."""
    path = tmp_path / "absurd.distmon"
    writer = RecordingWriter(str(path))
    for rank, world in [(0, 2), (1, 2), (10**18, 2), (3, 10**18), (-1, 2), *((r, 2) for r in range(2, 20_000))]:
        # bare reports, as version 1 sent them (still read): no frame header holds such numbers
        report = Report("j", rank, world, "h", 100 + rank, 1.7e9, 0, 1.0)
        writer.message(1_700_000_001.0, msgpack.packb(dataclasses.asdict(report), use_bin_type=True))
    writer._write(["d", 1_700_000_002.0, {"no_key": 3, "bogus": "many", "negative": -5, "huge": 2**64 - 1}])
    writer.close()
    result = run_measured("report", str(path))
    assert result["code"] == 0, result["stderr"]
    pm = load(str(path))
    assert sorted(pm.state.ranks) == [0, 1] and pm.state.world == 2
    assert pm.state.dropped == {"rank_out_of_range": 20_000 - 2 + 2, "world_too_large": 1, "no_key": 3}
    assert result["peak_mb"] < PEAK_MB


def test_alert_text_beyond_the_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postmortem, "MAX_ALERT_BYTES", 10_000)
    path = tmp_path / "alerts.distmon"
    writer = RecordingWriter(str(path))
    for i in range(20):
        writer.alert(1_700_000_000.0 + i, Change("raised", Alert("hang", "critical", [0], 1.7e9, "s", "d" * 1000)))
    writer.close()
    with pytest.raises(RecordingError, match="MiB of alerts"):
        load(str(path))


def small_recording(path: Path) -> list[object]:
    """A version 2 recording of every kind of record, and the records as written."""
    writer = RecordingWriter(str(path))
    frames = [encode(Report("j", r, 4, "h", 100 + r, 1.7e9, 0, 1.0)) for r in range(4)]
    alert = Alert("hang", "critical", [2], 1.7e9 + 3, "stuck", "evidence")
    writer.message(1.7e9 + 1, frames[0])
    writer.batch(1.7e9 + 2, Batch.of(frames[1:], Relay("node-b:7", "node-b")))
    writer.alert(1.7e9 + 3, Change("raised", alert))
    writer.dropped(1.7e9 + 4, Counter({"malformed": 2}))
    writer.batch(1.7e9 + 5, Batch(relays=[Relay("node-b:7", "node-b")]))
    writer.message(1.7e9 + 6, frames[3])
    writer.close()
    return list(read_recording(str(path))[1])


def test_a_recording_cut_at_any_byte_reads_up_to_its_last_whole_record(tmp_path: Path) -> None:
    whole = tmp_path / "whole.distmon"
    records = small_recording(whole)
    assert [type(r).__name__ for r in records] == [
        "Message", "BatchRecord", "AlertEvent", "Dropped", "BatchRecord", "Message"
    ]  # fmt: skip
    content = whole.read_bytes()
    cut = tmp_path / "cut.distmon"
    read = []
    for n in range(len(content)):
        cut.write_bytes(content[:n])
        if n < len(HEADER_V2):
            with pytest.raises(RecordingError, match=r"is empty|ends inside its header"):
                read_recording(str(cut))
            continue
        got = list(read_recording(str(cut))[1])
        assert got == records[: len(got)], n
        read.append(len(got))
    assert read == sorted(read) and read[0] == 0 and read[-1] == len(records)


def test_everything_up_to_the_last_flush_reads_back(tmp_path: Path) -> None:
    """A crash, or a full disk, loses only what came after the last flush."""
    path = tmp_path / "run.distmon"
    writer = RecordingWriter(str(path))
    flushed = []
    for t, raw in SimJob(world=4).stream(until=5):
        writer.message(t, raw)
        if writer.records % 4 == 0:
            writer.sync()
            flushed.append((path.stat().st_size, writer.records))
    writer.close()
    content = path.read_bytes()
    cut = tmp_path / "cut.distmon"
    for size, count in flushed:
        cut.write_bytes(content[:size])
        assert len(list(read_recording(str(cut))[1])) == count


def test_a_version_1_file_still_reads_and_reports(tmp_path: Path) -> None:
    """The records of a version 1 file are those of the same file in version 2."""
    v2 = tmp_path / "v2.distmon"
    records = small_recording(v2)
    v1 = tmp_path / "v1.distmon"
    written = [
        ["m", r.t, r.payload] if isinstance(r, Message) else
        ["a", r.t, r.event, r.alert.to_json(), r.alert.key] if isinstance(r, AlertEvent) else
        ["d", r.t, dict(r.counts)]
        for r in records
        if not isinstance(r, BatchRecord)
    ]  # fmt: skip
    v1.write_bytes(HEADER + b"".join(msgpack.packb(w) for w in written))
    header, read = read_recording(str(v1))
    assert header["version"] == 1
    assert list(read) == [r for r in records if not isinstance(r, BatchRecord)]
    header, read = read_recording(str(Path(__file__).parent / "data" / "hang-rank2.distmon"))
    kinds = Counter(type(r).__name__ for r in read)
    assert header["version"] == 1 and kinds == {"Message": 52, "AlertEvent": 5}
