"""The recorder's own trouble is not the monitor's: a file that cannot grow (a file-size
limit, /dev/full) or that is removed under it stops the recording, says so once in one line,
and leaves what was written readable; ``distmon record`` keeps watching and alerting (fed a
job in real time, under a file-size limit: tests/jobs/test_recording_resilience_jobs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distmon.monitor.recording.format import received
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from tests.support.commands import distmon
from tests.support.paths import REPO
from tests.support.simulate import SimJob


def test_dev_full_is_refused_at_the_start_in_one_line() -> None:
    result = distmon("record", "--out", "/dev/full", "--endpoint", "ipc:///tmp/distmon-dev-full-test.sock", timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "distmon record: cannot write /dev/full: No space left on device"


def test_a_file_removed_under_the_writer_stops_the_recording_once(tmp_path: Path) -> None:
    path = tmp_path / "run.distmon"
    said: list[str] = []
    writer = RecordingWriter(str(path), say=said.append)
    sim = SimJob(world=2)
    for t, raw in sim.stream(until=2):
        writer.message(t, raw)
    writer.sync()
    os.unlink(path)
    for t, raw in sim.stream(since=2, until=4):
        writer.message(t, raw)
    writer.sync()
    writer.close()
    assert len(said) == 1 and "the file was removed or replaced" in said[0], said
    assert writer.stopped is not None and writer.stopped.startswith(f"the recording {path} stopped at ")


@pytest.mark.parametrize("where", ["write", "close"])
def test_a_full_disk_mid_record_keeps_what_was_written_readable(tmp_path: Path, where: str) -> None:
    """The writer in a process with a file-size limit: a write or the close fails, neither raises."""
    path = tmp_path / "run.distmon"
    code = f"""
import resource, signal, sys
sys.path.insert(0, {str(REPO)!r})
from tests.support.paths import REPO
from tests.support.simulate import SimJob
from distmon.monitor.recording.writer import RecordingWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
writer = RecordingWriter({str(path)!r})
sim = SimJob(world=16)
for t, raw in sim.stream(until=4):
    writer.message(t, raw)
writer.sync()
print(writer.records, flush=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (writer._file.tell(), resource.RLIM_INFINITY))
if {where!r} == "write":
    for t, raw in sim.stream(since=4, until=60):
        writer.message(t, raw)
writer.close()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("stopped at") == 1 and "File too large" in done.stderr, done.stderr
    _, records = read_recording(str(path))
    assert sum(1 for _ in received(records)) == int(done.stdout) >= 4 * 16  # all that was synced
