"""Feeds: a recording released by its virtual clock, a live endpoint read by a thread, and
the session that drives a monitor from either."""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from pathlib import Path

import pytest
import zmq

from distmon.monitor.intake.feeds import LiveFeed, ReplayFeed
from distmon.monitor.intake.receiver import EndpointError, Receiver
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.reader import RecordingError
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import Alert, Change
from distmon.wire import MAX_MESSAGE_BYTES
from distmon.wire.sockets import BATCH_TAG, Batch, Relay, batch_frames
from tests.support.commands import free_port
from tests.support.messages import sender
from tests.support.simulate import SimJob

START = 1_700_000_000.0


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def write(path: Path, seconds: int = 30, alert_at: float | None = None) -> Path:
    """Four ranks reporting once a second; optionally one alert raised at ``alert_at``."""
    writer = RecordingWriter(str(path))
    alert = Alert("hang", "critical", [2], START + (alert_at or 0), "stuck", "evidence")
    for t, raw in SimJob(world=4, ranks_per_host=4, start=START).stream(until=seconds):
        if alert_at is not None and t >= START + alert_at:
            writer.alert(START + alert_at, Change("raised", alert))
            alert_at = None
        writer.message(t, raw)
    writer.close()
    return path


def test_replay_releases_messages_by_its_clock_and_speed(tmp_path: Path) -> None:
    clock = FakeClock()
    feed = ReplayFeed(str(write(tmp_path / "r.distmon")), speed=1.0, clock=clock)
    assert feed.now() == feed.start
    clock.t = 2.0
    released = feed.take(1000)
    assert released and all(t <= START + 2.0 for t, _ in released)
    feed.set_speed(10.0)
    clock.t = 3.0  # one more real second at 10x: ten seconds of recording
    assert feed.now() == pytest.approx(START + 12.0)
    assert max(t for t, _ in feed.take(1000)) <= START + 12.0


def test_pause_freezes_the_clock_and_step_releases_one_second(tmp_path: Path) -> None:
    clock = FakeClock()
    feed = ReplayFeed(str(write(tmp_path / "r.distmon")), speed=1.0, clock=clock)
    clock.t = 5.0
    feed.take(1000)
    feed.pause()
    clock.t = 50.0
    assert feed.now() == pytest.approx(START + 5.0) and feed.take(1000) == []
    feed.step()
    stepped = feed.take(1000)
    assert len(stepped) == 4 and all(START + 5.0 < t <= START + 6.0 for t, _ in stepped)
    assert feed.now() == pytest.approx(START + 6.0) and feed.paused


def test_jump_stops_at_the_next_recorded_alert(tmp_path: Path) -> None:
    feed = ReplayFeed(str(write(tmp_path / "r.distmon", alert_at=12.5)), clock=FakeClock())
    feed.pause()
    feed.jump_to_next_alert()
    released = feed.take(10_000)
    assert max(t for t, _ in released) < START + 12.5
    assert feed.paused and not feed.jumping and feed.now() == START + 12.5


