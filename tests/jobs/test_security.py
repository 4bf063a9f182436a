"""A monitor on TCP that cannot be flooded or spoofed: real `distmon record` processes, real
ZeroMQ senders with and without the job's key, a real keyed torchrun job, real key files."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import psutil
import pytest
import zmq

from distmon import endpoint as endpoints
from distmon import keys
from distmon.monitor.intake.feeds import LiveFeed, ReplayFeed
from distmon.monitor.intake.receiver import EndpointError, Handshakes, Receiver
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import Dropped, received
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import Session
from distmon.tui.job_header import headline
from distmon.wire import MAX_MESSAGE_BYTES, decode
from tests.support.commands import distmon, free_port
from tests.support.messages import T0, message, report, sender
from tests.support.recorder import recording


def tcp_endpoint(host: str = "127.0.0.1") -> str:
    return f"tcp://{host}:{free_port()}"


def summary_counts(stderr: str) -> dict[str, int]:
    """``{reason: count}`` from record's summary line."""
    line = stderr.strip().splitlines()[-1]
    dropped = line.split("dropped: ", 1)[1].split(";", 1)[0]
    return {why: int(n) for n, why in (item.split(" ") for item in dropped.split(", "))}


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.key"
    assert distmon("keygen", str(path)).returncode == 0
    return path


def test_keygen_writes_a_0600_file_and_never_replaces_one(tmp_path: Path) -> None:
    path = tmp_path / "job.key"
    old = os.umask(0)  # the child inherits a umask that would leave it open to all
    try:
        result = distmon("keygen", str(path))
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = keys.load_key(str(path))
    assert key.server.public != key.client.public
    again = distmon("keygen", str(path))
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert keys.load_key(str(path)) == key, "an existing key is never replaced"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_file_others_can_read_is_refused(key_file: Path, mode: int) -> None:
    key_file.chmod(mode)
    result = distmon("record", "--out", str(key_file.with_suffix(".distmon")), "--key-file", str(key_file))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"chmod 600 {key_file}" in result.stderr


@pytest.mark.parametrize("command", ["watch", "run"])
def test_every_monitor_command_refuses_such_a_key_file(key_file: Path, command: str) -> None:
    key_file.chmod(0o644)
    args = ["--record", str(key_file.with_suffix(".distmon")), "--", sys.executable, "-c", "pass"]
    result = distmon(command, "--key-file", str(key_file), *(args if command == "run" else []))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"chmod 600 {key_file}" in result.stderr


