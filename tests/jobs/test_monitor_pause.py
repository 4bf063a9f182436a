"""The monitor's own pause is not the job's: a real ``distmon record`` frozen (SIGSTOP, as a
suspended VM or a swapping login node would) while a healthy 4-rank gloo job trains, then
resumed, says in one line that it did not watch, names no rank for the silence it did not
see, and names a culprit again once fresh reports arrive.

One job serves every assertion: the pause, then a rank stopped for real after it.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from tests.support.recorder import recording
from tests.support.waiting import wait_until

RANKS = 4
PAUSE = 12.0
"""Seconds the recorder stands still: over twice the silence floor."""
CULPRIT = 2


@dataclass
class PausedMonitor:
    alerts: list[dict]
    stderr: str
    recording: Path
    paused: float
    """When the recorder was frozen."""
    caught_up: str
    """The recorder's standard error once it had caught up after the pause."""
    stopped: float
    """When rank ``CULPRIT`` was stopped, after the monitor had caught up."""
    ended: float
    """When the test began to end the job (its ranks killed: their loss is the test's)."""


@pytest.fixture(scope="module")
def paused(
    torchrun: Callable, new_endpoint: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> PausedMonitor:
    endpoint = new_endpoint()
    out = tmp_path_factory.mktemp("pause") / "run.distmon"
    with recording(out, endpoint) as recorder:
        with torchrun(RANKS, "--epochs", "50", endpoint=endpoint, interval=1.0):
            recorder.wait_recorded("every rank stepping", lambda reports: _stepping(reports) == RANKS, timeout=120)
            recorder.process.send_signal(signal.SIGSTOP)
            paused_at = time.time()
            time.sleep(PAUSE)  # the scenario itself: the monitor stands still this long
            recorder.process.send_signal(signal.SIGCONT)
            wait_until(lambda: "resolved monitor_behind" in recorder.stderr(), 60, "the monitor to catch up")
            caught_up = recorder.stderr()
            culprit = next(r.pid for r in reversed(recorder.reports()) if r.rank == CULPRIT)
            os.kill(culprit, signal.SIGSTOP)
            stopped = time.time()
            try:
                recorder.wait_critical("hang", 60)
            finally:
                os.kill(culprit, signal.SIGCONT)
            stderr = recorder.stderr()
            ended = time.time()
        alerts = recorder.alerts()
    return PausedMonitor(alerts, stderr, out, paused_at, caught_up, stopped, ended)


def _stepping(reports: list) -> int:
    """Ranks whose latest report has stepped a few times."""
    latest = {r.rank: r for r in reports}
    return sum(r.steps >= 5 for r in latest.values())


def test_the_pause_is_said_in_one_line_naming_no_rank(paused: PausedMonitor) -> None:
    """(A monitor starved of CPU later, on a machine loaded past its cores, says so again: that
    is another incident, not the pause's.)"""
    behind = [
        a for a in paused.alerts if a["kind"] == "monitor_behind" and paused.paused - 5 <= a["t"] < paused.stopped
    ]
    assert len(behind) == 1 and behind[0]["ranks"] == [], paused.alerts
    assert "did not watch" in behind[0]["summary"] and "stood still" in behind[0]["summary"], behind[0]
    paused_for = re.search(r"Its own loop did not run for (\d+)s", behind[0]["detail"])
    assert paused_for and int(paused_for.group(1)) >= PAUSE - 1, behind[0]["detail"]
    lines = [line for line in paused.caught_up.splitlines() if "monitor_behind:" in line and "resolved" not in line]
    assert len(lines) == 1, paused.caught_up


def test_no_rank_is_named_for_the_silence_it_did_not_see(paused: PausedMonitor) -> None:
    named = [a for a in paused.alerts if a["ranks"] and a["t"] < paused.stopped]
    assert named == [], named


def test_a_rank_stopped_after_it_caught_up_is_named_alone(paused: PausedMonitor) -> None:
    hangs = [a for a in paused.alerts if a["kind"] == "hang"]
    assert hangs and hangs[0]["ranks"] == [CULPRIT], paused.alerts
    said = [line for line in paused.stderr.splitlines() if " hang: rank 2 " in line]
    assert said and "is stopped (SIGSTOP)" in said[0], paused.stderr  # the report has its latest words
    others = [a for a in paused.alerts if a["ranks"] and a["ranks"] != [CULPRIT] and a["t"] < paused.ended]
    assert others == [], paused.alerts


def test_a_replay_is_behind_over_the_same_seconds(paused: PausedMonitor) -> None:
    """The pause is in the recording: a replay played in time (as ``distmon replay`` plays
    it, here on a clock of its own, a tenth of a second a look) names no rank for it either."""
    looks = itertools.count()
    feed = ReplayFeed(str(paused.recording), speed=10.0, clock=lambda: next(looks) * 0.01)
    session = Session(feed, Monitor(Detector()))
    changes = []
    while not feed.finished:
        changes += session.run_timed()
    raised = [c.alert for _, c in changes if c.event == "raised"]
    assert [a.kind for a in raised if a.t < paused.stopped] == ["monitor_behind"], raised
