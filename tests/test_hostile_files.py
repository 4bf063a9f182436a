"""Crafted recordings: `distmon report` and `distmon replay` fail with one line and exit 2,
reading at most one record into memory, whatever the file claims."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from distmon.monitor import postmortem
from distmon.monitor.alerts import Alert, Change
from distmon.monitor.postmortem import load
from distmon.monitor.recording import RecordingError, RecordingWriter
from distmon.wire import Report, encode

HEADER = msgpack.packb({"format": "distmon-recording", "version": 1, "created": 1_700_000_000.0})
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
    "a one-megabyte payload": (
        HEADER + b"\x93\xa1m\xcb" + b"\x00" * 8 + b"\xc6\x00\x10\x00\x00" + b"\x00" * 2**20,
        "max_bin_len",
    ),
    "a two-gigabyte payload": (HEADER + b"\xc6\x7f\xff\xff\xff" + b"\x00" * 10_000_000, "a record over"),
    "a million empty maps": (HEADER + b"\xdd\x00\x0f\x42\x40" + b"\x80" * 1_000_000, "max_array_len"),
    "a time beyond any clock": (HEADER + message(1e300), "a record at time"),
    "a time that is not a number": (HEADER + msgpack.packb(["m", float("nan"), b""]), "a record at time"),
    "a header from no clock": (msgpack.packb({"format": "distmon-recording", "version": 1, "created": "x"}), "header"),
}


@pytest.mark.parametrize("command", ["report", "replay"])
@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_recording_is_one_line_exit_2_and_bounded_memory(tmp_path: Path, command: str, case: str) -> None:
    content, reason = CRAFTED[case]
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
    for rank, world in [(0, 2), (1, 2), (10**18, 2), (3, 10**18), (-1, 2), *((r, 2) for r in range(2, 50_000))]:
        # bare reports, as version 1 sent them (still read): no frame header holds such numbers
        report = Report("j", rank, world, "h", 100 + rank, 1.7e9, 0, 1.0)
        writer.message(1_700_000_001.0, msgpack.packb(dataclasses.asdict(report), use_bin_type=True))
    writer._write(["d", 1_700_000_002.0, {"no_key": 3, "bogus": "many", "negative": -5, "huge": 2**64 - 1}])
    writer.close()
    result = run_measured("report", str(path))
    assert result["code"] == 0, result["stderr"]
    pm = load(str(path))
    assert sorted(pm.state.ranks) == [0, 1] and pm.state.world == 2
    assert pm.state.dropped == {"rank_out_of_range": 50_000 - 2 + 2, "world_too_large": 1, "no_key": 3}
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
