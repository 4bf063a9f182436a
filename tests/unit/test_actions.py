"""Acting on alerts, the parts that need no job: commands on the wire, dumps told apart from
reports on a real ZeroMQ socket, evidence bundles on disk in a store that stays bounded, a
responder that never waits on a slow disk, a note that stays on its alert, and
``--abort-on-hang`` refused where anyone could trigger it. With real ranks and real jobs:
tests/jobs/test_actions_jobs.py."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import zmq

from distmon.actions import responder as responder_module
from distmon.actions.bundles import DUMP_PREFIX, Bundle, EvidenceStore
from distmon.actions.responder import Responder
from distmon.monitor.intake.receiver import Receiver
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import CRITICAL, Alert, AlertBook, Change, Finding
from distmon.monitor.state.limits import LIMITS
from distmon.wire import Report, WireError, encode
from distmon.wire.sockets import DUMP, RANK_SOCKET, Command, Dump, decode_command, dump_frames, encode_command
from tests.support.commands import distmon, free_port
from tests.support.messages import T0, report


def hang_alert(t: float = 1000.0) -> Alert:
    return Alert("hang", CRITICAL, [2], t, "rank 2 holds up the job", "rank 2 sleeps", key="hang")


def test_a_command_round_trips_and_garbage_is_refused() -> None:
    command = Command(DUMP, "job-1", "evidence of hang", 7, [2, 0, 1])
    assert decode_command(encode_command(command)) == command
    for garbage in (b"", b"\x93\x01\x02\x03", encode_command(Command("reboot", "job-1", ""))):
        with pytest.raises(WireError):
            decode_command(garbage)


def test_dumps_come_apart_from_reports_and_bad_frames_are_counted(endpoint: str) -> None:
    receiver = Receiver(endpoint)
    context = zmq.Context()
    rank = context.socket(RANK_SOCKET)
    rank.connect(endpoint)
    try:
        rank.send_multipart(dump_frames(Dump("job", 3, 9, b"pickle bytes")))
        rank.send_multipart([b"distmon-fr-dump/1", b"not a header", b"x"])
        rank.send_multipart([b"a", b"b"])
        deadline = time.monotonic() + 5
        dumps = []
        while len(dumps) < 1 and time.monotonic() < deadline:
            assert receiver.receive(0.2) == []
            dumps += receiver.take_dumps()
        time.sleep(0.2)
        receiver.receive(0.2)
        assert dumps == [Dump("job", 3, 9, b"pickle bytes")]
        assert receiver.take_refused() == {"malformed_dump": 2}
    finally:
        rank.close(linger=0)
        context.term()
        receiver.close()


def test_bundles_are_named_by_time_and_kind_and_the_store_stays_bounded(tmp_path: Path) -> None:
    store = EvidenceStore(str(tmp_path), keep=3, max_bytes=10_000)
    (tmp_path / "notes.txt").write_text("the user's own file")
    state = JobState(LIMITS)
    paths = []
    for i in range(5):
        bundle = Bundle(hang_alert(), request=i, expected=[0, 2], deadline=0.0)
        assert store.place(bundle, now=1_800_000_000.0 + i) is not None
        for dump in (Dump("job", 2, i, b"x" * 100), Dump("job", 1, i, b"not asked"), Dump("job", 0, i + 1, b"later")):
            if bundle.accept(dump):
                bundle.write(dump)
        assert not bundle.accept(Dump("job", 2, i, b"twice"))
        bundle.finish(state.job, state.job_world, {}, {})
        store.prune()
        paths.append(bundle.path)
    assert [p.name for p in store.bundles()] == [p.name for p in paths[-3:]]
    assert re.fullmatch(r"\d{8}-\d{6}-hang", paths[-1].name)
    assert sorted(f.name for f in paths[-1].iterdir()) == [
        "alert.json",
        "alert.txt",
        f"{DUMP_PREFIX}2",
        "ranks.json",
        "stacks.txt",
    ]
    assert json.loads((paths[-1] / "alert.json").read_text())["kind"] == "hang"
    assert "No dump from ranks 0" in (paths[-1] / "alert.txt").read_text()
    assert (tmp_path / "notes.txt").exists()
    big = Bundle(hang_alert(), request=9, expected=[0], deadline=0.0)
    assert store.place(big, now=1_800_000_100.0) is not None and big.accept(Dump("job", 0, 9, b""))
    big.write(Dump("job", 0, 9, b"x" * 20_000))
    store.prune()
    assert store.bundles() == []


class SlowDisk(EvidenceStore):
    """A store whose folders take as long as the test says: a disk gone slow (NFS)."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.release = threading.Event()

    def place(self, bundle: Bundle, now: float) -> Path | None:
        self.release.wait(30)
        return super().place(bundle, now)


