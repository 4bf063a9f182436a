"""The seconds the monitor did not watch (its loop stood still, its clock jumped) are counted
apart from the messages it dropped (issue 42): in the state, in the recording's ``d`` records
(one map, as distmon always wrote them, read apart by reason), to the screens attached, and
every output says each in its own unit."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import pytest

from distmon.export.plain import render
from distmon.export.prometheus import MonitorCollector
from distmon.monitor.attach.messages import numbered, read, tick_message
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import Dropped
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from distmon.monitor.state.unwatched import JUMPED, PAUSED
from distmon.tui.job_header import headline
from tests.support.simulate import SimJob, drive

PAUSE = (30, 51)
"""Seconds of the simulated job the monitor stood still through: no report came in them."""


def paused_monitor(recording: Path | None = None) -> tuple[SimJob, Monitor]:
    """A 4-rank job watched 60 s, a malformed message among its reports, and the monitor's loop
    stood still for 21 s from +30 s."""
    sim = SimJob(world=4)
    monitor = Monitor(Detector(), recorder=RecordingWriter(str(recording)) if recording else None)
    drive(sim, monitor, until=PAUSE[0])
    monitor.ingest(b"not a report", sim.start + PAUSE[0])
    monitor.away(sim.start + PAUSE[0], PAUSED, PAUSE[1] - PAUSE[0])
    monitor.tick(sim.start + PAUSE[0] + 1)
    return sim, monitor


def test_the_seconds_not_watched_are_not_counted_as_messages_dropped(tmp_path: Path) -> None:
    path = tmp_path / "run.distmon"
    _, monitor = paused_monitor(path)
    monitor.away(monitor.last_tick, JUMPED, 5)
    monitor.close()
    assert monitor.state.dropped == {"malformed": 1}
    assert monitor.state.unwatched == {PAUSED: 21, JUMPED: 5}
    dropped = [r for r in read_recording(str(path))[1] if isinstance(r, Dropped)]
    assert sum((r.dropped for r in dropped), Counter()) == {"malformed": 1}
    assert sum((r.unwatched for r in dropped), Counter()) == {PAUSED: 21, JUMPED: 5}
    pm = load_recording(str(path))
    assert (pm.state.dropped, pm.state.unwatched) == (monitor.state.dropped, monitor.state.unwatched)


def old_recording(path: Path) -> SimJob:
    """A recording as distmon wrote it before the seconds had a counter of their own: the
    reports of a 4-rank job, none while its monitor stood still, and one ``d`` record holding
    the messages refused and the seconds not watched in one map."""
    sim = SimJob(world=4)
    writer = RecordingWriter(str(path))
    told = False
    for t, raw in sim.stream(until=90):
        if sim.start + PAUSE[0] <= t < sim.start + PAUSE[1]:
            continue
        if not told and t >= sim.start + PAUSE[1]:
            writer.dropped(sim.start + PAUSE[0], Counter({"malformed": 3, PAUSED: PAUSE[1] - PAUSE[0]}))
            told = True
        writer.message(t, raw)
    writer.close()
    return sim


@pytest.mark.parametrize("speed", [10.0, math.inf], ids=["in time", "as fast as it reads"])
def test_an_old_recording_reads_its_seconds_apart_and_replays_behind_over_them(tmp_path: Path, speed: float) -> None:
    path = tmp_path / "old.distmon"
    sim = old_recording(path)
    pm = load_recording(str(path))
    assert pm.state.dropped == {"malformed": 3} and pm.state.unwatched == {PAUSED: 21}
    assert "276 messages; dropped: 3 malformed; not watched: 21s monitor_paused_s" in render(pm).splitlines()
    looks = itertools.count()
    feed = ReplayFeed(str(path), speed=speed, clock=lambda: next(looks) * 0.01)
    session = Session(feed, Monitor(Detector()))
    changes = []
    while not feed.finished:
        changes += session.run_timed()
    raised = [c.alert for _, c in changes if c.event == "raised"]
    assert [(a.kind, a.ranks) for a in raised] == [("monitor_behind", [])], raised
    assert raised[0].t >= sim.start + PAUSE[0] and "stood still" in raised[0].summary
    state = session.monitor.state
    assert state.dropped == {"malformed": 3} and state.unwatched == {PAUSED: 21}


def test_each_output_says_messages_and_seconds_apart() -> None:
    sim, monitor = paused_monitor()
    now = sim.start + PAUSE[0] + 1
    monitor.publish(now)
    families = {f.name: f for f in MonitorCollector(monitor).collect()}
    assert [(s.labels, s.value) for s in families["distmon_messages_dropped"].samples] == [({"reason": "malformed"}, 1)]
    assert [(s.name, s.labels, s.value) for s in families["distmon_unwatched_seconds"].samples] == [
        ("distmon_unwatched_seconds_total", {"reason": PAUSED}, 21)
    ]
    tracker = OverviewTracker()
    tracker.observe(monitor, now)
    line = headline(tracker.overview(monitor, now)).plain
    assert "· dropped: 1 malformed · not watched: 21s monitor_paused_s" in line, line


def test_a_screen_attached_is_told_the_seconds_apart_from_the_drops() -> None:
    dropped, unwatched = Counter(malformed=1, no_key=2), Counter({PAUSED: 21})
    _, tick = read([numbered(0), tick_message(1.7e9, dropped, unwatched, {}, {})])
    assert tick is not None and (tick.dropped, tick.unwatched) == (dropped, unwatched)
