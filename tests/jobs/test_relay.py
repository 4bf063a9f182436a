"""A node's relay with real parts: real ``distmon relay`` processes on real sockets, fake ranks
that are DEALER sockets set up as a rank's agent sets up its own, a real monitor's
:class:`Receiver` (or a real ``distmon record``) upstream, and one real two-node torchrun job
whose nodes each report through a relay of their own."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import zmq

from distmon import keys
from distmon.monitor.intake.receiver import Receiver
from distmon.monitor.recording.format import ColumnRecord
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.rules.keeping_up import KeepingUp
from distmon.monitor.state import JobState
from distmon.monitor.state.limits import LIMITS, Thresholds
from distmon.wire import Report, decode, encode, report_bytes
from distmon.wire.column_batch import ColumnBatch, Incoming, decode_columns
from distmon.wire.sockets import (
    BATCH_TAG,
    DETAILS,
    DUMP,
    DUMP_TAG,
    Batch,
    Command,
    Dump,
    Relay,
    batch_frames,
    decode_command,
    dump_frames,
)
from tests.support.commands import DISTMON, TORCHRUN, distmon, free_port
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.recorder import recording
from tests.support.simulate import SimJob
from tests.support.waiting import wait_until


class RelayProcess:
    """``distmon relay`` in a process of its own, its stderr in a file; ``prefix`` runs it
    under another command (``unshare``, to give it a host name)."""

    count = 0

    def __init__(self, log_dir: Path, listen: str, upstream: str, *args: str, prefix: tuple[str, ...] = ()) -> None:
        RelayProcess.count += 1
        self.log = log_dir / f"relay-{RelayProcess.count}.log"
        self.command = [*prefix, *DISTMON, "relay", "--listen", listen, "--upstream", upstream, *args]
        self.start()

    def start(self) -> None:
        """Start it, and wait until it listens."""
        before = self._listening()
        with self.log.open("a") as err:
            self.process = subprocess.Popen(self.command, stderr=err, text=True)
        deadline = time.monotonic() + 30
        while self._listening() == before:
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the relay did not start listening"
            time.sleep(0.02)
        self.id = re.findall(r" as (\S+)", self.log.read_text())[-1]

    def _listening(self) -> int:
        return self.log.read_text().count("listening on") if self.log.exists() else 0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> str:
        """Stop it as a batch system would; its closing line."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(10) == 0, self.log.read_text()
        return self.log.read_text().strip().splitlines()[-1]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def relays(tmp_path: Path) -> Iterator[Callable[..., RelayProcess]]:
    started: list[RelayProcess] = []

    def start(listen: str, upstream: str, *args: str, prefix: tuple[str, ...] = ()) -> RelayProcess:
        relay = RelayProcess(tmp_path, listen, upstream, *args, prefix=prefix)
        started.append(relay)
        return relay

    yield start
    for relay in started:
        relay.close()


class FakeRanks:
    """Ranks of a simulated job, each a DEALER socket set up as a rank's agent sets up its own:
    ``IMMEDIATE``, a short send queue, never waiting to send."""

    def __init__(self, endpoint: str, ranks: list[int], key: keys.JobKey | None = None, world: int = 8) -> None:
        self.job = SimJob(world=world, start=time.time())
        self.ranks = ranks
        self.dropped = 0
        self.slowest_send = 0.0
        self._context = zmq.Context()
        self.sockets: dict[int, zmq.Socket[bytes]] = {}
        for rank in ranks:
            sock = self._context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.IMMEDIATE, 1)
            sock.setsockopt(zmq.SNDHWM, 8)
            if key is not None:
                keys.as_client(sock, key)
            sock.connect(endpoint)
            self.sockets[rank] = sock

    def frame(self, rank: int) -> bytes:
        report = self.job.report(rank, time.time())
        assert report is not None
        return encode(report)

    def report(self) -> list[bytes]:
        """One report from every rank; the frames that went out."""
        sent = []
        for rank, sock in self.sockets.items():
            frame = self.frame(rank)
            began = time.perf_counter()
            try:
                sock.send(frame, zmq.NOBLOCK)
                sent.append(frame)
            except zmq.Again:
                self.dropped += 1
            self.slowest_send = max(self.slowest_send, time.perf_counter() - began)
        return sent

    def commands(self, timeout: float) -> dict[int, list[Command]]:
        """The commands each rank receives within ``timeout`` seconds."""
        got: dict[int, list[Command]] = {rank: [] for rank in self.ranks}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(got.values()):
            for rank, sock in self.sockets.items():
                with contextlib.suppress(zmq.Again):
                    got[rank].append(decode_command(sock.recv(zmq.NOBLOCK)))
            time.sleep(0.01)
        return got

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close(linger=0)
        self._context.term()


