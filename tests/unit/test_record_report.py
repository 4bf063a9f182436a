"""`distmon record` and `distmon report` as a user runs them: real processes, a real ZeroMQ
stream with bad input mixed in, recordings cut off mid-write, and CLI mistakes."""

from __future__ import annotations

import json
import math
import re
import shutil
import signal
import time
from pathlib import Path

import msgpack
import pytest

from distmon.export.html import read_series
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.batches import PIECE_BYTES
from distmon.monitor.recording.format import AlertEvent, BatchRecord, MessageRecord, received
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import Change
from distmon.wire import MAX_MESSAGE_BYTES
from distmon.wire.sockets import Batch, Relay
from tests.support.commands import distmon
from tests.support.messages import bad_messages, sender
from tests.support.paths import DATA
from tests.support.recorder import recording
from tests.support.simulate import SimJob, drive

ALERT_FIELDS = {"kind", "severity", "ranks", "t", "summary", "detail"}


def test_record_survives_bad_input_counts_it_and_keeps_the_good(tmp_path: Path, endpoint: str) -> None:
    out = tmp_path / "run.distmon"
    sim = SimJob(world=4).hang(2, at=3)
    with recording(out, endpoint) as recorder:
        with sender(endpoint, linger=0) as push:
            bad = bad_messages()
            sent = 0
            for i, (_, raw) in enumerate(sim.stream(until=4)):
                push.send(raw)
                sent += 1
                if i % 2 == 0:
                    push.send(bad[i // 2 % len(bad)])
            # readable while the recorder runs
            recorder.wait_recorded(f"{sent} recorded", lambda reports: len(reports) == sent, timeout=30)
            assert recorder.process.poll() is None, "bad input must not stop the recorder"
        err = recorder.stop()
    summary = err.strip().splitlines()[-1]
    assert f"{sent} messages from 4 ranks" in summary
    for reason in ("malformed", "oversized", "version"):
        assert reason in summary


def test_record_says_the_seconds_it_did_not_watch_apart_from_the_messages_it_dropped(
    tmp_path: Path, endpoint: str
) -> None:
    """A recorder stopped a few seconds (SIGSTOP, as a suspended VM) did not watch them: its
    closing line and the report say them in seconds, apart from the messages it dropped."""
    out = tmp_path / "run.distmon"
    stream = SimJob(world=2).stream(until=60)
    with recording(out, endpoint) as recorder:
        with sender(endpoint, linger=0) as push:
            push.send(b"\x00garbage\xff")
            for _ in range(4):
                push.send(next(stream)[1])
            recorder.wait_recorded("the reports", lambda reports: len(reports) == 4, timeout=30)
            recorder.process.send_signal(signal.SIGSTOP)
            time.sleep(3)  # the scenario itself: the recorder stands still this long
            recorder.process.send_signal(signal.SIGCONT)
        closing = recorder.stop().strip().splitlines()[-1]
    said = re.search(r"dropped: (.*); not watched: (.*); wrote", closing)
    assert said is not None, closing
    assert said[1] == "1 malformed" and re.fullmatch(r"\d+(\.0)?s monitor_paused_s", said[2]), closing
    done = distmon("report", str(out))
    assert f"4 messages; dropped: 1 malformed; not watched: {said[2]}" in done.stdout.splitlines(), done.stdout


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=["SIGHUP", "SIGKILL"])
def test_what_the_recorder_said_is_in_its_file_however_it_ends_the_moment_after(
    tmp_path: Path, endpoint: str, sig: signal.Signals
) -> None:
    """The recorder ended the moment it said an alert: its terminal closed (SIGHUP), it stops as
    cleanly as on SIGINT or SIGTERM, its file whole; killed, its file still holds the alert and
    what came before (real jobs, stopped by SIGINT and SIGTERM: tests/jobs/test_recorder_stopped_jobs.py)."""
    out = tmp_path / "run.distmon"
    with recording(out, endpoint) as recorder:
        # the job starts once the recorder listens (a loaded host starts it in seconds): a stream
        # begun before would go as one burst of seconds past, and then fall silent
        sim = SimJob(world=4, start=time.time()).exception(1, at=2)
        with sender(endpoint, linger=0) as push:
            for t, raw in sim.stream(until=30):
                time.sleep(max(0.0, t - time.time()))  # as the job happens
                push.send(raw)
                if " CRITICAL " in recorder.stderr():
                    break
        recorder.wait_critical("rank_exception", timeout=30)
        recorder.process.send_signal(sig)
        code = recorder.process.wait(30)
    said = [line.split(" CRITICAL ", 1)[1] for line in recorder.stderr().splitlines() if " CRITICAL " in line]
    report = distmon("report", "--json", str(out))
    assert report.returncode == 0, report.stderr
    assert [f"{a['kind']}: {a['summary']}" for a in json.loads(report.stdout)] == said
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
        return
    assert code == 0 and report.stderr == "", report.stderr  # closed: the file whole
    closing = recorder.stderr().strip().splitlines()[-1]
    messages = distmon("report", str(out)).stdout.splitlines()[1]
    assert closing.startswith(f"distmon record: {messages.split(';')[0]} from 4 ranks, 1 alert"), (closing, messages)


def test_a_recording_cut_off_mid_write_still_reports(tmp_path: Path) -> None:
    path = tmp_path / "run.distmon"
    writer = RecordingWriter(str(path))
    sim = SimJob(world=4).exception(1, at=5)
    drive(sim, Monitor(Detector(), recorder=writer), until=10)
    writer.sync()  # as the recorder does each second
    synced = path.stat().st_size
    for t, raw in sim.stream(since=10, until=12):
        writer.message(t, raw)
    writer.close()
    whole = path.read_bytes()  # the process died in the middle of writing what came after
    path.write_bytes(whole[: synced + (len(whole) - synced) // 2])
    result = distmon("report", str(path), "--json")
    assert result.returncode == 0, result.stderr
    alerts = json.loads(result.stdout)
    assert [(a["kind"], a["ranks"]) for a in alerts] == [("rank_exception", [1])]
    assert all(set(a) == ALERT_FIELDS for a in alerts)


def test_an_alert_is_in_the_file_before_the_monitor_says_it(tmp_path: Path) -> None:
    """Whatever ends the monitor once a tick has handed an alert on (to stderr, a screen, a
    notification), a kill, a crash, a closed terminal, its file holds the alert and every
    message taken in before it: the file is copied as it stands the moment the tick returns,
    the writer never closed, and read back."""
    path = tmp_path / "run.distmon"
    sim = SimJob(world=4).hang(2, at=3)
    records = (MessageRecord(t, raw) for t, raw in sim.stream(until=30))
    writer = RecordingWriter(str(path))
    session = Session(ReplayFeed(records, speed=math.inf), Monitor(Detector(), recorder=writer))
    said: list[tuple[float, Change]] = []
    while not said and not session.feed.finished:
        said = session.run_timed(limit=1)  # the tick that says it, and nothing taken in after
    killed = tmp_path / "killed.distmon"
    shutil.copyfile(path, killed)
    writer.close()
    assert said, "the hang raised no alert"
    t = said[0][0]
    _, kept = read_recording(str(killed))
    kept_records = list(kept)
    alerts = [(r.event, r.alert.kind, r.alert.ranks) for r in kept_records if isinstance(r, AlertEvent)]
    assert alerts == [(c.event, c.alert.kind, c.alert.ranks) for _, c in said] == [("raised", "hang", [2])]
    before = [m for m, _ in sim.stream(until=30) if m < t]
    assert [m for m, _ in received(kept_records)] == before


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
    for t, frame in received(records):
        next_tick = next_tick or t + 1
        while t >= next_tick:
            raised += [c.alert for c in monitor.tick(next_tick) if c.event == "raised"]
            next_tick += 1
        monitor.ingest(frame, t)
    hangs = [a for a in raised if a.kind == "hang"]
    assert hangs and hangs[0].ranks == [2]
    assert "inject" in hangs[0].detail, "the culprit's stack shows where it stopped"
    recorded = [a for a in load_recording(str(DATA / "hang-rank2.distmon")).alerts if a.kind == "hang"]
    assert recorded[0].ranks == [2]


def test_a_rank_still_shown_in_a_barrier_its_peers_have_left_is_no_stuck_collective() -> None:
    """A real 3-rank job (the working job of tests/jobs/test_stopped_and_working_ranks_jobs.py, on
    a loaded machine): rank 0 writes a 12 s checkpoint while ranks 1 and 2 wait in a barrier. When it ends,
    ranks 0 and 2 report having passed the barrier before rank 1's report says it left: the
    barrier is done, not stuck with "none behind". Only the first checkpoint's warning remains:
    the second is the job's habit."""
    done = distmon("replay", "--headless", "--json", "--speed", "max", str(DATA / "checkpoint-barrier.distmon"))
    assert done.returncode == 0, done.stderr
    alerts = json.loads(done.stdout)
    assert [a for a in alerts if a["severity"] == "critical"] == []
    checkpoints = [a for a in alerts if a["kind"] == "hang" and "rank 0 is writing a checkpoint" in a["summary"]]
    assert len(checkpoints) == 1 and all(a["severity"] == "warning" for a in checkpoints)


def test_a_batch_over_a_piece_is_recorded_in_pieces_and_reads_back_whole(tmp_path: Path) -> None:
    frames = [raw for _, raw in SimJob(world=4096).stream(until=1)]
    oversized = b"x" * (MAX_MESSAGE_BYTES + 1)
    relays = [Relay("node-a:7", "node-a"), Relay("node-b:9", "node-b")]
    batch = Batch.merged(
        [Batch.of(frames[:2000], relays[0]), Batch.of([oversized]), Batch.of(frames[2000:], relays[1])]
    )
    assert len(batch.payload) > 2 * PIECE_BYTES
    path = tmp_path / "pieces.distmon"
    writer = RecordingWriter(str(path))
    writer.batch(1.7e9, batch)
    writer.close()
    records = list(read_recording(str(path))[1])
    assert len(records) > 2 and all(isinstance(r, BatchRecord) and r.t == 1.7e9 for r in records)
    pieces = [r.batch for r in records if isinstance(r, BatchRecord)]
    assert all(len(p.payload) <= PIECE_BYTES and p.relays == relays for p in pieces)
    assert [f for p in pieces for f in p.frames()] == frames, "every message but the oversized one, in order"
    assert [v for p in pieces for v in p.via] == [0] * 2000 + [1] * (len(frames) - 2000)


def test_a_recording_of_batches_reports_as_one_of_messages(tmp_path: Path) -> None:
    sim = SimJob(world=16).hang(3, at=5)
    singles, batches = RecordingWriter(str(tmp_path / "m.distmon")), RecordingWriter(str(tmp_path / "b.distmon"))
    frames: list[bytes] = []
    for t, raw in sim.stream(until=12):
        singles.message(t, raw)
        frames.append(raw)
        if len(frames) == 16:
            batches.batch(t, Batch.of(frames))
            frames = []
    singles.close()
    batches.close()
    m, b = load_recording(str(tmp_path / "m.distmon")), load_recording(str(tmp_path / "b.distmon"))
    assert m.state.received == b.state.received == 16 * 12
    steps = {r: s.report.steps for r, s in m.state.ranks.items()}
    assert steps == {r: s.report.steps for r, s in b.state.ranks.items()}
    series = read_series(str(tmp_path / "b.distmon"), [3, 5], b.first or 0)
    assert sorted(series.ranks) == [3, 5] and len(series.ranks[5].steps) == 12
    assert series.ranks[5].steps[-1] == steps[5]


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
