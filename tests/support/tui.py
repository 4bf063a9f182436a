"""Recordings of simulated jobs for the terminal UI's tests, and a helper that plays one to
its end inside a running app, so that what is on screen depends on the recording only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.tui.app import DistmonApp
from tests.support.simulate import SimJob, drive

SCENARIOS: dict[str, tuple[Callable[[], SimJob], float]] = {
    "healthy": (lambda: SimJob(world=16, ranks_per_host=8), 40.0),
    "hang": (lambda: SimJob(world=16, ranks_per_host=8).hang(5, at=20), 50.0),
    "worker_crash": (lambda: SimJob(world=16, ranks_per_host=8).worker_kill(3, at=20), 30.0),
    "large": (lambda: SimJob(world=512, ranks_per_host=8).hang(300, at=10), 25.0),
    "straggler": (lambda: SimJob(world=16, ranks_per_host=8, step_time=0.05).straggler(6, 1.15, 0.02, at=10), 60.0),
}


def record(name: str, path: Path) -> Path:
    """Run the scenario through a monitor with the real detector, recording it as a live
    ``distmon watch --record`` would."""
    make, until = SCENARIOS[name]
    sim = make()
    monitor = Monitor(Detector(probe=sim.probe), recorder=RecordingWriter(str(path)))
    drive(sim, monitor, until)
    monitor.close()
    return path


async def play_to_end(pilot: Pilot) -> None:
    """Let the app drain its (as-fast-as-possible) replay, then redraw once more."""
    app = pilot.app
    assert isinstance(app, DistmonApp) and isinstance(app.feed, ReplayFeed)
    for _ in range(400):
        if app.feed.finished and app.session.taken == 0:
            break
        await pilot.pause(0.02)
    app.drain()
    app.redraw()
    await pilot.pause()