class Ranks:
    """The monitor's channel to the ranks, as far as the responder uses it."""

    def __init__(self) -> None:
        self.sent: list[Command] = []

    def send(self, command: Command) -> int:
        self.sent.append(command)
        return 1

    def take_dumps(self) -> list[Dump]:
        return []


def test_the_monitors_loop_never_waits_on_the_evidence_disk(tmp_path: Path) -> None:
    """Under `distmon watch` the responder runs on Textual's event loop: a bundle is placed and
    written on a thread of its own, and the loop goes on while the disk does not answer."""
    disk, ranks = SlowDisk(str(tmp_path)), Ranks()
    responder = Responder(ranks, evidence=disk)
    monitor = Monitor(responder=responder)
    for rank in range(4):
        report = Report(job="j", rank=rank, world=4, host="h", pid=rank + 1, t=1000.0, n=1, interval=1.0)
        monitor.state.apply(report, 1000.0)
    returned = threading.Event()

    def tick() -> None:
        responder.after_tick(monitor, [Change("raised", hang_alert())], 1001.0)
        responder.after_tick(monitor, [], 1010.0)  # past the evidence deadline: time to write
        returned.set()

    threading.Thread(target=tick, daemon=True).start()
    assert returned.wait(10), "the loop waited for the disk"
    assert [c.action for c in ranks.sent] == [DUMP] and disk.bundles() == []
    disk.release.set()
    responder.close(10)
    (bundle,) = disk.bundles()
    assert (bundle / "alert.txt").exists() and responder.written == [bundle]


def test_a_note_stays_on_the_alert_while_its_rule_rewrites_the_rest() -> None:
    book = AlertBook()
    book.update([Finding("hang", "hang", CRITICAL, [2], "hang: rank 2", "waiting 5s")], 1.0)
    change = book.annotate("hang", "distmon ended the job at 03:00:00.")
    assert change is not None and change.event == "updated"
    (updated,) = book.update([Finding("hang", "hang", CRITICAL, [2], "hang: rank 2", "waiting 6s")], 2.0)
    assert updated.alert.detail == "waiting 6s\ndistmon ended the job at 03:00:00."
    assert book.annotate("gone", "nothing to note") is None


@pytest.mark.parametrize("command", [["record", "--out", "x.distmon"], ["watch"], ["run", "--record", "x.distmon"]])
def test_abort_on_hang_is_refused_where_anyone_could_trigger_it(tmp_path: Path, command: list[str]) -> None:
    """Without a key, anyone who reaches a network endpoint can send fake reports: a fake hang
    must not end the job."""
    endpoint = f"tcp://0.0.0.0:{free_port()}"
    argv = [*command, "--endpoint", endpoint, "--abort-on-hang", "5"]
    if command[0] == "run":
        argv += ["--", "true"]
    done = distmon(*argv, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "without a key would let anyone" in done.stderr, done.stderr
    assert not (tmp_path / "x.distmon").exists()


def test_without_py_spy_only_a_silent_ranks_stack_is_asked_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without py-spy a stack from outside is the rank's faulthandler's, which may crash a rank
    whose threads run Python: a rank still reporting is not signalled, a silent one is."""
    asked: list[int] = []

    def source(host: str, pid: int, since: float, take: bool) -> None:
        asked.append(pid - 1000)

    monitor = Monitor(Detector(stacks=source))
    monitor.ingest(encode(report(0, 2, t=T0)), T0)
    monitor.ingest(encode(report(1, 2, t=T0 + 60)), T0 + 60)
    alert = Alert("hang", CRITICAL, [0, 1], T0 + 61, "ranks 0-1", "")
    responder = Responder(Ranks())
    monkeypatch.setattr(responder_module, "executable", lambda: None)
    responder._outside_stacks(monitor, alert, take=True)
    assert asked == [0]
    monkeypatch.setattr(responder_module, "executable", lambda: "/usr/bin/py-spy")
    asked.clear()
    responder._outside_stacks(monitor, alert, take=True)
    assert asked == [0, 1]
