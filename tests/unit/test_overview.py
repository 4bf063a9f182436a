"""One story on every surface (issue 33): the report and the replay of the same recording
agree on its first cause, the words read right (one host, no repeated prefix), and the
help and the synopses list what works."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from distmon.export.plain import render
from distmon.monitor import overview
from distmon.monitor.outside.sight import Seen
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.readback import Postmortem, load_recording
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import CRITICAL, Alert
from distmon.monitor.state.limits import LIMITS
from distmon.node.proc import Sample
from tests.support.commands import distmon
from tests.support.paths import DATA, REPO
from tests.support.simulate import SimJob, drive

CLI_DOC = REPO / "docs" / "cli.md"


def replayed_criticals(name: str) -> list[dict[str, object]]:
    done = distmon("replay", "--headless", "--json", "--speed", "max", str(DATA / name))
    assert done.returncode == 0, done.stderr
    return [a for a in json.loads(done.stdout) if a["severity"] == CRITICAL]


def test_a_false_alarm_that_resolved_in_a_job_that_finished_is_no_first_cause() -> None:
    """rank 0 checkpointed while the others waited; one tick saw the barrier "stuck", the
    next saw it done, and the job finished cleanly. The replay raises no critical alert,
    and the report names no first cause, yet keeps the timeline."""
    assert replayed_criticals("checkpoint-barrier.distmon") == []
    pm = load_recording(str(DATA / "checkpoint-barrier.distmon"))
    assert pm.ending() == "finished: every rank exited cleanly"
    assert pm.first_cause is None
    text = render(pm)
    assert "FIRST CAUSE" not in text
    assert "No first cause: 4 alerts raised, none standing at the end" in text
    assert "Timeline:" in text


def test_a_critical_alert_that_tells_no_ending_is_no_first_cause_in_the_report_as_in_the_header() -> None:
    """The report picks its first cause as the live header does
    (:func:`~distmon.monitor.state.ending.first_cause`): a critical alert that stands but
    neither fails nor stops a job (a lost relay) is in the timeline, not on top."""
    sim, job = SimJob(world=2), JobState(LIMITS)
    for rank in (0, 1):
        report = sim.report(rank, sim.start + 1)
        assert report is not None and job.apply(report, sim.start + 1)
    lost = Alert("relay_lost", CRITICAL, [0, 1], sim.start + 1, "relay on node-b lost", "")
    pm = Postmortem(header={}, state=job, alerts=[lost], first=sim.start, last=sim.start + 2)
    assert pm.first_cause is None
    text = render(pm)
    assert "FIRST CAUSE" not in text
    assert "No first cause: 1 alert stood at the end, none a failure, a hang, a divergence or a stall" in text
    assert "relay_lost" in text.split("Timeline:")[1]


def test_report_and_replay_name_the_same_culprit_of_a_job_killed_while_hung() -> None:
    """An older recording resolved the hang as torchrun tore the job down; read now, the
    hang ends with the job, as the monitor keeps it, and is the first cause the replay
    also raises."""
    (replayed,) = replayed_criticals("hang-rank2.distmon")
    pm = load_recording(str(DATA / "hang-rank2.distmon"))
    cause = pm.first_cause
    assert cause is not None and cause.kind == replayed["kind"] == "hang"
    assert cause.ranks == replayed["ranks"] == [2] and cause.resolved is None
    assert pm.ending().startswith("stopped while hung: ranks 0-3 terminated by SIGTERM while the hang alert stood")
    assert "collective #36 (all_reduce)" in cause.summary and "collective #36 (all_reduce)" in str(replayed["summary"])


def test_the_ranks_that_raised_as_the_job_came_down_are_no_second_hang() -> None:
    """A real 8-rank TP x DP job (tests/jobs/test_group_jobs.py) on a loaded machine: rank 5
    stalled, then ranks 0-1 deadlocked and the test tore the job down; ranks 6-7 raised on
    losing a peer ("Connection closed by peer") while the others still waited in the barrier
    they had left. They left because others did: the replay names the stall and the deadlock,
    and nothing more."""
    criticals = replayed_criticals("deadlock-then-teardown.distmon")
    assert [(a["kind"], a["ranks"]) for a in criticals] == [("hang", [5]), ("hang", [0, 1])], criticals
    assert "deadlock" in str(criticals[1]["summary"])


def test_the_report_reads_right() -> None:
    text = distmon("report", str(DATA / "hang-rank2.distmon")).stdout
    assert "hang: hang:" not in text
    assert "FIRST CAUSE (+8.1s): hang: ranks 0-1, 3 wait 8.7s in collective #36 (all_reduce) for rank 2" in text
    assert "4 ranks on 1 host," in text
    assert not re.search(r"\b1 (hosts|ranks|messages|alerts)\b", text)
    assert ", ended with the job" in text


def test_doctor_help_lists_only_what_runs_here() -> None:
    """Outside a rank, ``--collectives`` is refused: its options are not listed, and the
    epilog gives the command that runs it. Inside one, they are listed."""
    outside = distmon("doctor", "--help").stdout
    assert "--workers N" in outside and "--json" in outside
    assert "--collectives " not in outside.split("The collectives smoke test")[0]
    assert "torchrun --nproc-per-node=N" in outside and "-m distmon.doctor --collectives" in outside
    refused = distmon("doctor", "--collectives")
    assert refused.returncode == 2 and "runs inside each rank" in refused.stderr
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1"}
    inside = distmon("doctor", "--help", env=env).stdout
    assert "--size-mb SIZE_MB" in inside and "--rounds ROUNDS" in inside


@pytest.mark.parametrize("command", ["watch", "record", "relay", "look"])
def test_the_synopsis_lists_every_option_of_help(command: str) -> None:
    usage = distmon(command, "--help").stdout.split("\n\n", 1)[0]
    options = set(re.findall(r"\[?(--[a-z-]+)", usage)) - {"--help"}
    doc = CLI_DOC.read_text()
    synopsis = doc.split(f"## `distmon {command}`", 1)[1].split("```", 2)[1]
    assert options and not {o for o in options if o not in synopsis}, synopsis


@pytest.mark.parametrize(
    ("state", "syscall", "words"),
    [("S", "clock_nanosleep", "asleep"), ("T", None, "stopped (SIGSTOP)"), ("S", "futex", "waits on a lock")],
)
def test_the_culprit_row_says_what_the_prober_saw(state: str, syscall: str | None, words: str) -> None:
    """Live, the culprit's status is the prober's verdict the hang alert was written from;
    the ranks that wait for it say for whom, and the header names it."""
    sim = SimJob(world=4, ranks_per_host=4).hang(2, at=5)

    def outside(host: str, pid: int) -> Seen | None:
        t = time.monotonic()
        return Seen(Sample(pid, t - 2, state, syscall=syscall), Sample(pid, t, state, syscall=syscall))

    monitor = Monitor(Detector(probe=sim.probe, outside=outside))
    drive(sim, monitor, until=40)
    now = monitor.last_tick
    tracker = OverviewTracker()
    tracker.observe(monitor, now)
    seen = tracker.overview(monitor, now)
    assert seen.culprits == {2} and seen.doing == words
    assert seen.story is not None and seen.story.waiting == 3
    assert seen.story.status(monitor.state.ranks[2]) == words
    assert seen.story.status(monitor.state.ranks[0]) == "waits for 2"
    assert overview.culprit_words(seen).startswith(f"rank 2 {words}")
    hang = overview.first_cause(monitor.alerts.active.values())
    assert hang is not None and hang.ranks == [2] and hang.doing == {2: words}, "the row's words are the alert's"


def test_the_screen_asks_no_prober_what_a_culprit_does() -> None:
    """The words on the screen are those the hang rule wrote at its tick: what the prober sees
    in between (a rank resumed by SIGCONT, asleep now) shows at the next tick, alert and row
    alike, never on a redraw of its own."""
    sim = SimJob(world=4, ranks_per_host=4).hang(2, at=5)
    seen = {"state": "T", "syscall": None}

    def outside(host: str, pid: int) -> Seen | None:
        t = time.monotonic()
        return Seen(
            Sample(pid, t - 2, seen["state"], syscall=seen["syscall"]),
            Sample(pid, t, seen["state"], syscall=seen["syscall"]),
        )

    monitor = Monitor(Detector(probe=sim.probe, outside=outside))
    drive(sim, monitor, until=40)
    now = monitor.last_tick
    seen.update(state="S", syscall="clock_nanosleep")
    tracker = OverviewTracker()
    assert tracker.overview(monitor, now + 0.5).doing == "stopped (SIGSTOP)"
    monitor.tick(now + 1)
    hang = overview.first_cause(monitor.alerts.active.values())
    assert hang is not None and hang.doing == {2: "asleep"} and "is asleep" in hang.summary
    assert tracker.overview(monitor, now + 1).doing == "asleep"
