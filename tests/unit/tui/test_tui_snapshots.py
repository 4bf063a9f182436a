"""Snapshots of the main screens, from recordings of simulated jobs: deterministic because
the app's clock is the recording's, the host names are the simulator's, alert times are
printed in UTC and no cursor blinks. Update with ``pytest --snapshot-update``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from distmon.monitor.intake.feeds import ReplayFeed
from distmon.tui.app import build_app
from distmon.tui.rank_table import RankTable
from tests.support.tui import play_to_end

Recording = Callable[[str], Path]
SIZE = (120, 36)


def app_for(path: Path):
    return build_app(ReplayFeed(str(path), speed=math.inf))


def test_healthy_run(snap_compare, recording: Recording) -> None:
    assert snap_compare(app_for(recording("healthy")), terminal_size=SIZE, run_before=play_to_end)


def test_hang_with_its_culprit(snap_compare, recording: Recording) -> None:
    assert snap_compare(app_for(recording("hang")), terminal_size=SIZE, run_before=play_to_end)


def test_culprit_detail(snap_compare, recording: Recording) -> None:
    async def open_culprit(pilot: Pilot) -> None:
        await play_to_end(pilot)
        pilot.app.query_one(RankTable).action_jump(5)
        await pilot.press("enter")
        pilot.app.redraw()
        await pilot.pause()

    assert snap_compare(app_for(recording("hang")), terminal_size=SIZE, run_before=open_culprit)


def test_worker_crash(snap_compare, recording: Recording) -> None:
    assert snap_compare(app_for(recording("worker_crash")), terminal_size=SIZE, run_before=play_to_end)


def test_straggler_and_how_long_each_rank_holds_the_others_up(snap_compare, recording: Recording) -> None:
    async def open_straggler(pilot: Pilot) -> None:
        await play_to_end(pilot)
        pilot.app.query_one(RankTable).action_jump(6)
        await pilot.press("enter")
        pilot.app.redraw()
        await pilot.pause()

    assert snap_compare(app_for(recording("straggler")), terminal_size=SIZE, run_before=play_to_end)
    assert snap_compare(app_for(recording("straggler")), terminal_size=SIZE, run_before=open_straggler)


def test_small_terminal(snap_compare, recording: Recording) -> None:
    assert snap_compare(app_for(recording("hang")), terminal_size=(80, 24), run_before=play_to_end)
