"""The app runs the one session driver as ``record`` and ``replay --headless`` do: played to the
end of a recording, its monitor has ticked to the same closing tick and holds the same alerts,
at the same times, as the headless replay of that recording."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from distmon.commands import replay
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.session import Session
from distmon.tui.app import build_app
from tests.support.paths import DATA
from tests.support.tui import play_to_end


def facts(monitor: Monitor) -> list[tuple[object, ...]]:
    """Each alert raised: what it is, whom it names, when it was raised and resolved."""
    return [(a.kind, a.severity, a.ranks, a.key, a.t, a.resolved) for a in monitor.alerts.history]


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["hang", "worker_crash", "hang-rank2"])
async def test_the_apps_last_tick_and_alerts_are_the_headless_replays(
    name: str, recording: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(DATA / f"{name}.distmon" if name == "hang-rank2" else recording(name))
    headless = Session(ReplayFeed(path, speed=math.inf), Monitor())
    headless.finish()
    headless.close()
    assert headless.monitor.last_tick and headless.monitor.alerts.history

    app = build_app(ReplayFeed(path, speed=math.inf))
    async with app.run_test() as pilot:
        await play_to_end(pilot)
        assert app.session.finished
        assert app.monitor.last_tick == headless.monitor.last_tick
        assert facts(app.monitor) == facts(headless.monitor)

    args = argparse.Namespace(file=path, speed=math.inf, paused=False, headless=True, json=True)
    assert replay.run(args) == 0
    printed = [(a["kind"], a["ranks"], a["t"]) for a in json.loads(capsys.readouterr().out)]
    assert printed == [(a.kind, a.ranks, a.t) for a in app.monitor.alerts.history]


@pytest.mark.anyio
async def test_quitting_mid_replay_finishes_the_session_once(recording: Callable[[str], Path]) -> None:
    app = build_app(ReplayFeed(str(recording("hang")), speed=1.0))
    async with app.run_test() as pilot:
        await pilot.pause(0.1)
        assert not app.session.finished
        await pilot.press("q")
    assert app.session.finished
    assert app.session.finish() == [], "a second finish ticks no more"