@contextlib.contextmanager
def fake_ranks(endpoint: str, ranks: list[int], key: keys.JobKey | None = None) -> Iterator[FakeRanks]:
    sender = FakeRanks(endpoint, ranks, key)
    try:
        yield sender
    finally:
        sender.close()


@contextlib.contextmanager
def receiving(endpoint: str, key: keys.JobKey | None = None) -> Iterator[Receiver]:
    receiver = Receiver(endpoint, key)
    try:
        yield receiver
    finally:
        receiver.close()


def collect(receiver: Receiver, done: Callable[[list[Incoming]], bool], timeout: float = 10.0) -> list[Incoming]:
    """Batches received until ``done(batches)``, or ``timeout`` seconds."""
    batches: list[Incoming] = []
    deadline = time.monotonic() + timeout
    while not done(batches) and time.monotonic() < deadline:
        batches += receiver.receive(0.05)
    return batches


def columns(batches: list[Incoming]) -> list[ColumnBatch]:
    assert all(isinstance(b, ColumnBatch) for b in batches), "a relay sends columns"
    return [b for b in batches if isinstance(b, ColumnBatch)]


def numbers(frame: bytes) -> bytes:
    """A frame without its report: its header and rows, what a relay always sends of it."""
    return frame[: len(frame) - len(report_bytes(frame))]


def numbers_of(batches: list[Incoming]) -> list[bytes]:
    """Every frame's header and rows, as the relay sent them."""
    found = []
    for batch in columns(batches):
        groups = np.concatenate([[0], np.cumsum(batch.headers["groups"].astype(np.int64))])
        channels = np.concatenate([[0], np.cumsum(batch.headers["channels"].astype(np.int64))])
        for i in range(len(batch)):
            rows = (
                batch.groups[groups[i] : groups[i + 1]].tobytes()
                + batch.channels[channels[i] : channels[i + 1]].tobytes()
            )
            found.append(batch.headers[i : i + 1].tobytes() + rows)
    return found


def whole_of(batches: list[Incoming]) -> list[bytes]:
    """The frames whose reports came whole, each as its rank sent it."""
    found = []
    heads = iter(numbers_of(batches))
    for batch in columns(batches):
        ends = batch.ends.astype(np.int64)
        for i in range(len(batch)):
            head = next(heads)
            if ends[i + 1] > ends[i]:
                found.append(head + batch.reports[ends[i] : ends[i + 1]])
    return found


def ranks_of(batches: list[Incoming]) -> set[int]:
    return {int(rank) for batch in columns(batches) for rank in batch.headers["rank"]}


def relay_ids(batch: Incoming) -> list[str]:
    return [relay.id for relay in batch.relays]


def via_ids(batch: Incoming) -> list[str]:
    """For each frame, the relay nearest the rank it came through."""
    return [batch.relays[v].id if v >= 0 else "" for v in batch.via.tolist()]


# --- fake ranks -----------------------------------------------------------------------------


