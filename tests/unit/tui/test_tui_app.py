"""The real app under Pilot, fed by recordings of simulated jobs and by real ZeroMQ streams."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import zmq

from distmon.monitor.intake.feeds import LiveFeed, ReplayFeed
from distmon.monitor.state import statuses
from distmon.tui.alert_detail import AlertDetail
from distmon.tui.alerts_panel import AlertsPanel
from distmon.tui.app import build_app
from distmon.tui.help_screen import HelpScreen
from distmon.tui.rank_detail import RankDetail
from distmon.tui.rank_table import RankTable
from tests.support.paths import DATA
from tests.support.simulate import SimJob
from tests.support.tui import play_to_end

Recording = Callable[[str], Path]
pytestmark = pytest.mark.anyio


def replay(path: Path, speed: float = math.inf):
    return build_app(ReplayFeed(str(path), speed=speed))


def shown_ranks(app) -> list[int]:
    return [row.rank for row in app.query_one(RankTable).rows if row.rank is not None]


async def test_a_hang_names_its_culprit_and_enter_shows_its_stack(recording: Recording) -> None:
    app = replay(recording("hang"))
    async with app.run_test(size=(120, 36)) as pilot:
        await play_to_end(pilot)
        assert app.overview.state == statuses.HUNG
        assert app.overview.culprits == {5}
        assert app.overview.oldest is not None and app.overview.oldest.remaining is not None
        table = app.query_one(RankTable)
        table.action_jump(shown_ranks(app).index(5))
        await pilot.press("enter")
        assert isinstance(app.screen, RankDetail) and app.screen.rank == 5
        await pilot.pause()
        stack = str(app.screen.query_one("#detail-stack").render())
        assert "save_checkpoint" in stack
        await pilot.press("escape")
        assert isinstance(app.screen.query_one(RankTable), RankTable)


async def test_choosing_an_alert_shows_its_evidence(recording: Recording) -> None:
    app = replay(recording("hang"))
    async with app.run_test(size=(100, 30)) as pilot:
        await play_to_end(pilot)
        panel = app.query_one(AlertsPanel)
        assert [a.kind for a in panel.alerts] == ["hang"]
        await pilot.press("a", "enter")
        assert isinstance(app.screen, AlertDetail)
        assert app.screen.alert.ranks == [5]
        await pilot.press("enter")
        assert isinstance(app.screen, RankDetail) and app.screen.rank == 5


async def test_filter_sort_and_problems_only(recording: Recording) -> None:
    app = replay(recording("worker_crash"))
    async with app.run_test(size=(100, 30)) as pilot:
        await play_to_end(pilot)
        assert shown_ranks(app) == list(range(16))
        await pilot.press("slash", "1", "0", "-", "1", "2")
        assert shown_ranks(app) == [10, 11, 12]
        await pilot.press("escape", "slash", *"ok")  # a status word: every rank raised in the end
        assert shown_ranks(app) == []
        await pilot.press("backspace", "backspace", *"failed")
        assert shown_ranks(app) == list(range(16))
        await pilot.press("escape")
        assert shown_ranks(app) == list(range(16))
        await pilot.press("s")  # by status: the worst first, culprits ahead of the rest
        assert shown_ranks(app)[0] == 3
        await pilot.press("s", "s", "s", "s", "s")
        assert app.query_one(RankTable).sort == "holds up"
        await pilot.press("s")
        assert app.query_one(RankTable).sort == "rank"


async def test_problems_only_hides_healthy_ranks(recording: Recording) -> None:
    app = replay(recording("healthy"))
    async with app.run_test(size=(100, 30)) as pilot:
        await play_to_end(pilot)
        await pilot.press("p")
        assert shown_ranks(app) == []
        await pilot.press("p")
        assert shown_ranks(app) == list(range(16))


async def test_many_ranks_are_grouped_by_node_and_nodes_fold(recording: Recording) -> None:
    app = replay(recording("large"))
    async with app.run_test(size=(80, 24)) as pilot:
        await play_to_end(pilot)
        table = app.query_one(RankTable)
        assert table.is_grouped and table.rows[0].host == "node000"
        assert len(table.rows) == 512 + 64
        await pilot.press("enter")  # on node000's heading: fold it
        assert table.rows[1].host == "node001"
        await pilot.press("end")
        assert table.chosen.rank == 511
        await pilot.press("g")
        assert not table.is_grouped and len(table.rows) == 511 + 1
        await pilot.press("g", "slash", *"node002", "enter")  # a node by name: its heading, its ranks
        assert table.rows[0].host == "node002" and shown_ranks(app) == list(range(16, 24))


async def test_replay_pauses_steps_and_jumps_to_the_next_alert(recording: Recording) -> None:
    feed = ReplayFeed(str(recording("hang")), speed=1.0)
    app = build_app(feed)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("space")
        assert feed.paused
        at = feed.now()
        await pilot.press("full_stop")
        assert feed.now() == pytest.approx(at + 1.0)
        await pilot.press("n")
        for _ in range(200):
            if feed.paused and not feed.jumping:
                break
            await pilot.pause(0.02)
        assert feed.paused and feed.now() - feed.start > 20
        app.redraw()
        assert app.overview.culprits == {5}


async def test_help_and_quit(recording: Recording) -> None:
    app = replay(recording("healthy"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "q")
    assert app.return_code == 0


async def test_live_waits_with_a_clear_line_then_shows_a_real_stream(endpoint: str) -> None:
    """Simulated ranks' reports over real PUSH sockets into the app's bound endpoint."""
    app = build_app(LiveFeed(endpoint))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert app.overview.state == statuses.WAITING
        assert f"DISTMON_ENDPOINT={endpoint}" in app.query_one(RankTable).empty_message
        context = zmq.Context()
        sockets = [context.socket(zmq.DEALER) for _ in range(4)]
        try:
            for s in sockets:
                s.connect(endpoint)
            sim = SimJob(world=4, ranks_per_host=2, start=time.time() - 10)
            for _, raw in sim.stream(until=10, since=8):
                sockets[0].send(raw)
            for _ in range(100):
                if len(app.monitor.state.ranks) == 4:
                    break
                await pilot.pause(0.05)
            app.redraw()
            assert shown_ranks(app) == [0, 1, 2, 3]
            assert app.overview.job == "sim-job" and app.overview.hosts == 2
        finally:
            for s in sockets:
                s.close(linger=0)
            context.term()


async def test_a_job_killed_while_hung_shows_stopped_and_its_hang_unresolved() -> None:
    """A real 4-rank job recorded hanging, then stopped by torchrun's SIGTERM."""
    app = replay(DATA / "hang-rank2.distmon")
    async with app.run_test(size=(120, 36)) as pilot:
        await play_to_end(pilot)
        assert app.overview.state == statuses.STOPPED
        hangs = [a for a in app.monitor.alerts.history if a.kind == "hang"]
        assert hangs and all(a.resolved is None for a in hangs)
