"""`distmon record` and `distmon report` as a user runs them: real processes, a real ZeroMQ
stream with bad input mixed in, recordings cut off mid-write, and CLI mistakes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from distmon.monitor.detector import Detector
from distmon.monitor.monitor import Monitor
from distmon.monitor.postmortem import load
from distmon.monitor.recording import Message, RecordingWriter, read_recording
from distmon.simulate import SimJob, drive
from distmon.wire import MAX_MESSAGE_BYTES, report_bytes

DATA = Path(__file__).parent / "data"
DISTMON = [sys.executable, "-m", "distmon"]
ALERT_FIELDS = {"kind", "severity", "ranks", "t", "summary", "detail"}


def distmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DISTMON, *args], capture_output=True, text=True, timeout=60)


def bad_messages() -> list[bytes]:
    good = next(SimJob(world=1).stream(until=1))[1]
    report = msgpack.unpackb(report_bytes(good))
    return [
        b"\x00garbage\xff",
        good[: len(good) // 2],
        b"x" * (MAX_MESSAGE_BYTES + 1),
        msgpack.packb({**report, "v": 99}),
        msgpack.packb({**report, "rank": "zero"}),
        msgpack.packb([1, 2, 3]),
        b"",
    ]


def test_record_survives_bad_input_counts_it_and_keeps_the_good(tmp_path: Path, endpoint: str) -> None:
    out = tmp_path / "run.distmon"
    recorder = subprocess.Popen(
        [*DISTMON, "record", "--out", str(out), "--endpoint", endpoint], stderr=subprocess.PIPE, text=True
    )
    sim = SimJob(world=4).hang(2, at=3)
    context = zmq.Context()
    push = context.socket(zmq.DEALER)
    push.connect(endpoint)
    try:
        time.sleep(1.0)
        bad = bad_messages()
        sent = 0
        for i, (_, raw) in enumerate(sim.stream(until=4)):
            push.send(raw)
            sent += 1
            if i % 2 == 0:
                push.send(bad[i // 2 % len(bad)])
        time.sleep(1.5)
        _, records = read_recording(str(out))  # readable while the recorder runs
        assert sum(isinstance(r, Message) for r in records) == sent
        assert recorder.poll() is None, "bad input must not stop the recorder"
    finally:
        push.close(linger=0)
        context.term()
        recorder.send_signal(signal.SIGTERM)
        _, err = recorder.communicate(timeout=30)
    assert recorder.returncode == 0, err
    summary = err.strip().splitlines()[-1]
    assert f"{sent} messages from 4 ranks" in summary
    for reason in ("malformed", "oversized", "version"):
        assert reason in summary


def test_a_recording_cut_off_mid_write_still_reports(tmp_path: Path) -> None:
    path = tmp_path / "run.distmon"
    monitor = Monitor(Detector(), recorder=RecordingWriter(str(path)))
    drive(SimJob(world=4).exception(1, at=5), monitor, until=10)
    monitor.close()
    torn = msgpack.packb(["m", 1e9, next(SimJob(world=1).stream(until=1))[1]])
    with path.open("ab") as f:  # the process died in the middle of writing one more record
        f.write(torn[: len(torn) // 2])
    result = distmon("report", str(path), "--json")
    assert result.returncode == 0, result.stderr
    alerts = json.loads(result.stdout)
    assert [(a["kind"], a["ranks"]) for a in alerts] == [("rank_exception", [1])]
    assert all(set(a) == ALERT_FIELDS for a in alerts)


def test_report_puts_the_first_cause_on_top(tmp_path: Path) -> None:
    path = tmp_path / "run.distmon"
    sim = SimJob(world=8).kill(6, at=10)
    monitor = Monitor(Detector(probe=sim.probe), recorder=RecordingWriter(str(path)))
    drive(sim, monitor, until=20)
    monitor.close()
    text = distmon("report", str(path)).stdout
    first = text.split("FIRST CAUSE", 1)[1].splitlines()[0]
    assert "rank 6 stopped reporting" in first
    assert "Ranks at the end of the recording:" in text


def test_a_real_recording_replays_through_the_detector_to_the_same_culprit() -> None:
    """A recording of a real 4-rank gloo job whose rank 2 hung at step 30 (tests/data)."""
    _, records = read_recording(str(DATA / "hang-rank2.distmon"))
    monitor = Monitor(Detector())
    next_tick = None
    raised = []
    for record in records:
        if not isinstance(record, Message):
            continue
        next_tick = next_tick or record.t + 1
        while record.t >= next_tick:
            raised += [c.alert for c in monitor.tick(next_tick) if c.event == "raised"]
            next_tick += 1
        monitor.ingest(record.payload, record.t)
    hangs = [a for a in raised if a.kind == "hang"]
    assert hangs and hangs[0].ranks == [2]
    assert "inject" in hangs[0].detail, "the culprit's stack shows where it stopped"
    recorded = [a for a in load(str(DATA / "hang-rank2.distmon")).alerts if a.kind == "hang"]
    assert recorded[0].ranks == [2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot open"),
        (b"", "is empty"),
        (b"PK\x03\x04 a zip file", "not a distmon recording"),
        (msgpack.packb({"format": "distmon-recording", "version": 7}), "version 7"),
    ],
)
def test_report_on_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "file.distmon"
    if content is not None:
        path.write_bytes(content)
    result = distmon("report", str(path))
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [("report",), ("report", "x", "--bogus"), ("record",), ("frobnicate",), ("record", "--out", "/nonexistent/dir/x")],
)
def test_cli_mistakes_are_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    result = distmon(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=2048) | st.sampled_from(bad_messages()), max_size=20))
def test_the_monitor_pipeline_drops_and_counts_any_bytes(messages: list[bytes]) -> None:
    monitor = Monitor(Detector())
    for raw in messages:
        monitor.ingest(raw, 1.0)
    monitor.tick(2.0)
    assert sum(monitor.state.dropped.values()) + monitor.state.received == len(messages)