@pytest.mark.parametrize(
    "content", [b"", b"{", b"[]", json.dumps({"format": "distmon-key", "version": 1, "server": {}}).encode()]
)
def test_a_damaged_key_file_is_one_line_and_exit_2(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "job.key"
    path.write_bytes(content)
    path.chmod(0o600)
    result = distmon("record", "--out", str(tmp_path / "r.distmon"), "--key-file", str(path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_a_rank_with_a_key_file_others_can_read_says_so_and_trains_on(key_file: Path, endpoint: str) -> None:
    key_file.chmod(0o644)
    script = "import distmon.hooks; print(distmon.hooks.attach() is None)"
    env = {**os.environ, "DISTMON_KEY_FILE": str(key_file), "DISTMON_ENDPOINT": endpoint}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "True"
    assert result.stderr.startswith("distmon: not monitoring this rank:") and "chmod 600" in result.stderr


@pytest.mark.parametrize(
    ("address", "warned"),
    [
        ("tcp://0.0.0.0:5555", True),
        ("tcp://*:5555", True),
        ("tcp://monitor-host:5555", True),
        ("tcp://10.1.2.3:5555", True),
        ("tcp://127.0.0.1:5555", False),
        ("tcp://localhost:5555", False),
        ("tcp://[::1]:5555", False),
        ("ipc:///tmp/x.sock", False),
    ],
)
def test_which_addresses_are_open_to_the_network(address: str, warned: bool) -> None:
    assert (endpoints.exposure_warning(address) is not None) == warned


def test_listening_on_the_network_without_a_key_warns_in_one_line(tmp_path: Path, key_file: Path) -> None:
    address = tcp_endpoint("0.0.0.0")
    with recording(tmp_path / "open.distmon", address) as recorder:
        open_log = recorder.stop()
    with recording(tmp_path / "keyed.distmon", address, "--key-file", str(key_file)) as recorder:
        keyed_log = recorder.stop()
    warnings = [line for line in open_log.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "anyone who can reach it can send fake rank reports" in warnings[0]
    assert "warning" not in keyed_log


def test_the_default_socket_lives_in_a_directory_only_its_user_can_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    directory = Path(endpoints.private_dir())
    directory.mkdir(mode=0o755)  # left open by someone's umask
    receiver = Receiver(endpoints.default_endpoint())
    try:
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        assert (directory / "monitor.sock").exists()
    finally:
        receiver.close()
    shutil.rmtree(directory)
    directory.write_text("not a directory")
    with pytest.raises(EndpointError, match="not a directory of yours"):
        Receiver(endpoints.default_endpoint())


def rss_watch(pid: int) -> tuple[Callable[[], int], Callable[[], None]]:
    """The highest RSS of ``pid`` until stopped, sampled every 20 ms."""
    peak = [0]
    stop = threading.Event()
    process = psutil.Process(pid)

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], process.memory_info().rss)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def done() -> None:
        stop.set()
        thread.join()

    return lambda: peak[0], done


def test_a_flood_is_refused_counted_and_costs_bounded_memory(tmp_path: Path) -> None:
    """The attack of issue 12: 100,000 fake ranks for a job of four, churning pids, another
    job, garbage and oversized messages, all on TCP, while the real ranks report."""
    address = tcp_endpoint()
    out = tmp_path / "flood.distmon"
    rng = random.Random(12)
    with recording(out, address) as recorder, sender(address) as push:
        for rank in range(4):  # ranks that report every 30 s: alive throughout, however slow the machine
            push.send(message(report(rank, interval=30.0)))
        recorder.wait_recorded("the four ranks", lambda rs: {r.rank for r in rs} == {0, 1, 2, 3})
        baseline = psutil.Process(recorder.process.pid).memory_info().rss
        peak, stop_watching = rss_watch(recorder.process.pid)
        for rank in range(100_000):
            push.send(message(report(rank, pid=7)))
        for rank in (-1, 10**18):
            push.send(message(report(rank)))
        for i in range(1000):
            push.send(message(report(i % 4, pid=50_000 + i)))
        for i in range(500):
            push.send(message(report(i % 4, world=8 + i)))
        for _ in range(5000):
            push.send(message(report(0, job="another")))
        for _ in range(20_000):
            push.send(rng.randbytes(rng.randrange(1, 200)))
        for _ in range(200):
            push.send(b"\x00" * (MAX_MESSAGE_BYTES + 1))
        for rank in range(4):
            push.send(message(report(rank, interval=30.0, steps=1)))
        recorder.wait_recorded(
            "the last reports, after the flood", lambda rs: {r.rank for r in rs if r.steps} == {0, 1, 2, 3}
        )
        stop_watching()
        log = recorder.stop()
    counts = summary_counts(log)
    assert counts["rank_out_of_range"] == 100_000 - 4 + 2
    assert counts["process_churn"] == 4 + 1000
    assert counts["world_changed"] == 500
    assert counts["other_job"] == 5000
    assert counts["oversized"] == 200
    assert "messages from 4 ranks" in log.strip().splitlines()[-1]
    growth = (peak() - baseline) / 2**20
    assert growth < 100, f"the recorder grew by {growth:.0f} MB under the flood"
    report_text = distmon("report", str(out)).stdout
    assert "4 ranks on 1 host" in report_text
    assert "100000 rank_out_of_range" not in report_text and "99998 rank_out_of_range" in report_text


def test_a_keyed_job_is_heard_and_senders_without_its_key_are_refused_and_counted(
    tmp_path: Path, key_file: Path, torchrun: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One real 2-rank gloo job reporting over TCP with DISTMON_KEY_FILE, while a sender
    without a key and one with another job's key try to inject reports."""
    other_key = tmp_path / "other.key"
    assert distmon("keygen", str(other_key)).returncode == 0
    address = tcp_endpoint()
    out = tmp_path / "keyed.distmon"
    monkeypatch.setenv("DISTMON_KEY_FILE", str(key_file))
    with (
        recording(out, address, "--key-file", str(key_file)) as recorder,
        sender(address, linger=0) as plain,
        sender(address, keys.load_key(str(other_key)), linger=0) as wrong,
        torchrun(2, "--steps", "40", endpoint=address) as job,
    ):
        for rank in range(2):  # never delivered: a send may find no connection to queue to
            with contextlib.suppress(zmq.Again):
                plain.send(message(report(rank, world=2)), zmq.NOBLOCK)
            with contextlib.suppress(zmq.Again):
                wrong.send(message(report(rank, world=2)), zmq.NOBLOCK)
        assert job.wait(120) == 0, job.output[-3000:]
        log = recorder.stop()
    assert "with the job's key" in log
    summary = log.strip().splitlines()[-1]
    assert "from 2 ranks" in summary, log
    counts = summary_counts(log)
    assert counts["no_key"] > 0 and counts["wrong_key"] > 0
    text = distmon("report", str(out)).stdout
    assert "2 ranks on 1 host" in text and "no_key" in text and "wrong_key" in text
    assert "exited cleanly" in text


def test_the_recording_stores_no_refused_message_but_their_counts(tmp_path: Path) -> None:
    address = tcp_endpoint()
    out = tmp_path / "r.distmon"
    with recording(out, address) as recorder, sender(address) as push:
        push.send(message(report(5, world=1)))
        push.send(msgpack.packb({"v": 1}))
        push.send(message(report(0, world=1)))
        recorder.wait_recorded("rank 0's report, after the refused ones", bool)
        recorder.stop()
    records = list(read_recording(str(out))[1])
    assert [decode(frame).rank for _, frame in received(records)] == [0]
    dropped: Counter[str] = Counter()
    for record in records:
        if isinstance(record, Dropped):
            dropped.update(record.dropped)
    assert dropped == {"rank_out_of_range": 1, "malformed": 1}


def test_watch_shows_refused_senders_while_no_rank_is_heard(key_file: Path) -> None:
    """The live feed of `distmon watch`, keyed: a sender without the key is counted, and the
    header says so before any rank has reported."""
    address = tcp_endpoint()
    feed = LiveFeed(address, key=keys.load_key(str(key_file)))
    monitor = Monitor()
    session = Session(feed, monitor)
    try:
        with sender(address, linger=0) as plain:
            with contextlib.suppress(zmq.Again):
                plain.send(message(report(0)), zmq.NOBLOCK)
            deadline = time.monotonic() + 10
            while not monitor.state.dropped and time.monotonic() < deadline:
                session.run()
                time.sleep(0.05)
    finally:
        feed.close()
    assert monitor.state.dropped["no_key"] >= 1 and not monitor.state.ranks
    line = headline(OverviewTracker().overview(monitor, time.time())).plain
    assert "No rank has reported yet." in line and "no_key" in line


def test_a_refusal_the_monitor_only_sees_as_a_closed_connection_is_counted_once() -> None:
    handshakes = Handshakes(keyed=True)
    for fd in (7, 8, 9):
        handshakes.observe(zmq.EVENT_ACCEPTED, fd)
    handshakes.observe(zmq.EVENT_HANDSHAKE_SUCCEEDED, 0)  # 7: a rank with the key
    handshakes.observe(zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)  # 8: another job's key
    for fd in (7, 8, 9):  # 9: a sender without a key that hung up first
        handshakes.observe(zmq.EVENT_DISCONNECTED, fd)
    assert handshakes.refused == {"wrong_key": 1, "no_key": 1}
    unkeyed = Handshakes(keyed=False)
    unkeyed.observe(zmq.EVENT_ACCEPTED, 7)
    unkeyed.observe(zmq.EVENT_DISCONNECTED, 7)  # a port probe: nothing was refused
    assert not unkeyed.refused


def test_a_replay_shows_what_the_recorded_monitor_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.distmon"
    writer = RecordingWriter(str(path))
    writer.message(T0, message(report(0, world=1)))
    writer.dropped(T0 + 1, Counter(no_key=3, rank_out_of_range=2))
    writer.dropped(T0 + 2, Counter(no_key=1))
    writer.close()
    monitor = Monitor()
    session = Session(ReplayFeed(str(path), speed=math.inf), monitor)
    session.drain()
    assert monitor.state.dropped == {"no_key": 4, "rank_out_of_range": 2}
    assert list(monitor.state.ranks) == [0]


KEYED_RANK = """
import time
import torch
import distmon.hooks

model = torch.nn.Linear(8, 1)
agent = distmon.hooks.attach(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
started = time.perf_counter()
for _ in range(20):
    loss = model(torch.randn(4, 8)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(0.05)
print(f"done {agent.dropped if agent else 0} {time.perf_counter() - started:.2f}", flush=True)
"""


def test_a_keyed_rank_facing_a_monitor_of_another_job_trains_on_and_exits_promptly(
    tmp_path: Path, key_file: Path
) -> None:
    """The hook's guarantees hold with CURVE on: the handshake never succeeds, so every
    report is dropped at once, nothing blocks, and the process ends as fast as without (the
    same script with distmon disabled, run beside it: a loaded machine slows both)."""
    other = tmp_path / "other.key"
    keys.generate(str(other))
    address = tcp_endpoint()
    receiver = Receiver(address, keys.load_key(str(other)))
    script = tmp_path / "rank.py"
    script.write_text(KEYED_RANK)
    env = {**os.environ, "DISTMON_ENDPOINT": address, "DISTMON_KEY_FILE": str(key_file), "DISTMON_INTERVAL": "0.1"}
    keyed, plain = RankRun(script, env), RankRun(script, {**env, "DISTMON_DISABLE": "1"})
    try:
        keyed.join(), plain.join()
        assert keyed.returncode == plain.returncode == 0
        # a loaded machine stretches both ends (5 s beside three test files): a blocked exit is far longer
        assert keyed.exit_lag < 2 * plain.exit_lag + 1.0, "the process outlived its script"
        done, dropped, seconds = keyed.line.split()
        assert done == "done" and int(dropped) > 0 and float(seconds) < 5
        refused: Counter[str] = Counter()
        deadline = time.monotonic() + 5
        while not refused and time.monotonic() < deadline:
            receiver.receive(0.1)
            refused.update(receiver.take_refused())
        assert refused["wrong_key"] > 0
    finally:
        keyed.process.kill()
        plain.process.kill()
        receiver.close()


class RankRun(threading.Thread):
    """A script run in a process of its own: its first line, and how long the process took
    to end after printing it."""

    def __init__(self, script: Path, env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.process = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
        self.line, self.exit_lag, self.returncode = "", math.inf, -1
        self.start()

    def run(self) -> None:
        assert self.process.stdout is not None
        self.line = self.process.stdout.readline()
        printed = time.monotonic()
        self.returncode = self.process.wait(60)
        self.exit_lag = time.monotonic() - printed
