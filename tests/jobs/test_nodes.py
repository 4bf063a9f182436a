"""Every node seen as closely as the monitor's own: a real two-node job over network
namespaces (each node its own address and host name, gloo over the link between them), a
``distmon relay`` per node, ``distmon record`` on the head, outside both. Node B's relay runs
without CAP_SYS_PTRACE, as in a container: py-spy is refused there, the ranks' faulthandler is not.

One job carries the incidents in turn, each on a rank of a node the monitor is not on: rank 1
asleep in ``time.sleep``, rank 3 holding the GIL in a C regex call, rank 1 stopped (SIGSTOP,
resumed by itself). Each is named alone, early (a warning saying what the process does, before
the hang threshold), in the words used for a rank on the monitor's host, with its stack. Then
node B as a whole: its relay killed while its ranks train on (one warning), its link dropping
and coming back twice (one warning naming the link), cut off for good (node_lost);
then rank 1 killed (SIGKILL, as the OOM killer does) while torchrun tears node A down: named
at once in the words of the eye that saw it, and so the report's last word on it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from distmon.monitor.recording.format import AlertEvent, ColumnRecord
from distmon.monitor.recording.reader import RecordingError, read_recording
from tests.support.commands import DISTMON, TORCHRUN, free_port
from tests.support.nodes import Node, can_make_nodes, nodes
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.recorder import Recorder, recording
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(bool(can_make_nodes()), reason=can_make_nodes() or "")

ASLEEP, GIL, STOPPED = 60, 160, 280
"""The steps at which the faults come (a job's first steps are slow: the eyes learn the job), far
enough apart that each alert is resolved before the next fault: a rank's hangs share a key, and a
fault that came while the last was still open would update that alert, not raise one."""
# The GIL is held and rank 1 stopped 12 s each: either is named once the rank's reporting thread
# has been silent two intervals and a second, which three test files at once on 2 cores can
# stretch past 6 s.
FAULTS = [f"hang@{ASLEEP}:1:6", f"regex@{GIL}:3:12", f"stop@{STOPPED}:1:12"]
WITHOUT_PTRACE = ["capsh", "--drop=cap_sys_ptrace", "--"]
AWAY_SLACK = 10.0
"""How far a replay's ``monitor_behind`` may stand from the live one's: the live monitor notices its own
stall (its loop, or its feed's reader thread, starved on a loaded host) at the stall's end, and records
it at its start, whence a replay says it."""


@dataclass
class Job:
    out: Path
    logs: Path
    recorder: Recorder
    nodes: list[Node]
    relays: dict[str, list[str]]
    """Each node's relay command, as started."""
    started: list[subprocess.Popen[bytes]]

    def restart_relay(self, name: str) -> subprocess.Popen[bytes]:
        log = (self.logs / f"relay-{name}-again.log").open("w")
        self.started.append(start(self.relays[name], stderr=log))
        return self.started[-1]

    def injected(self, fault: str) -> float:
        """When the job says it injected ``fault`` (its own clock, this machine's)."""
        text = "".join(p.read_text() for p in self.logs.glob("job-*.log"))
        found = re.search(rf"injecting {fault} at step \d+, t=([\d.]+)", text)
        return float(found.group(1)) if found else 0.0

    def raised(self, after: float) -> list[AlertEvent]:
        """The alerts raised after ``after`` so far, in order."""
        try:
            _, records = read_recording(str(self.out))
        except RecordingError:
            return []
        return [r for r in records if isinstance(r, AlertEvent) and r.event == "raised" and r.t >= after]

    def first_alert_after(self, fault: str) -> tuple[float, AlertEvent]:
        """The first alert raised once the job injected ``fault``. How soon the job reaches the
        fault's step is the load's to say (the fault before it holds the GIL for CPU seconds, which
        a loaded host stretches): awaited as long as the other real-job tests await a fault."""
        at = wait_until(lambda: self.injected(fault), 180, f"the job to inject {fault}")
        alert = wait_until(lambda: next(iter(self.raised(at - 1)), None), 30, f"an alert after {fault}")
        return at, alert

    def resolved(self, key: str, after: float = 0.0) -> bool:
        """An alert of ``key`` was resolved since ``after`` (a rank's hangs share a key)."""
        _, records = read_recording(str(self.out))
        return any(
            isinstance(r, AlertEvent) and r.event == "resolved" and r.alert.key == key and r.t >= after for r in records
        )

    def alive_for(self, alert: AlertEvent, seconds: float) -> bool:
        """The recording has gone on ``seconds`` past ``alert``'s raising."""
        _, records = read_recording(str(self.out))
        return max((r.t for r in records), default=0.0) >= alert.t + seconds

    def detail(self, alert: AlertEvent, evidence: str, timeout: float = 20) -> str:
        """The alert's detail once one of its updates shows ``evidence`` (a stack lands in an
        update; the alert may be resolved since)."""

        def shown() -> str:
            _, records = read_recording(str(self.out))
            mine = (
                r.alert.detail
                for r in records
                if isinstance(r, AlertEvent) and r.alert.key == alert.alert.key and r.t >= alert.t
            )
            return next((detail for detail in mine if evidence in detail), "")

        return wait_until(shown, timeout, f"{evidence!r} in the alert's detail")


def _headers(job: Job) -> list[np.ndarray]:
    """The reports' headers recorded so far, a batch at a time; none before the file is there."""
    try:
        return [r.batch.headers for r in read_recording(str(job.out))[1] if isinstance(r, ColumnRecord)]
    except RecordingError:
        return []


def _stepping(job: Job) -> bool:
    """Every rank of the job has reported a step: node B's ranks are known to the monitor."""
    return {int(rank) for h in _headers(job) for rank in h["rank"][h["steps"] > 0]} >= {0, 1, 2, 3}


def _process_of(job: Job, rank: int) -> int:
    """Rank ``rank``'s pid, as its latest report recorded said it."""
    batches = _headers(job)
    return next(int(h["pid"][h["rank"] == rank][-1]) for h in reversed(batches) if (h["rank"] == rank).any())


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    if shutil.which("capsh") is None:
        pytest.skip("capsh (libcap2-bin) is not installed")
    logs = tmp_path_factory.mktemp("nodes")
    out = logs / "job.distmon"
    rdzv, port = free_port(), free_port()
    with nodes(["node-a", "node-b"]) as (head, made):
        upstream = f"tcp://{head}:{port}"
        with recording(out, upstream) as recorder:
            started: list[subprocess.Popen[bytes]] = []
            relays: dict[str, list[str]] = {}
            env = {**os.environ, "DISTMON_INTERVAL": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
            try:
                for k, node in enumerate(made):
                    listen = f"tcp://127.0.0.1:{7000 + k}"
                    relay = [*DISTMON, "relay", "--listen", listen, "--upstream", upstream]
                    if node.name == "node-b":
                        relay = [*WITHOUT_PTRACE, "-c", " ".join(relay)]
                    log = (logs / f"relay-{node.name}.log").open("w")
                    relays[node.name] = node.command(relay)
                    started.append(start(relays[node.name], stderr=log))
                    train = [str(TRAIN), "--distmon", "--workers", "0", "--timeout", "120", "--steps", "4000"]
                    train += ["--step-time", "0.05", *(arg for fault in FAULTS for arg in ("--fault", fault))]
                    launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k)]
                    launcher += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{made[0].address}:{rdzv}"]
                    launcher += ["--rdzv-id", "nodes", "--local-addr", node.address]
                    ranks = {**env, "DISTMON_ENDPOINT": listen, "GLOO_SOCKET_IFNAME": node.inside}
                    log = (logs / f"job-{node.name}.log").open("w")
                    started.append(
                        start(node.command([*launcher, *train]), env=ranks, stdout=log, stderr=subprocess.STDOUT)
                    )
                yield Job(out, logs, recorder, made, relays, started)
            finally:
                for process in started:
                    kill_tree(process)


def test_a_remote_rank_asleep_is_named_alone_early_with_its_stack(job: Job) -> None:
    _, alert = job.first_alert_after("hang")
    assert alert.alert.kind == "hang" and alert.alert.ranks == [1], alert.alert
    assert alert.alert.summary.startswith("rank 1 is asleep in clock_nanosleep;"), alert.alert.summary
    assert alert.alert.severity == "warning", "named early, for doing nothing, before the hang threshold"
    detail = job.detail(alert, "time.sleep")
    assert "rank 1 (node-a, pid" in detail and "train.py" in detail, detail


def test_a_remote_rank_holding_the_gil_is_named_with_its_stack_though_ptrace_is_refused(job: Job) -> None:
    _, alert = job.first_alert_after("regex")
    assert alert.alert.ranks == [3], alert.alert
    assert alert.alert.summary.startswith("rank 3 holds the GIL"), alert.alert.summary
    detail = job.detail(alert, "faulthandler")
    assert "hold_the_gil" in detail and "train.py" in detail, detail
    assert "py-spy" in detail and "CAP_SYS_PTRACE" in detail, "why py-spy could not take it"


def test_a_remote_rank_stopped_is_named_alone_with_the_step_to_take_on_its_node(job: Job) -> None:
    _, alert = job.first_alert_after("stop")
    assert alert.alert.ranks == [1], alert.alert
    assert alert.alert.summary.startswith("rank 1 is stopped (SIGSTOP);"), alert.alert.summary
    assert "`kill -CONT " in alert.alert.detail and "` on node-a" in alert.alert.detail, alert.alert.detail
    assert alert.alert.severity == "warning", "named early, for doing nothing: how soon is bench_nodes.py's to say"
    # the job trains on before node B's tests: a wait for rank 1 is no wait for node B
    wait_until(lambda: job.resolved(alert.alert.key, alert.t), 30, "rank 1 continued and its alert resolved")


def test_a_dead_relay_whose_ranks_train_on_is_one_warning_naming_no_rank(job: Job) -> None:
    """Node B's relay killed: its ranks train on (ranks 0-1 complete all-reduces with them),
    so node B is unwatched, not lost: one warning, no rank named, nothing critical at any tick
    (a rank whose last report came a batch before the others' is silent a moment before its
    relay is), resolved when the relay is back."""
    killed = time.time()
    kill_tree(job.started[2])  # node B's relay: after node A's relay and job
    alert = wait_until(lambda: next((a for a in job.raised(killed) if a.alert.kind == "node_unwatched"), None), 30,
                       "node B said unwatched")  # fmt: skip
    assert alert.alert.severity == "warning" and alert.alert.ranks == [], alert.alert
    assert "node-b" in alert.alert.summary, alert.alert.summary
    wait_until(lambda: job.alive_for(alert, 3), 20, "three seconds of the warning")
    job.restart_relay("node-b")
    wait_until(lambda: job.resolved(alert.alert.key, alert.t), 30, "the warning resolved once the relay is back")
    raised = [(a.alert.kind, a.alert.summary) for a in job.raised(killed)]
    assert [kind for kind, _ in raised] == ["node_unwatched"], f"one incident, one alert: {raised}"


def test_a_link_that_drops_and_comes_back_is_one_warning_naming_the_node_and_its_link(job: Job) -> None:
    """Node B's link down 3 s, up, and again 10 s later: the job stands still each time and
    goes on. One warning naming node B and its interface, how often and how long; nothing
    critical (a link that comes back is no node lost)."""
    node = job.nodes[1]
    began = time.time()
    for i in range(2):
        node.cut()
        time.sleep(3)
        node.mend()
        if i == 0:
            time.sleep(7)
    alert = wait_until(lambda: next((a for a in job.raised(began) if a.alert.kind == "link_flapping"), None), 30,
                       "node B's link said to flap")  # fmt: skip
    assert alert.alert.severity == "warning" and alert.alert.ranks == [], alert.alert
    assert alert.alert.summary.startswith(f"node-b: {node.inside} down 2 times in "), alert.alert.summary
    assert "; the job stood still" in alert.alert.summary, alert.alert.summary
    raised = [(a.alert.kind, a.alert.summary) for a in job.raised(began)]
    assert [kind for kind, _ in raised] == ["link_flapping"], f"one incident, one alert: {raised}"


def test_a_node_cut_off_is_one_alert_naming_the_node_and_its_ranks(job: Job) -> None:
    wait_until(lambda: _stepping(job), 120, "every rank stepping (the test run alone)")
    cut = time.time()
    job.nodes[1].cut()
    alert = wait_until(lambda: next(iter(job.raised(cut)), None), 30, "an alert after node B was cut off")
    assert alert.alert.kind == "node_lost" and alert.alert.ranks == [2, 3], alert.alert
    assert alert.alert.severity == "critical" and "node-b" in alert.alert.summary, alert.alert.summary
    assert "code path" not in alert.alert.detail, "advice about the node and its network, never about code"

    # node A's ranks wait on for node B: no second alert for the same incident (the monitor's own,
    # behind on a host loaded past its cores, is another: it names no rank)
    def alone() -> bool:
        about_the_job = [a for a in job.raised(cut) if a.alert.kind != "monitor_behind"]
        return len(about_the_job) == 1 and job.alive_for(alert, 5)

    with contextlib.suppress(AssertionError):  # the recording goes on 5 s later on a loaded host: awaited
        wait_until(alone, 60, "five seconds of the alert alone")
    assert alone(), [(a.alert.kind, a.alert.ranks, a.alert.summary, a.event) for a in job.raised(cut)]


def test_a_rank_killed_without_a_word_while_the_launcher_tears_down_the_rest_is_named_by_the_eye_that_saw(
    job: Job,
) -> None:
    """Rank 1 SIGKILLed (the OOM killer's way) on node A, node B cut off: rank 0 raises, torchrun
    stops it. Node A's eye tells rank 1's process gone at once: it is named in the words of the
    eye that saw it, and the recorder, stopped a second after node A's launcher ended, ends it
    gone, not running. (Node B's loss stays the first cause: it came first.)"""
    killed = time.time()
    os.kill(_process_of(job, 1), signal.SIGKILL)
    alert = wait_until(lambda: next((a for a in job.raised(killed) if a.alert.kind == "rank_lost"), None), 30,
                       "rank 1 named lost")  # fmt: skip
    assert alert.alert.ranks == [1] and alert.alert.severity == "critical", alert.alert
    assert "as the eye on node-a (its distmon relay) saw" in alert.alert.detail, alert.alert.detail
    job.started[1].wait(60)  # node A's torchrun; node B's waits cut off
    time.sleep(1)  # a recorder stopped a second after the job ended
    job.recorder.stop()
    report = subprocess.run([*DISTMON, "report", str(job.out)], capture_output=True, text=True, timeout=120).stdout
    [row] = [line for line in report.splitlines() if line.startswith("  rank     1 ")]
    assert "its process is gone" in row, row


def test_a_replay_tells_the_story_the_live_monitor_told(job: Job) -> None:
    """What the eyes saw is in the recording: a replay raises every live alert, same kind and
    ranks, within a second, its summary the same up to the first comma."""
    if job.recorder.process.poll() is None:
        job.recorder.stop()

    def alerts(*command: str) -> list[dict[str, object]]:
        done = subprocess.run([*DISTMON, *command, str(job.out)], capture_output=True, text=True, timeout=120)
        return list(json.loads(done.stdout))

    live, replayed = alerts("report", "--json"), alerts("replay", "--headless", "--json")
    assert len(replayed) == len(live) and live, (live, replayed)
    for was, again in zip(live, replayed, strict=True):
        assert (again["kind"], again["ranks"]) == (was["kind"], was["ranks"]), (was, again)
        # the live monitor's own stall on a loaded host: live says it at its end, a replay from its start
        within = AWAY_SLACK if was["kind"] == "monitor_behind" else 1.0
        assert abs(float(again["t"]) - float(was["t"])) <= within, (was, again)  # type: ignore[arg-type]
        assert str(again["summary"]).split(",")[0] == str(was["summary"]).split(",")[0], (was, again)