def test_a_recording_cut_off_mid_write_replays_to_where_it_ends(tmp_path: Path) -> None:
    whole = write(tmp_path / "whole.distmon").read_bytes()
    cut = tmp_path / "cut.distmon"
    cut.write_bytes(whole[: len(whole) // 2 + 7])
    feed = ReplayFeed(str(cut), speed=math.inf)
    released = feed.take(100_000)
    assert 0 < len(released) < 30 * 4 and feed.finished
    assert feed.now() == released[-1][0]


def test_replay_hands_out_batches_and_the_session_ingests_their_messages(tmp_path: Path) -> None:
    """A recording of what relays sent: each second's reports, one batch."""
    path = tmp_path / "batches.distmon"
    writer = RecordingWriter(str(path))
    seconds: dict[int, list[bytes]] = {}
    for t, raw in SimJob(world=4, ranks_per_host=4, start=START).stream(until=10):
        seconds.setdefault(int(t - START), []).append(raw)
    for second, frames in sorted(seconds.items()):
        writer.batch(START + second + 1, Batch.of(frames, Relay("node-a:7", "node-a")))
    writer.close()
    feed = ReplayFeed(str(path), speed=math.inf)
    items = feed.take(1000)
    assert [t for t, _ in items] == [START + s + 1 for s in sorted(seconds)]
    assert all(isinstance(b, Batch) and b.relays == [Relay("node-a:7", "node-a")] for _, b in items)
    assert [b.frames() for _, b in items if isinstance(b, Batch)] == [seconds[s] for s in sorted(seconds)]
    monitor = Monitor()
    session = Session(ReplayFeed(str(path), speed=math.inf), monitor)
    list(session.drain())
    assert len(monitor.state.ranks) == 4 and monitor.state.received == 40


@pytest.mark.parametrize(
    ("content", "error"),
    [(None, "cannot open"), (b"", "is empty"), (b"hello, world\n", "not a distmon recording")],
)
def test_bad_files_raise_one_clear_error(tmp_path: Path, content: bytes | None, error: str) -> None:
    path = tmp_path / "file"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(RecordingError, match=error):
        ReplayFeed(str(path))


def test_session_ingests_on_feed_time_and_ticks_once_a_second(tmp_path: Path) -> None:
    feed = ReplayFeed(str(write(tmp_path / "r.distmon", seconds=10)), speed=math.inf)
    ticks: list[float] = []
    monitor = Monitor()
    session = Session(feed, monitor, on_tick=ticks.append)
    while session.run(7) or session.taken:
        pass
    assert len(monitor.state.ranks) == 4 and monitor.state.received == 40
    assert all(b - a == pytest.approx(1.0) for a, b in itertools.pairwise(ticks))
    assert 8 <= len(ticks) <= 10 and ticks[-1] <= feed.now()


def test_live_feed_reads_a_real_stream_without_blocking(endpoint: str) -> None:
    feed = LiveFeed(endpoint)
    try:
        assert feed.take(10) == []
        with sender(endpoint, linger=0) as push:
            for _, raw in SimJob(world=4).stream(until=3):
                push.send(raw)
            got: list[bytes] = []
            deadline = time.monotonic() + 5
            while len(got) < 12 and time.monotonic() < deadline:
                taken = feed.take(5)
                assert sum(len(batch) for _, batch in taken) <= 5
                got += [frame for _, batch in taken for frame in batch.frames()]
                time.sleep(0.01)
            assert len(got) == 12 and feed.dropped == 0
    finally:
        feed.close()


def test_live_feed_drops_the_oldest_and_counts_when_far_behind(endpoint: str) -> None:
    feed = LiveFeed(endpoint, capacity=10)
    try:
        with sender(endpoint, linger=0) as push:
            for i in range(25):
                push.send(b"%d" % i)
            deadline = time.monotonic() + 5
            while feed.received < 25 and time.monotonic() < deadline:
                time.sleep(0.01)
            kept = [raw for _, batch in feed.take(100) for raw in batch.frames()]
            assert feed.dropped == 15 and kept == [b"%d" % i for i in range(15, 25)]
    finally:
        feed.close()


def test_an_endpoint_in_use_cannot_be_bound_twice() -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    first = LiveFeed(endpoint)
    try:
        with pytest.raises(EndpointError, match="cannot listen"):
            LiveFeed(endpoint)
    finally:
        first.close()


def test_an_ipc_socket_a_monitor_listens_on_is_not_taken_from_it_but_one_left_by_a_dead_one_is(endpoint: str) -> None:
    """ZeroMQ binds over a unix socket in use without a word: the newcomer would get every rank
    that connects from then on, the first monitor none (its recording: "No rank reported")."""
    first = LiveFeed(endpoint)
    try:
        with pytest.raises(EndpointError, match="another monitor or relay listens there"):
            LiveFeed(endpoint)
    finally:
        first.close()
    again = LiveFeed(endpoint)  # its socket file is still there, no one listening
    try:
        with sender(endpoint, linger=0) as push:
            push.send(b"x")
            deadline = time.monotonic() + 10
            while again.received < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert again.received == 1
    finally:
        again.close()


def test_live_feed_caps_count_frames_and_take_splits_a_batch_to_its_limit(endpoint: str) -> None:
    """A relay's batch of 25 frames into a feed holding 10: the 15 oldest frames are dropped,
    the rest handed out in pieces no bigger than asked for, still naming the relay."""
    feed = LiveFeed(endpoint, capacity=10)
    context = zmq.Context()
    relay = context.socket(zmq.DEALER)
    node = Relay("node-7:42", "node-7")
    try:
        relay.connect(endpoint)
        relay.send_multipart(batch_frames(Batch.of([b"%d" % i for i in range(25)], relay=node)))
        deadline = time.monotonic() + 5
        while feed.received < 25 and time.monotonic() < deadline:
            time.sleep(0.01)
        pieces = [feed.take(4), feed.take(4), feed.take(4)]
        assert [[len(batch) for _, batch in piece] for piece in pieces] == [[4], [4], [2]]
        kept = [frame for piece in pieces for _, batch in piece for frame in batch.frames()]
        assert feed.dropped == 15 and kept == [b"%d" % i for i in range(15, 25)]
        assert all(batch.relays == [node] and list(batch.via) == [0] * len(batch) for p in pieces for _, batch in p)
    finally:
        relay.close(linger=0)
        context.term()
        feed.close()


def test_the_receiver_takes_relays_batches_gathers_ranks_frames_and_counts_what_it_refuses(endpoint: str) -> None:
    receiver = Receiver(endpoint)
    context = zmq.Context()
    relay, rank = context.socket(zmq.DEALER), context.socket(zmq.DEALER)
    node = Relay("node-1:7", "node-1")
    try:
        relay.connect(endpoint)
        rank.connect(endpoint)
        relay.send_multipart(batch_frames(Batch.of([b"a", b"b"], relay=node)))
        relay.send_multipart(batch_frames(Batch.of([], relay=node)))  # a relay's sign of life
        relay.send_multipart([BATCH_TAG, b"not a header", b"ab"])
        rank.send(b"x" * (MAX_MESSAGE_BYTES + 1))
        rank.send(b"c")
        rank.send(b"d")
        batches: list[Batch] = []
        refused: Counter[str] = Counter()
        deadline = time.monotonic() + 5
        while sum(len(b) for b in batches) < 4 or sum(refused.values()) < 2:
            assert time.monotonic() < deadline, (batches, refused)
            batches += receiver.receive(0.1)
            refused.update(receiver.take_refused())
        from_relay = [b for b in batches if b.relays]
        straight = [b for b in batches if not b.relays]
        assert [b.frames() for b in from_relay] == [[b"a", b"b"], []]
        assert [f for b in straight for f in b.frames()] == [b"c", b"d"] and all(-1 in b.via for b in straight)
        assert refused == {"malformed_batch": 1, "oversized": 1}
    finally:
        relay.close(linger=0)
        rank.close(linger=0)
        context.term()
        receiver.close()


def test_the_session_ingests_batches_and_single_messages_alike() -> None:
    frames = [raw for _, raw in SimJob(world=4, start=START).stream(until=2)]
    monitor = Monitor()
    monitor.ingest_batch(Batch.of(frames[:4], relay=Relay("n:1", "n")), START + 1)
    assert monitor.ingest_batch(Batch.of([b"garbage", frames[4]]), START + 1.5) == 1
    for raw in frames[5:]:
        monitor.ingest(raw, START + 2)
    assert monitor.state.received == len(frames) and len(monitor.state.ranks) == 4