def test_rank_frames_arrive_as_batches_naming_the_relay_and_an_idle_relay_still_says_it_is_alive(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    upstream, listen = new_endpoint(), new_endpoint()
    with receiving(upstream) as receiver, fake_ranks(listen, [0, 1, 2]) as ranks:
        relay = relays(listen, upstream, "--interval", "0.2")
        collect(receiver, lambda b: len(b) > 0)  # the relay is connected upstream
        time.sleep(0.2)  # and the ranks to the relay
        sent = []
        for _ in range(5):
            sent += ranks.report()
            time.sleep(0.05)
        batches = collect(receiver, lambda b: len(numbers_of(b)) >= len(sent))
        assert ranks.dropped == 0 and sorted(numbers_of(batches)) == sorted(numbers(f) for f in sent)
        assert all(relay_ids(b) == [relay.id] and set(via_ids(b)) <= {relay.id} for b in batches)
        assert 2 <= len(batches) <= 8, "the frames of an interval travel together"
        assert whole_of(batches) == sent[:3], "a rank's report goes whole when it has news: the first"
        idle = collect(receiver, lambda b: len(b) >= 5)
        assert len(idle) >= 5, "one receive may take several batches that came together"
        assert all(len(b) == 0 and relay_ids(b) == [relay.id] for b in idle), [len(b) for b in idle]
        assert relay.id.split(":") == [socket.gethostname(), str(relay.process.pid)]
        closing = relay.stop()
    assert closing.startswith(f"distmon relay: {len(sent)} reports in ") and "(3 of them whole)" in closing
    assert "dropped: none" in closing


def test_a_full_batch_goes_before_the_interval(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    upstream, listen = new_endpoint(), new_endpoint()
    with receiving(upstream) as receiver, fake_ranks(listen, list(range(8))) as ranks:
        relays(listen, upstream, "--interval", "30", "--batch", "4")
        time.sleep(0.3)
        sent = ranks.report() + ranks.report()
        started = time.monotonic()
        batches = collect(receiver, lambda b: len(numbers_of(b)) >= len(sent))
        assert time.monotonic() - started < 15, "before the relay's 30 s interval"
        assert sorted(numbers_of(batches)) == sorted(map(numbers, sent))
        assert [len(b) for b in batches] == [4, 4, 4, 4]


def test_what_a_relay_drops_reaches_the_monitor_which_blames_no_rank_for_it(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    """No monitor upstream yet: the relay drops its batches at once (never queues them) and
    says so in the first batch that goes; the monitor counts the drops by the relay's host and
    names no rank for that silence (``monitor_behind``, which says where they went)."""
    upstream, listen = new_endpoint(), new_endpoint()
    with fake_ranks(listen, [0, 1, 2]) as ranks:
        relay = relays(listen, upstream, "--interval", "0.1")
        time.sleep(0.3)
        sent = []
        for _ in range(4):
            sent += ranks.report()
            time.sleep(0.15)
        with receiving(upstream) as receiver:
            batches = collect(receiver, lambda b: any(x.dropped for x in b))
        told = [b for b in batches if b.dropped]
        assert told, "the drops are told upstream"
        (losses,) = [b.losses() for b in told]
        assert [r.id for r in losses] == [relay.id] and losses[told[0].relays[0]] >= len(sent) - 3
        state = JobState(LIMITS)
        for batch in batches:
            state.ingest_batch(batch, time.time())
        assert state.dropped["relay_dropped"] == sum(losses.values())
        assert state.lost_on_the_way == {socket.gethostname(): sum(losses.values())}
        keeping_up = KeepingUp()
        behind = keeping_up.behind(state, time.time(), 1.0, Thresholds())
        assert behind is not None and behind.on_the_way
        assert behind.summary == "relays drop reports on the way to the monitor; it names no rank for the silence"
        assert f"their upstream slow: {socket.gethostname()} (" in behind.detail
    assert "dropped: none" not in relay.stop(), "its closing line counts the drops"


def test_chained_relays_merge_what_comes_from_below_and_the_monitor_learns_every_relay(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    """Two node relays under one relay above them: every batch that reaches the monitor names
    the relay above, and the node relay each frame came through."""
    upstream, top, node_a, node_b = (new_endpoint() for _ in range(4))
    with receiving(upstream) as receiver, fake_ranks(node_a, [0, 1]) as a, fake_ranks(node_b, [2, 3]) as b:
        above = relays(top, upstream, "--interval", "0.3")
        relay_a = relays(node_a, top, "--interval", "0.2")
        relay_b = relays(node_b, top, "--interval", "0.2")
        everyone = {above.id, relay_a.id, relay_b.id}
        alive = collect(receiver, lambda bs: {r for b in bs for r in relay_ids(b)} == everyone)
        assert {r for b in alive for r in relay_ids(b)} == everyone
        time.sleep(0.2)
        sent_a, sent_b = a.report() + a.report(), b.report() + b.report()
        batches = collect(receiver, lambda bs: len(numbers_of(bs)) >= 8)
        assert sorted(numbers_of(batches)) == sorted(map(numbers, sent_a + sent_b))
        assert sorted(whole_of(batches)) == sorted(sent_a[:2] + sent_b[:2])
        for batch in columns(batches):
            assert relay_ids(batch)[0] == above.id
            for rank, via in zip(batch.headers["rank"].tolist(), via_ids(batch), strict=True):
                assert via == (relay_a.id if rank in (0, 1) else relay_b.id)


def test_commands_go_down_to_every_rank_and_dumps_come_up_through_two_relays(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    upstream, top, node = new_endpoint(), new_endpoint(), new_endpoint()
    with receiving(upstream) as receiver, fake_ranks(node, [0, 1, 2]) as ranks:
        above = relays(top, upstream, "--interval", "0.2")
        below = relays(node, top, "--interval", "0.2")
        time.sleep(0.3)
        ranks.report()  # the node relay learns its ranks, the monitor the relay above
        collect(receiver, lambda b: len(numbers_of(b)) >= 3)
        dump = Command(DUMP, ranks.job.job, "evidence of a hang", request=5, ranks=[1])
        assert receiver.send(dump) == 1  # one connection: the relay above
        got = ranks.commands(timeout=5)
        assert got == {0: [dump], 1: [dump], 2: [dump]}
        ranks.sockets[1].send_multipart(dump_frames(Dump(ranks.job.job, 1, 5, b"a pickle")))
        deadline, dumps = time.monotonic() + 5, []
        while not dumps and time.monotonic() < deadline:
            receiver.receive(0.05)
            dumps += receiver.take_dumps()
        assert dumps == [Dump(ranks.job.job, 1, 5, b"a pickle")]
        assert "1 dumps up, 1 commands down" in above.stop()
        assert "1 dumps up, 1 commands down" in below.stop()


def test_a_relay_that_predates_columns_below_is_read_as_the_relays_own_ranks(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    """An older relay below sends frames (``distmon-batch/1``): the relay above sends them on as
    columns, each frame named as come through the older relay."""
    upstream, top = new_endpoint(), new_endpoint()
    context = zmq.Context()
    below = context.socket(zmq.DEALER)
    below.connect(top)
    try:
        with receiving(upstream) as receiver:
            above = relays(top, upstream, "--interval", "0.1")
            job = SimJob(world=4, start=time.time())
            frames = [encode(job.report(rank, time.time())) for rank in range(4)]  # type: ignore[arg-type]
            old = Relay("old-node:7", "old-node")
            time.sleep(0.3)
            below.send_multipart(batch_frames(Batch.of(frames, relay=old)))
            batches = collect(receiver, lambda b: len(numbers_of(b)) >= 4)
            assert sorted(whole_of(batches)) == sorted(frames)
            (batch,) = [b for b in columns(batches) if len(b)]
            assert relay_ids(batch) == [above.id, "old-node:7"] and via_ids(batch) == ["old-node:7"] * 4
    finally:
        below.close(linger=0)
        context.term()


def test_the_monitor_asks_the_relays_for_whole_reports_and_the_ranks_never_hear_of_it(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    """After their first, a rank's reports go as numbers alone; asked for rank 1 (a details
    command, through the relay above), the node relay sends its reports whole for a few
    seconds. The ranks are not sent the command."""
    upstream, top, node = new_endpoint(), new_endpoint(), new_endpoint()
    with receiving(upstream) as receiver, fake_ranks(node, [0, 1, 2]) as ranks:
        relays(top, upstream, "--interval", "0.1")
        relays(node, top, "--interval", "0.1")
        time.sleep(0.3)
        ranks.report()
        collect(receiver, lambda b: len(numbers_of(b)) >= 3)
        ranks.report()
        quiet = collect(receiver, lambda b: len(numbers_of(b)) >= 3)
        assert whole_of(quiet) == [], "nothing new: numbers alone"
        receiver.send(Command(DETAILS, ranks.job.job, "the monitor looks at them", ranks=[1]))
        time.sleep(0.5)
        sent = ranks.report() + ranks.report()
        asked = collect(receiver, lambda b: len(numbers_of(b)) >= 6)
        assert sorted(whole_of(asked)) == sorted(f for f in sent if decode(f).rank == 1)
        assert ranks.commands(timeout=0.5) == {0: [], 1: [], 2: []}


def test_foreign_messages_from_either_side_are_dropped_and_counted(
    new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    """Garbage from below (bad batches, bad dumps, frames over the limit, unknown messages),
    garbage from above (not a command): dropped, counted, and the relay carries on."""
    upstream, listen = new_endpoint(), new_endpoint()
    context = zmq.Context()
    monitor = context.socket(zmq.ROUTER)
    monitor.bind(upstream)
    try:
        with fake_ranks(listen, [0]) as ranks:
            relay = relays(listen, upstream, "--interval", "0.1")
            peer, *_ = monitor.recv_multipart()  # its first batch
            time.sleep(0.2)
            rank = ranks.sockets[0]
            rank.send_multipart([BATCH_TAG, b"not a header", b"x"])
            rank.send_multipart([DUMP_TAG, b"not a header", b"x"])
            rank.send_multipart([b"what", b"ever"])
            rank.send(b"\0" * (300 * 1024))
            monitor.send_multipart([peer, b"not a command"])
            monitor.send_multipart([peer, b"two", b"frames"])
            rank.send(b"\2" + b"\0" * 200)
            good = ranks.report()
            deadline, frames, refused = time.monotonic() + 5, [], Counter[str]()
            while good[0] not in frames and time.monotonic() < deadline:
                if monitor.poll(50):
                    batch = decode_columns(monitor.recv_multipart()[1:])
                    frames += whole_of([batch])
                    refused += batch.refused
            assert good[0] in frames
            closing = relay.stop()
    finally:
        monitor.close(linger=0)
        context.term()
    assert refused == {"oversized": 1, "malformed": 1}, "what it could not read is told upstream"
    assert "malformed_batch" in closing and "malformed_dump" in closing and "2 malformed" in closing
    assert "1 oversized" in closing and "2 malformed_command" in closing


def test_a_keyed_relay_hears_only_ranks_holding_the_job_key(
    tmp_path: Path, relays: Callable[..., RelayProcess], new_endpoint: Callable[[], str]
) -> None:
    key_file = tmp_path / "job.key"
    key = keys.generate(str(key_file))
    upstream, listen = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    with (
        receiving(upstream, key) as receiver,
        fake_ranks(listen, [0], key) as keyed,
        fake_ranks(listen, [1]) as keyless,
    ):
        relays(listen, upstream, "--interval", "0.2", "--key-file", str(key_file))
        time.sleep(0.5)
        for _ in range(5):
            keyed.report()
            keyless.report()
            time.sleep(0.1)
        batches = collect(receiver, lambda b: len(numbers_of(b)) >= 5, timeout=5)
        time.sleep(0.5)
        batches += receiver.receive(0.3)
        assert ranks_of(batches) == {0} and len(numbers_of(batches)) == 5
        assert keyless.dropped == 5, "a sender without the key never connects: its reports are dropped at once"
        assert not receiver.take_refused(), "the relay itself is let in with the job's key"


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_a_relay_killed_and_restarted_costs_the_ranks_nothing_but_the_reports_in_flight(
    transport: str, new_endpoint: Callable[[], str], relays: Callable[..., RelayProcess]
) -> None:
    """The ranks keep sending every 50 ms throughout: no send ever waits, reports are dropped
    while no relay listens, and every rank is heard again once a relay listens on the same
    endpoint."""
    upstream = new_endpoint()
    listen = new_endpoint() if transport == "ipc" else f"tcp://127.0.0.1:{free_port()}"
    with receiving(upstream) as receiver, fake_ranks(listen, [0, 1, 2, 3]) as ranks:
        relay = relays(listen, upstream, "--interval", "0.2")
        stop = threading.Event()

        def keep_reporting() -> None:
            while not stop.wait(0.05):
                ranks.report()

        sender = threading.Thread(target=keep_reporting, daemon=True)
        sender.start()
        try:
            assert collect(receiver, lambda b: len(ranks_of(b)) == 4)
            relay.kill()
            dropped_before = ranks.dropped
            wait_until(lambda: ranks.dropped > dropped_before, 10, "with no relay, the reports dropped at once")
            receiver.receive(0.2)
            relay.start()
            heard = collect(receiver, lambda b: len(ranks_of(b)) == 4, timeout=30)
            assert ranks_of(heard) == {0, 1, 2, 3}
            assert all(relay_ids(b) == [relay.id] for b in heard)
        finally:
            stop.set()
            sender.join()
    # a send that waited for the relay would wait the seconds it took to start again; a loaded
    # host's scheduler may hold a thread a tenth of a second between any two lines
    assert ranks.slowest_send < 0.5, f"a send took {ranks.slowest_send * 1000:.0f} ms"


RANK_SCRIPT = """
import time, torch
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
time.sleep(1.2)
"""


def test_distmon_run_reports_through_a_relay_of_its_own_up_to_the_last_words(
    tmp_path: Path, new_endpoint: Callable[[], str]
) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    upstream = new_endpoint()
    with receiving(upstream) as receiver:
        env = {**os.environ, "DISTMON_INTERVAL": "0.3", "OMP_NUM_THREADS": "1"}
        command = [*DISTMON, "run", "--relay", upstream, "--", sys.executable, str(script)]
        run = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        batches: list[Incoming] = []
        while run.poll() is None:
            batches += receiver.receive(0.05)
        batches += collect(receiver, lambda b: False, timeout=0.5)
        assert run.returncode == 0, run.stderr.read() if run.stderr else ""
    reports = [decode(f) for f in whole_of(batches)]
    assert reports and reports[-1].exit is not None and reports[-1].exit.how == "clean"
    names = {r.id for b in batches for r in b.relays}
    assert len(names) == 1 and names.pop().startswith(f"{socket.gethostname()}:")
    assert all(len(b) == 0 or set(via_ids(b)) == set(relay_ids(b)) for b in batches)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--relay", "tcp://head:5555", "--record", "x.distmon"], "needs --endpoint"),
        (["--relay", "tcp://head:5555", "--endpoint", "tcp://*:5555"], "--endpoint is for a monitor"),
    ],
)
def test_run_relay_mistakes_are_one_line(args: list[str], message: str) -> None:
    done = distmon("run", *args, "--", "true")
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "ipc:///tmp/x.sock"], "required: --upstream"),
        (["--listen", "tcp://192.0.2.1:5555", "--upstream", "tcp://127.0.0.1:5555"], "cannot listen on"),
        (["--listen", "ipc:///tmp/x.sock", "--upstream", "tcp://nohost"], "cannot connect to tcp://nohost"),
        (["--listen", "ipc:///tmp/x.sock", "--upstream", "ipc:///tmp/x.sock"], "would send to itself"),
        (["--listen", "ipc:///tmp/x.sock", "--upstream", "ipc:///tmp/y.sock", "--batch", "0"], "from 1 to 100000"),
        (["--listen", "ipc:///tmp/x.sock", "--upstream", "ipc:///tmp/y.sock", "--key-file", "/none"], "key file"),
    ],
)
def test_relay_mistakes_are_one_line(args: list[str], message: str) -> None:
    done = distmon("relay", *args)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.splitlines()) == 1


# --- real ranks -----------------------------------------------------------------------------


def own_host_names() -> bool:
    """Whether each "node" can have a host name of its own (root, in a UTS namespace)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(["unshare", "--uts", "hostname", "node-test"], capture_output=True, timeout=10)
        return done.returncode == 0
    return False


def as_node(name: str, hosts: bool) -> tuple[str, ...]:
    return ("unshare", "--uts", "sh", "-c", f'hostname {name} && exec "$@"', name) if hosts else ()


def silence(port: int) -> dict[int, float]:
    """Per rank, the seconds since the monitor last heard it (``distmon record --metrics-port``)."""
    with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        pattern = r'distmon_rank_last_report_age_seconds\{[^}]*rank="(\d+)"[^}]*\} (\S+)'
        return {int(rank): float(age) for rank, age in re.findall(pattern, r.read().decode())}
    return {}


def test_a_two_node_job_through_a_relay_per_node_is_heard_through_a_relay_restart_and_its_hang_named(
    tmp_path: Path, relays: Callable[..., RelayProcess]
) -> None:
    """Two torchrun agents on this host as two nodes of two ranks (c10d rendezvous), one
    ``distmon record`` upstream. Node A reports through a ``distmon relay``, which is killed
    mid-job and restarted; node B through ``distmon run --relay``. Rank 3 hangs for a while:
    the monitor names it, and the job then finishes, undisturbed."""
    hosts = own_host_names()
    record_port, metrics_port, rdzv_port = free_port(), free_port(), free_port()
    upstream = f"tcp://127.0.0.1:{record_port}"
    out = tmp_path / "job.distmon"
    node_a = f"ipc://{tmp_path}/node-a.sock"
    train = [str(TRAIN), "--distmon", "--workers", "0", "--timeout", "60"]
    train += ["--steps", "160", "--step-time", "0.05", "--fault", "hang", "--fault-rank", "3"]
    train += ["--fault-step", "120", "--hang-seconds", "8"]
    launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d"]
    launcher += ["--rdzv-endpoint", f"127.0.0.1:{rdzv_port}", "--rdzv-id", "relay-test", "--local-addr", "127.0.0.1"]
    env = {**os.environ, "DISTMON_INTERVAL": "0.5", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env["GLOO_SOCKET_IFNAME"] = "lo"
    with recording(out, upstream, "--metrics-port", str(metrics_port)) as recorder:
        logs = {name: (tmp_path / f"{name}.log").open("w") for name in ("a", "b")}
        nodes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            relay_a = relays(node_a, upstream, prefix=as_node("node-a", hosts))
            nodes["a"] = start(
                [*as_node("node-a", hosts), *launcher, *train],
                env={**env, "DISTMON_ENDPOINT": node_a},
                stdout=logs["a"],
                stderr=subprocess.STDOUT,
            )
            nodes["b"] = start(
                [*as_node("node-b", hosts), *DISTMON, "run", "--relay", upstream, "--", *launcher, *train],
                env=env,
                stdout=logs["b"],
                stderr=subprocess.STDOUT,
            )

            def every_rank_heard() -> set[int]:
                ranks = node_ranks(nodes["a"])
                return ranks if len(ranks) == 2 and len(silence(metrics_port)) >= 4 else set()

            # the start of two agents and four ranks is the load's to say: awaited as other jobs' starts are
            ranks_a = wait_until(every_rank_heard, 180, "every rank heard, node A's ranks known", every=0.2)
            relay_a.kill()
            killed = time.time()

            def only_node_b_heard() -> bool:
                silent = silence(metrics_port)
                ranks_b = silent.keys() - ranks_a
                return all(silent[rank] > 1.5 for rank in ranks_a) and all(silent[rank] < 1.5 for rank in ranks_b)

            wait_until(only_node_b_heard, 30, "node A silent with its relay dead, node B heard", every=0.2)
            relay_a.start()
            restarted = time.time()

            def node_a_heard_again() -> bool:
                silent = silence(metrics_port)
                return all(silent.get(rank, 1e9) < time.time() - restarted for rank in ranks_a)

            wait_until(node_a_heard_again, 30, "node A's ranks heard again", every=0.1)
            statuses = {name: node.wait(90) for name, node in nodes.items()}
            assert statuses == {"a": 0, "b": 0}, {n: (tmp_path / f"{n}.log").read_text()[-3000:] for n in nodes}
        finally:
            for node in nodes.values():
                kill_tree(node)
        recorder.stop()
    closing_a = relay_a.stop()
    assert re.match(r"distmon relay: [1-9]\d* reports in ", closing_a), closing_a
    alerts = load_recording(str(out)).alerts
    hangs = [a for a in alerts if a.kind == "hang"]
    assert hangs and hangs[0].ranks == [3], alerts
    _, records = read_recording(str(out))
    reports = heard_in(records)
    hosts_of = {r.rank: r.host for _, r in reports if r.host}
    if hosts:
        assert set(hosts_of.values()) == {"node-a", "node-b"}
        assert {hosts_of[rank] for rank in ranks_a} == {"node-a"}
        assert f"rank 3 ({hosts_of[3]}, pid" in hangs[0].detail
    for rank in ranks_a:
        before = max(r.steps for t, r in reports if r.rank == rank and t < killed)
        after = [r for t, r in reports if r.rank == rank and t > restarted]
        assert after and max(r.steps for r in after) > before
        exits = [r.exit.how for r in after if r.exit is not None]  # a frame after it may carry the numbers alone
        assert exits and set(exits) == {"clean"}, exits


def heard_in(records: Iterable[object]) -> list[tuple[float, Report]]:
    """Every frame a recording of relays' columns holds, as a report with its time: the whole
    report where it came, else its numbers alone (its steps; no host, no exit)."""
    heard: list[tuple[float, Report]] = []
    for record in records:
        if not isinstance(record, ColumnRecord):
            continue
        ends = record.batch.ends.astype(np.int64)
        for i, h in enumerate(record.batch.headers):
            whole = record.batch.reports[ends[i] : ends[i + 1]]
            report = (
                decode(whole) if whole else Report("", int(h["rank"]), 0, "", 0, 0.0, 0, 1.0, steps=int(h["steps"]))
            )
            heard.append((record.t, report))
    return heard


def node_ranks(launcher: subprocess.Popen[bytes]) -> set[int]:
    """The ranks that a node's torchrun agent runs (from their environment)."""
    ranks = set()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(launcher.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error, KeyError, ValueError):
                environ = child.environ()
                if environ.get("LOCAL_RANK") is not None and "RANK" in environ:
                    ranks.add(int(environ["RANK"]))
    return ranks
