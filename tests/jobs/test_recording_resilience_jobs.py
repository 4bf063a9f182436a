"""The recorder's own trouble is not the monitor's, in real time: ``distmon record`` under a
file-size limit, fed a simulated 32-rank job as it happens, stops the recording, says so
once in one line, and still names the rank that hangs after. The writer's troubles without a
running recorder: tests/unit/test_recording_resilience.py."""

from __future__ import annotations

import resource
import signal
import subprocess
import time
from pathlib import Path

from distmon.monitor.recording.format import received
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from tests.support.commands import DISTMON
from tests.support.messages import sender
from tests.support.simulate import SimJob

LIMIT = 16 * 1024
"""Bytes the recorder's file may grow to: full within the first seconds of 32 ranks."""


def test_a_file_that_cannot_grow_stops_the_recording_not_the_monitor(tmp_path: Path, endpoint: str) -> None:
    """``distmon record`` under a file-size limit (SIGXFSZ ignored, so writes fail with EFBIG
    as on a full disk): the rank that hangs after the file is full is still named."""
    out = tmp_path / "run.distmon"

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    recorder = subprocess.Popen(
        [*DISTMON, "record", "--out", str(out), "--endpoint", endpoint],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=small_disk,
    )
    sim = SimJob(world=32, start=time.time() + 1.0).hang(5, at=6)
    try:
        with sender(endpoint, linger=0) as push:
            for t, raw in sim.stream(until=18):
                time.sleep(max(0.0, t - time.time()))
                push.send(raw)
    finally:
        recorder.send_signal(signal.SIGTERM)
        _, err = recorder.communicate(timeout=30)
    assert recorder.returncode == 0, err
    lines = err.splitlines()
    stopped = [i for i, line in enumerate(lines) if "stopped at" in line]
    assert len(stopped) == 1, err
    assert lines[stopped[0]].startswith(f"distmon: the recording {out} stopped at "), err
    assert "File too large" in lines[stopped[0]] and "watching and alerting go on" in lines[stopped[0]], err
    named = [i for i, line in enumerate(lines) if "hang" in line and "rank 5" in line]
    assert named and named[0] > stopped[0], err  # named after the file was full
    assert "Traceback" not in err, err
    assert out.stat().st_size <= LIMIT
    _, records = read_recording(str(out))
    assert sum(1 for _ in received(records)) > 32  # the part written before reads back
    load_recording(str(out))
