"""Real jobs whose ranks stop the ways production ranks do, or only pause to work, watched
from end to end: 3 gloo ranks under torchrun with the hook, `distmon record` in its own
process looking at them from outside (/proc, py-spy), the alerts read back from the
recording. (One process seen alone is ``test_process_sight.py``; the rules on real processes
without a job, ``test_rules_on_real_processes.py``.)

Three jobs, each carrying several faults in turn, every one of which ends so the job trains on:

- frozen: rank 2 stopped with SIGSTOP (continued after a while), rank 1 blocked opening a
  FIFO inside ``torch.save`` (a reader comes after a while), rank 0 holding the GIL in native
  code. Each is one alert (a ``hang``, never a ``rank_lost``) naming the rank, what its
  process does, and the one next step.
- working: rank 0 importing a slow module before its first step while the others wait in
  the first collective, then writing two slow checkpoints while the others wait at a barrier.
  No critical alert: warnings that say what it does ("checkpoint", "importing").
- habits: rank 0 uploads its metrics to a slow service every 10 steps (2 s asleep in a socket
  read, the others waiting); the fifth upload does not come back for 12 s. Quiet once the
  uploads are learned; the stuck one named, rank 0 alone, critical, saying how long it
  usually takes.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmon.monitor.recording.format import AlertEvent
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.state.alerts import Alert
from tests.support.recorder import recording

RANKS = 3
INJECTED = re.compile(r"\[train\] rank (\d+): injecting (\S+) at step \d+, t=([\d.]+)")
PID = re.compile(r"pid (\d+)")


@dataclass
class Job:
    exit_code: int
    output: str
    events: list[AlertEvent]
    injected: dict[str, tuple[int, float]]
    """Fault kind -> (rank, time injected)."""
    recording: Path
    recorder_log: str

    def about_the_job(self) -> list[AlertEvent]:
        """The events of alerts about the job: not the monitor's own word that it fell behind (a
        machine loaded past its cores starves it for seconds), which names no rank."""
        behind = [e.alert for e in self.events if e.alert.kind == "monitor_behind"]
        assert all(a.ranks == [] for a in behind), behind
        return [e for e in self.events if e.alert.kind != "monitor_behind"]

    def alerts_after(self, kind: str, until: float) -> dict[str, list[AlertEvent]]:
        """The events of each alert raised between the fault's injection and ``until``
        seconds after it, by alert (raised, updated..., resolved)."""
        start = self.injected[kind][1]
        raised = [e for e in self.about_the_job() if e.event == "raised" and start <= e.t <= start + until]
        return {id_of(e.alert): [x for x in self.events if id_of(x.alert) == id_of(e.alert)] for e in raised}


def id_of(alert: Alert) -> tuple[str, float]:
    return alert.key, alert.t


def run_job(torchrun: Callable, endpoint: str, out: Path, *args: str, timeout: float) -> Job:
    with recording(out, endpoint) as recorder:
        with torchrun(RANKS, *args, "--timeout", "120", endpoint=endpoint, interval=0.5) as job:
            exit_code = job.wait(timeout)
        log = recorder.stop(signal.SIGINT)
    _, records = read_recording(str(out))
    events = [r for r in records if isinstance(r, AlertEvent)]
    injected = {kind: (int(rank), float(t)) for rank, kind, t in INJECTED.findall(job.output)}
    return Job(exit_code, job.output, events, injected, out, log)


@pytest.fixture(scope="module")
def frozen(torchrun, new_endpoint, tmp_path_factory) -> Job:
    args = ["--steps", "110", "--fault", "stop@15:2:14", "--fault", "fifo-save@45:1:14", "--fault", "gil@75:0:14"]
    out = tmp_path_factory.mktemp("frozen") / "run.distmon"
    return run_job(torchrun, new_endpoint(), out, *args, timeout=240)


@pytest.fixture(scope="module")
def working(torchrun, new_endpoint, tmp_path_factory) -> Job:
    args = ["--steps", "70", "--fault", "slow-import@0:0:40"]
    args += ["--fault", "checkpoint@20:0:9", "--fault", "checkpoint@45:0:9"]
    out = tmp_path_factory.mktemp("working") / "run.distmon"
    return run_job(torchrun, new_endpoint(), out, *args, timeout=240)


@pytest.fixture(scope="module")
def habits(torchrun, new_endpoint, tmp_path_factory) -> Job:
    args = ["--steps", "60", "--habit", "upload@10:0:2", "--fault", "upload-hang@50:0:12"]
    out = tmp_path_factory.mktemp("habits") / "run.distmon"
    return run_job(torchrun, new_endpoint(), out, *args, timeout=240)


def one_alert(job: Job, kind: str, rank: int, within: float = 14.0) -> list[AlertEvent]:
    """The one alert the fault raised, every event of it, and nothing else in its time:
    critical at the hang threshold, and before it, where the prober saw the rank do nothing
    in time (on a loaded machine it may not), a warning saying what the rank does. How soon
    is measured by ``benchmarks/bench_detection.py``, not here."""
    alerts = job.alerts_after(kind, within)
    assert len(alerts) == 1, [(e.alert.kind, e.alert.ranks, e.alert.summary) for a in alerts.values() for e in a]
    (events,) = alerts.values()
    assert {(e.alert.kind, tuple(e.alert.ranks)) for e in events} == {("hang", (rank,))}, events
    first = events[0].alert
    if first.severity == "warning":
        assert first.summary.startswith(f"rank {rank} is "), ("named early, saying what it does", first.summary)
    assert any(e.alert.severity == "critical" for e in events), "critical once the wait is a hang"
    return events


def critical_saying(events: list[AlertEvent], words: str) -> Alert | None:
    """The alert as it stood once critical and saying ``words``."""
    return next((e.alert for e in events if words in e.alert.summary and e.alert.severity == "critical"), None)


def test_the_frozen_job_ran_through_and_nobody_was_lost(frozen: Job) -> None:
    assert frozen.exit_code == 0, frozen.output[-3000:]
    assert sorted(frozen.injected) == ["fifo-save", "gil", "stop"], frozen.output[-3000:]
    raised = [(e.alert.kind, e.alert.ranks) for e in frozen.about_the_job() if e.event == "raised"]
    assert raised == [("hang", [2]), ("hang", [1]), ("hang", [0])], "one alert per incident, none after it"
    assert "Traceback" not in frozen.recorder_log, frozen.recorder_log
    assert load_recording(str(frozen.recording)).ending() == "finished: every rank exited cleanly"


def test_a_stopped_rank_is_one_alert_that_says_kill_cont(frozen: Job) -> None:
    events = one_alert(frozen, "stop", 2)
    said = critical_saying(events, "is stopped (SIGSTOP)")
    assert said is not None, [e.alert.summary for e in events]
    assert said.severity == "critical"
    assert said.summary.startswith("rank 2 is stopped (SIGSTOP); 2 ranks wait for it"), said.summary
    pid = PID.search(said.detail.split("rank 2 (", 1)[1]).group(1)
    assert f"What to do about rank 2: `kill -CONT {pid}` on " in said.detail, said.detail
    assert any("py-spy cannot suspend a stopped process" in e.alert.detail for e in events), events[-1].alert.detail
    assert any("train.py:" in e.alert.detail and "in inject" in e.alert.detail for e in events)


def test_a_rank_blocked_opening_its_checkpoint_names_the_file_and_the_mount(frozen: Job) -> None:
    events = one_alert(frozen, "fifo-save", 1)
    said = critical_saying(events, "blocked in the kernel opening")
    assert said is not None, [e.alert.summary for e in events]
    assert said.severity == "critical"
    assert re.match(r"rank 1 is blocked in the kernel opening /\S+/ckpt-\w+/step_45\.pt; ", said.summary), said.summary
    assert "(openat, a FIFO, on /" in said.detail and "What to do about rank 1: check that file system" in said.detail
    assert any("torch.save(model.state_dict(), fifo)" in e.alert.detail for e in events), events[-1].alert.detail


def test_a_rank_holding_the_gil_names_the_native_function(frozen: Job) -> None:
    events = one_alert(frozen, "gil", 0)
    said = critical_saying(events, "holds the GIL in native code")
    assert said is not None, [e.alert.summary for e in events]
    assert said.severity == "critical" and "(sleep);" in said.summary, said.summary
    assert "What to do about rank 0: that call does not release the GIL" in said.detail
    assert "ctypes.PyDLL(None).sleep" in said.detail, said.detail


def test_a_working_job_raises_no_critical_alert_and_no_straggler(working: Job) -> None:
    assert working.exit_code == 0, working.output[-3000:]
    assert sorted(working.injected) == ["checkpoint", "slow-import"], working.output[-3000:]
    critical = [
        (e.alert.kind, e.alert.ranks, e.alert.summary) for e in working.events if e.alert.severity == "critical"
    ]
    assert critical == [], critical
    stragglers = [(e.t, e.alert.summary) for e in working.events if e.alert.kind == "straggler"]
    assert stragglers == [], "the peers' wait at the checkpoint's barrier makes no straggler of rank 0"
    assert load_recording(str(working.recording)).ending() == "finished: every rank exited cleanly"


def test_a_slow_checkpoint_is_a_warning_that_says_checkpoint(working: Job) -> None:
    checkpoints = [e.alert for e in working.events if e.event != "resolved" and "checkpoint" in e.alert.summary]
    assert checkpoints, [(e.alert.kind, e.alert.summary) for e in working.events]
    alert = checkpoints[-1]
    assert alert.kind == "hang" and alert.ranks == [0] and alert.severity == "warning", alert
    assert re.match(r"rank 0 is writing a checkpoint, wrote [\d.]+ MiB in \d", alert.summary), alert.summary
    assert "barrier" in alert.summary and "a pause, not a hang" in alert.detail, alert
    keys = {id_of(e.alert) for e in working.events if "checkpoint" in e.alert.summary}
    assert len(keys) == 1, "the first checkpoint warns; the second is the job's habit, quiet"


def test_a_slow_import_at_start_up_is_a_warning_that_says_importing(working: Job) -> None:
    start = working.injected["slow-import"][1]
    during = [e.alert for e in working.events if start <= e.t <= start + 45 and e.event != "resolved"]
    assert during, [(e.t - start, e.alert.summary) for e in working.events]
    assert {(a.kind, tuple(a.ranks), a.severity) for a in during} == {("hang", (0,), "warning")}, during
    assert any(a.summary.startswith("rank 0 is importing modules, ") for a in during), [a.summary for a in during]
    assert len({id_of(a) for a in during}) == 1, [(e.t - start, e.event, e.alert.summary) for e in working.events]


def test_a_pause_the_job_takes_every_10_steps_is_quiet_once_learned_and_named_when_stuck(habits: Job) -> None:
    assert habits.exit_code == 0, habits.output[-3000:]
    stuck_at = habits.injected["upload-hang"][1]
    before = [e.alert for e in habits.events if e.event == "raised" and e.t < stuck_at]
    assert len(before) <= 2, ("the first uploads may warn; the next are the job's rhythm", before)
    assert all(a.ranks == [0] and a.severity == "warning" for a in before), before
    after = habits.alerts_after("upload-hang", 20)
    assert len(after) == 1, after
    (events,) = after.values()
    said = critical_saying(events, "this pause usually ends within")
    assert said is not None and said.ranks == [0], [e.alert.summary for e in events]
    assert said.summary.startswith("rank 0 is asleep in poll"), said.summary
    assert "The job pauses so as a habit (" in said.detail and "upload_metrics" in said.detail, said.detail
