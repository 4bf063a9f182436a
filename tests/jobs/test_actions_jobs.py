"""Acting on alerts with real parts: commands to a real rank process over real ZeroMQ, dumps
back, evidence bundles on disk, and hung torchrun jobs ended by ``distmon run
--abort-on-hang`` (one node, and two "nodes" on a keyed TCP channel) whose bundle torch's own
``torchfrtrace`` reads, with a real HTTP server and a real command told of every change."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from distmon.actions.evidence import DUMP_PREFIX, Bundle, EvidenceStore
from distmon.actions.responder import Responder
from distmon.channel import DUMP, END, RANK_SOCKET, Command, Dump, decode_command, dump_frames, encode_command
from distmon.monitor.alerts import CRITICAL, Alert, AlertBook, Change, Finding
from distmon.monitor.monitor import Monitor
from distmon.monitor.receiver import Receiver
from distmon.monitor.state import JobState
from distmon.wire import Report, WireError, decode
from tests.support.commands import TORCHRUN, free_port
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.waiting import wait_until
from tests.support.webhook import serving

JOB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "0.5"}
INJECTED = re.compile(r"\[train\] rank (\d+): injecting (\S+) at step \d+, t=([\d.]+)")

RANK = """
import time
import distmon.hooks
distmon.hooks.attach()
print("attached", flush=True)
time.sleep(60)
"""


def hang_alert(t: float = 1000.0) -> Alert:
    return Alert("hang", CRITICAL, [2], t, "rank 2 holds up the job", "rank 2 sleeps", key="hang")


def test_a_command_round_trips_and_garbage_is_refused() -> None:
    command = Command(DUMP, "job-1", "evidence of hang", 7, [2, 0, 1])
    assert decode_command(encode_command(command)) == command
    for garbage in (b"", b"\x93\x01\x02\x03", encode_command(Command("reboot", "job-1", ""))):
        with pytest.raises(WireError):
            decode_command(garbage)


def test_a_rank_obeys_only_its_own_jobs_end_command(tmp_path: Path, endpoint: str) -> None:
    """A real rank process: another job's command is ignored; its own ends it by SIGTERM,
    after a last report that says distmon ended it."""
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    receiver = Receiver(endpoint)
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "DISTMON_INTERVAL": "0.2", "DISTMON_JOB_ID": "mine"}
    rank = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reports = []
        deadline = time.monotonic() + 30
        while not reports and time.monotonic() < deadline:
            reports += [decode(raw) for batch in receiver.receive(0.2) for raw in batch.frames()]
        assert reports, "the rank never reported"
        assert receiver.send(Command(END, "someone-else", "not yours")) == 1
        time.sleep(1.0)
        assert rank.poll() is None
        receiver.send(Command(END, "mine", "the hang alert stood 5s"))
        assert rank.wait(10) == -signal.SIGTERM
        deadline = time.monotonic() + 5
        while not any(r.exit for r in reports) and time.monotonic() < deadline:
            reports += [decode(raw) for batch in receiver.receive(0.2) for raw in batch.frames()]
        assert reports[-1].exit is not None and reports[-1].exit.how == "ended"
        assert "distmon: ending rank 0: the hang alert stood 5s" in rank.stderr.read().decode()
    finally:
        rank.kill()
        rank.wait()
        receiver.close()


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
    state = JobState()
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
    argv = [sys.executable, "-m", "distmon", *command, "--endpoint", endpoint, "--abort-on-hang", "5"]
    if command[0] == "run":
        argv += ["--", "true"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "without a key would let anyone" in done.stderr, done.stderr
    assert not (tmp_path / "x.distmon").exists()


class RunningJob:
    """``distmon run`` and its job, stdout and stderr read as they come."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.process = start(
            [sys.executable, "-m", "distmon", "run", *argv],
            env=env or JOB_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self.out.extend, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self.err.extend, args=(self.process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def wait(self, timeout: float) -> tuple[int, float]:
        """The exit status, and the unix time it came."""
        try:
            status = self.process.wait(timeout)
        finally:
            kill_tree(self.process)
        ended = time.time()
        for reader in self._readers:
            reader.join(5)
        return status, ended

    def injected(self) -> float:
        found = [float(m.group(3)) for line in self.out if (m := INJECTED.search(line))]
        assert found, "".join(self.out)[-3000:]
        return found[0]

    def stderr(self) -> str:
        return "".join(self.err)


def train(*args: str) -> list[str]:
    return [str(TRAIN), "--timeout", "120", *args]


@pytest.mark.torchrun
def test_a_hung_job_is_ended_early_with_its_evidence_kept_and_everyone_told(tmp_path: Path) -> None:
    out = tmp_path / "run.distmon"
    told = tmp_path / "told.jsonl"
    with serving() as webhook:
        job = RunningJob(
            [
                "--record",
                str(out),
                "--abort-on-hang",
                "5",
                "--notify",
                webhook.url,
                "--on-alert",
                f"cat >> {told}",
                "--",
                TORCHRUN,
                "--standalone",
                "--nproc_per_node=3",
                *train("--fault", "hang", "--fault-rank", "2"),
            ]
        )
        status, ended = job.wait(110)
        posts = list(webhook.bodies)
    err = job.stderr()
    assert status != 0, err[-3000:]
    assert ended - job.injected() < 60, "ended long after the fault"
    assert "distmon: ending the job: the hang alert stood" in err
    assert "distmon run: distmon ended the job (--abort-on-hang)" in err
    assert "did not end" not in err

    bundles = sorted((tmp_path / "run.evidence").iterdir())
    assert bundles and all(re.fullmatch(r"\d{8}-\d{6}-hang(-\d+)?", b.name) for b in bundles)
    final = bundles[-1]
    assert json.loads((final / "alert.json").read_text())["ranks"] == [2]
    assert sorted(f.name for f in final.glob(f"{DUMP_PREFIX}*")) == [f"{DUMP_PREFIX}{r}" for r in range(3)]
    stacks = (final / "stacks.txt").read_text()
    assert "rank 2" in stacks and "train.py" in stacks and "in inject" in stacks
    analysis = subprocess.run(
        [str(Path(sys.executable).parent / "torchfrtrace"), str(final)], capture_output=True, text=True, timeout=120
    )
    assert analysis.returncode == 0, analysis.stderr
    assert "missing ranks: {2}" in analysis.stdout + analysis.stderr

    report = subprocess.run(
        [sys.executable, "-m", "distmon", "report", str(out)], capture_output=True, text=True, timeout=60
    )
    assert "ended by distmon" in report.stdout and "distmon ended the job at" in report.stdout

    events = [(p["event"], p["alert"]["kind"]) for p in posts]
    assert ("raised", "hang") in events and ("updated", "hang") in events, events
    assert all(p["text"].startswith("distmon: ") and "\n" not in p["text"] for p in posts)
    assert any("distmon ended the job" in p["alert"]["detail"] for p in posts if p["event"] == "updated")
    assert [json.loads(line) for line in told.read_text().splitlines()] == posts


@pytest.mark.torchrun
def test_every_nodes_ranks_end_over_the_keyed_channel(tmp_path: Path) -> None:
    """Two "nodes" (two torchruns, each under its own ``distmon run``) and one monitor on
    TCP with a job key. Rank 3, on the node without the monitor, holds the GIL: it can
    neither dump nor end itself. Every other rank ends at the monitor's command; rank 3
    goes with its launcher's teardown or distmon's kill."""
    key = tmp_path / "job.key"
    subprocess.run([sys.executable, "-m", "distmon", "keygen", str(key)], check=True, capture_output=True)
    monitor, master = f"tcp://127.0.0.1:{free_port()}", str(free_port())
    out = tmp_path / "run.distmon"

    def node(rank: int, *monitoring: str) -> RunningJob:
        launcher = [TORCHRUN, "--nnodes=2", "--nproc_per_node=2", f"--node_rank={rank}"]
        launcher += ["--master_addr=127.0.0.1", f"--master_port={master}"]
        job = train("--fault", "gil", "--fault-rank", "3")
        return RunningJob([*monitoring, "--endpoint", monitor, "--key-file", str(key), "--", *launcher, *job])

    first = node(0, "--record", str(out), "--abort-on-hang", "5")
    wait_until(lambda: "listening on" in first.stderr(), 60, "the monitor listening first, as on a cluster")
    second = node(1)
    second_status, _ = second.wait(120)
    first_status, _ = first.wait(60)
    assert first_status != 0 and second_status != 0, first.stderr()[-3000:]
    assert "distmon: ending the job:" in first.stderr()
    report = subprocess.run(
        [sys.executable, "-m", "distmon", "report", str(out)], capture_output=True, text=True, timeout=60
    )
    ends = dict(re.findall(r"rank\s+(\d+)\s+\S+\s+step\s+\d+\s+(.*)", report.stdout))
    assert {r: ends.get(r) for r in "012"} == dict.fromkeys("012", "ended by distmon (--abort-on-hang)"), report.stdout
    assert "ended by distmon" not in ends.get("3", ""), report.stdout
    final = sorted((tmp_path / "run.evidence").iterdir())[-1]
    assert sorted(f.name for f in final.glob(f"{DUMP_PREFIX}*")) == [f"{DUMP_PREFIX}{r}" for r in range(3)]
    assert "No dump from ranks 3" in (final / "alert.txt").read_text()
    assert "holding the GIL" in (final / "stacks.txt").read_text()
